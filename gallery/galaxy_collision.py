"""Two disk galaxies pass each other and raise tidal tails: a 3-D n-body run with kdsl.

Each galaxy is a heavy core with a thin disk of light stars on circular orbits; the two
disks are tilted against each other and set on a near-parabolic encounter. Gravity
(softened, G = 1) is summed over all pairs in ``float32`` with ``kd.vec3`` arithmetic,
and leapfrog (kick-drift-kick) steps run in one kernel call.

The picture is rendered by kernels as well: stars are projected through a camera
matrix (``kd.mat33 @ kd.vec3``) and splatted bilinearly into a two-channel density
image with atomic adds (many stars land on the same pixel), then tone-mapped with a
``max`` reduction, one colour per galaxy.

    python gallery/galaxy_collision.py               # 4096 stars, 600 steps
    python gallery/galaxy_collision.py --small       # a few seconds
"""

import argparse
import math
import sys
import time

import numpy as np
from PIL import Image

import kdsl as kd

#: Gravitational softening length: gravity is ``m / (r^2 + EPS2)^(3/2)``.
SOFTENING = 0.05
EPS2 = SOFTENING * SOFTENING
#: Largest tolerated drift of the total energy over a run, relative to the kinetic energy.
ENERGY_TOLERANCE = 1e-2


# --- dynamics -------------------------------------------------------------------------


@kd.func
def gravity(pos: kd.Array[kd.vec3], mass: kd.Array[kd.f32], i: kd.i64) -> kd.vec3:
    """Acceleration of body ``i`` from all the others."""
    p = pos[i]
    a = kd.vec3(0.0)
    for j in range(pos.shape[0]):
        d = pos[j] - p
        r2 = kd.dot(d, d) + EPS2
        inv_r = 1.0 / kd.sqrt(r2)
        a += (mass[j] * inv_r * inv_r * inv_r) * d
    return a


@kd.kernel
def accelerations(pos: kd.Array[kd.vec3], mass: kd.Array[kd.f32], acc: kd.Array[kd.vec3]):
    """Fill ``acc`` with the gravitational accelerations."""
    for i in kd.prange(pos.shape[0]):
        acc[i] = gravity(pos, mass, i)


@kd.kernel
def leapfrog(pos: kd.Array[kd.vec3], vel: kd.Array[kd.vec3], acc: kd.Array[kd.vec3],
             mass: kd.Array[kd.f32], dt: kd.f32, steps: kd.i32):
    """``steps`` kick-drift-kick steps; ``acc`` must hold the current accelerations."""
    n = pos.shape[0]
    for _ in range(steps):
        for i in kd.prange(n):
            vel[i] += 0.5 * dt * acc[i]
            pos[i] += dt * vel[i]
        for i in kd.prange(n):
            acc[i] = gravity(pos, mass, i)
            vel[i] += 0.5 * dt * acc[i]


@kd.kernel
def energies(pos: kd.Array[kd.vec3], vel: kd.Array[kd.vec3],
             mass: kd.Array[kd.f32]) -> tuple[kd.f64, kd.f64]:
    """Kinetic and (softened) potential energy, accumulated in ``float64``."""
    n = pos.shape[0]
    kinetic = kd.f64(0.0)
    potential = kd.f64(0.0)
    for i in kd.prange(n):
        pair_sum = kd.f32(0.0)
        for j in range(i + 1, n):
            d = pos[j] - pos[i]
            pair_sum += mass[j] / kd.sqrt(kd.dot(d, d) + EPS2)
        v = vel[i]
        kinetic += kd.f64(0.5 * mass[i] * kd.dot(v, v))
        potential -= kd.f64(mass[i] * pair_sum)
    return kinetic, potential


# --- rendering ------------------------------------------------------------------------


@kd.kernel
def splat(pos: kd.Array[kd.vec3], galaxy: kd.Array[kd.i32], camera: kd.mat33,
          zoom: kd.f32, density: kd.Array[kd.f32, 3]):
    """Add each star, bilinearly, into channel ``galaxy[i]`` of ``density`` (h, w, 2)."""
    height = density.shape[0]
    width = density.shape[1]
    for i in kd.prange(pos.shape[0]):
        q = camera @ pos[i]
        x = 0.5 * width + zoom * q.x - 0.5
        y = 0.5 * height - zoom * q.y - 0.5
        x0 = kd.floor(x)
        y0 = kd.floor(y)
        fx = x - x0
        fy = y - y0
        px = int(x0)
        py = int(y0)
        g = galaxy[i]
        if px >= 0 and py >= 0 and px + 1 < width and py + 1 < height:
            density[py, px, g] += (1.0 - fx) * (1.0 - fy)      # atomic adds
            density[py, px + 1, g] += fx * (1.0 - fy)
            density[py + 1, px, g] += (1.0 - fx) * fy
            kd.atomic_add(density, (py + 1, px + 1, g), fx * fy)  # the same, spelt out


@kd.kernel
def tone_map(density: kd.Array[kd.f32, 3], image: kd.Array[kd.u8, 3]):
    """Logarithmic tone map of two density channels to RGB: blue-white and orange-white."""
    height = density.shape[0]
    width = density.shape[1]
    peak = kd.f32(0.0)
    for y, x in kd.ndrange(height, width):
        peak = max(peak, density[y, x, 0] + density[y, x, 1])
    scale = 1.0 / kd.log(1.0 + max(peak, 1e-3))             # (an empty view stays black)
    blue = kd.vec3(0.35, 0.55, 1.0)
    orange = kd.vec3(1.0, 0.55, 0.2)
    for y, x in kd.ndrange(height, width):
        a = kd.log(1.0 + density[y, x, 0]) * scale
        b = kd.log(1.0 + density[y, x, 1]) * scale
        glow = kd.clamp(1.6 * (a + b), 0.0, 1.0)
        color = (a * blue + b * orange) * 2.2 + kd.vec3(glow * glow * 0.5)
        color += kd.vec3(0.01, 0.01, 0.03)                       # night sky
        for c in range(3):
            image[y, x, c] = kd.u8(255.0 * kd.clamp(color[c], 0.0, 1.0))


# --- initial conditions ---------------------------------------------------------------


def rotation(tilt: float, spin: float) -> np.ndarray:
    """Rotation by ``spin`` about z, then by ``tilt`` about x."""
    ct, st, cs, ss = math.cos(tilt), math.sin(tilt), math.cos(spin), math.sin(spin)
    rx = np.array([[1, 0, 0], [0, ct, -st], [0, st, ct]])
    rz = np.array([[cs, -ss, 0], [ss, cs, 0], [0, 0, 1]])
    return rx @ rz


def disk_galaxy(stars: int, core_mass: float, disk_mass: float, radius: float,
                orientation: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A core (body 0) and ``stars`` on circular orbits around it: pos, vel, mass."""
    r = radius * np.sqrt(rng.uniform(0.04, 1.0, stars))         # uniform surface density
    phi = rng.uniform(0.0, 2.0 * math.pi, stars)
    enclosed = core_mass + disk_mass * (r / radius) ** 2
    speed = np.sqrt(enclosed * r**2 / (r**2 + SOFTENING**2) ** 1.5)
    pos = np.stack([r * np.cos(phi), r * np.sin(phi), rng.normal(0, 0.01, stars)], -1)
    vel = np.stack([-speed * np.sin(phi), speed * np.cos(phi), np.zeros(stars)], -1)
    pos = np.vstack([np.zeros(3), pos]) @ orientation.T
    vel = np.vstack([np.zeros(3), vel]) @ orientation.T
    mass = np.concatenate([[core_mass], np.full(stars, disk_mass / stars)])
    return pos, vel, mass


def encounter(stars: int, seed: int) -> tuple[np.ndarray, ...]:
    """Two galaxies on a near-parabolic orbit: pos, vel (float32), mass, galaxy id."""
    rng = np.random.default_rng(seed)
    half = stars // 2
    a = disk_galaxy(half, 1.0, 0.05, 1.0, rotation(0.3, 0.0), rng)
    b = disk_galaxy(stars - half, 0.7, 0.05, 0.8, rotation(-0.6, 0.8), rng)
    separation = np.array([4.0, 2.0, 0.0])
    total = a[2].sum() + b[2].sum()
    speed = math.sqrt(2.0 * total / np.linalg.norm(separation))  # parabolic
    velocity = np.array([-speed, 0.0, 0.0])
    wa, wb = b[2].sum() / total, a[2].sum() / total              # centre of mass at rest
    pos = np.vstack([a[0] - wa * separation, b[0] + wb * separation])
    vel = np.vstack([a[1] - wa * velocity, b[1] + wb * velocity])
    mass = np.concatenate([a[2], b[2]])
    galaxy = np.concatenate([np.zeros(half + 1), np.ones(stars - half + 1)]).astype(np.int32)
    return (pos.astype(np.float32), vel.astype(np.float32), mass.astype(np.float32), galaxy)


def render(pos: np.ndarray, galaxy: np.ndarray, size: int, extent: float) -> Image.Image:
    """Picture of the stars seen from above, slightly tilted."""
    density = np.zeros((size, size, 2), np.float32)
    camera = rotation(-0.5, 0.0).astype(np.float32)
    splat(pos, galaxy, camera, size / (2.0 * extent), density)
    image = np.zeros((size, size, 3), np.uint8)
    tone_map(density, image)
    return Image.fromarray(image, "RGB")


# --- command line ---------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stars", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--size", type=int, default=800, help="image side in pixels")
    parser.add_argument("--extent", type=float, default=4.0, help="half-width of the view")
    parser.add_argument("--output", default="galaxy_collision.png", help="PNG to write")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where the arrays live and the kernels run")
    parser.add_argument("--small", action="store_true",
                        help="a quick run: 1024 stars, 400 px")
    args = parser.parse_args(argv)
    if args.small:
        args.stars, args.size = 1024, 400
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pos, vel, mass, galaxy = encounter(args.stars, args.seed)
    acc = np.zeros_like(pos)
    print(f"bodies: {len(pos)}  steps: {args.steps}  dt: {args.dt}  "
          f"device: {args.device}  threads: {kd.get_num_threads()}")
    if args.device == "cuda":
        pos, vel, acc, mass = (kd.array(a, device="cuda") for a in (pos, vel, acc, mass))

    start = time.perf_counter()
    accelerations(pos, mass, acc)
    leapfrog(pos, vel, acc, mass, args.dt, 0)                  # compile
    print(f"compile: {time.perf_counter() - start:.2f} s")

    kinetic0, potential0 = (float(e) for e in energies(pos, vel, mass))
    start = time.perf_counter()
    leapfrog(pos, vel, acc, mass, args.dt, args.steps)
    elapsed = time.perf_counter() - start
    kinetic1, potential1 = (float(e) for e in energies(pos, vel, mass))
    pairs = float(len(pos)) ** 2 * args.steps
    print(f"time: {elapsed:.2f} s ({1e3 * elapsed / max(args.steps, 1):.2f} ms/step, "
          f"{pairs / max(elapsed, 1e-9) / 1e9:.2f} G pair interactions/s)")
    e0, e1 = kinetic0 + potential0, kinetic1 + potential1
    drift = abs(e1 - e0) / kinetic0
    print(f"energy: kinetic {kinetic0:.5f} -> {kinetic1:.5f}  potential {potential0:.5f} -> "
          f"{potential1:.5f}")
    print(f"        total {e0:.5f} -> {e1:.5f}  drift (relative to kinetic) {drift:.2e}")

    if args.device == "cuda":
        pos = pos.numpy()
    render(pos, galaxy, args.size, args.extent).save(args.output)
    print(f"wrote {args.output}")
    if not math.isfinite(drift) or drift > ENERGY_TOLERANCE:
        print(f"error: energy not conserved (drift {drift:.2e} > {ENERGY_TOLERANCE:.0e})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

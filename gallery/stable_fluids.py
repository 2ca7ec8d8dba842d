"""Stable fluids: smoke rising and swirling in a closed box, with kdsl.

Jos Stam's "stable fluids" method on a staggered (MAC) grid: the pressure and the dye
live at cell centres, the horizontal velocity ``u`` on the vertical cell faces and the
vertical velocity ``v`` on the horizontal ones. Every time step adds the forces (two jets
and a plume that inject dye, buoyancy lifting the dye, vorticity confinement keeping the
swirls alive), moves the velocity along itself (semi-Lagrangian advection: trace each
sample point back along the flow and interpolate bilinearly), makes it divergence-free
again (projection: Jacobi iterations for the pressure, whose gradient is then
subtracted), and carries the dye along with the new velocity.

The whole simulation is one kernel call: a serial ``for step in range(steps)`` whose body
mixes explicit parallel loops (``kd.ndrange``: sources, advection, vorticity
confinement) with NumPy-style tensor expressions (buoyancy, curl, the divergence, the
pressure Jacobi iterations on swapped buffers, the gradient subtraction, statistics):

    div[1:-1, 1:-1] = -(u[1:, 1:-1] - u[:-1, 1:-1] + v[1:-1, 1:] - v[1:-1, :-1])
    p_new[1:-1, 1:-1] = 0.25 * (div[1:-1, 1:-1] + p[:-2, 1:-1] + p[2:, 1:-1]
                                + p[1:-1, :-2] + p[1:-1, 2:])
    u[1:-1, 1:-1] -= p[2:-1, 1:-1] - p[1:-2, 1:-1]

On the staggered grid the divergence of the pressure gradient is exactly the 5-point
Laplacian that the Jacobi sweeps invert, so a converged projection leaves no divergence
at all (the collocated grid of Stam's paper cannot: its central differences miss the
checkerboard modes).

Arrays are indexed ``[x, y]`` with ``y`` pointing up. Inside the kernels lengths are in
cells: an ``nx x ny`` box is ``[0, nx] x [0, ny]``. Cell-centred arrays have one ring of
ghost cells, ``(nx + 2, ny + 2)``, element ``[a, b]`` at ``(a - 0.5, b - 0.5)``; ``u`` is
``(nx + 1, ny + 2)`` with ``u[a, b]`` at ``(a, b - 0.5)``; ``v`` is ``(nx + 2, ny + 1)``
with ``v[a, b]`` at ``(a - 0.5, b)``. The walls are free-slip: the velocity through them
is zero, the ghost rows copy the tangential velocity.

    python gallery/stable_fluids.py                  # 256 x 256 cells, 1200 steps
    python gallery/stable_fluids.py --small          # a few seconds
    python gallery/stable_fluids.py --size 512 --steps 2400 --output smoke.png

The picture is the final dye density through a colour map. The script checks that, once
the flow has settled (the second half of the run), every projection removed at least 99%
of the largest divergence it was given, and that the dye stayed finite and within [0, 1]
(advection only interpolates); it exits with status 1 otherwise.
"""

import argparse
import sys
import time

import numpy as np
from PIL import Image

import kdsl as kd

#: Columns of the source table: centre (x, y) and radius in cells, the velocity imposed
#: inside (cells per unit time) and the dye density injected (at most 1).
SX, SY, SRADIUS, SVX, SVY, SDYE = range(6)

#: In the second half of a run (the pressure of the last step is then a good first
#: guess), a projection must leave at most this fraction of the largest divergence it
#: was given.
DIVERGENCE_RATIO_LIMIT = 0.01


# --- walls ----------------------------------------------------------------------------


@kd.func
def walls_scalar(f: kd.Array[kd.f32, 2]):
    """No flux through the walls: the ghost cells copy their neighbours inside."""
    nx = f.shape[0] - 2
    ny = f.shape[1] - 2
    for b in range(1, ny + 1):
        f[0, b] = f[1, b]
        f[nx + 1, b] = f[nx, b]
    for a in range(0, nx + 2):
        f[a, 0] = f[a, 1]
        f[a, ny + 1] = f[a, ny]


@kd.func
def walls_velocity(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2]):
    """Free slip: nothing flows through a wall (its faces hold zero), the ghost rows of the
    tangential velocity copy the row inside."""
    nx = u.shape[0] - 1
    ny = v.shape[1] - 1
    for b in range(ny + 2):
        u[0, b] = 0.0
        u[nx, b] = 0.0
    for a in range(nx + 2):
        v[a, 0] = 0.0
        v[a, ny] = 0.0
    for a in range(nx + 1):
        u[a, 0] = u[a, 1]
        u[a, ny + 1] = u[a, ny]
    for b in range(ny + 1):
        v[0, b] = v[1, b]
        v[nx + 1, b] = v[nx, b]


# --- sampling -------------------------------------------------------------------------


@kd.func
def sample(f: kd.Array[kd.f32, 2], x: kd.f32, y: kd.f32) -> kd.f32:
    """Bilinear interpolation of ``f`` at the fractional index ``(x, y)``, clamped to the
    array."""
    cx = kd.clamp(x, 0.0, f.shape[0] - 1.0)
    cy = kd.clamp(y, 0.0, f.shape[1] - 1.0)
    i = min(int(cx), f.shape[0] - 2)
    j = min(int(cy), f.shape[1] - 2)
    s = cx - i
    t = cy - j
    return ((1.0 - s) * ((1.0 - t) * f[i, j] + t * f[i, j + 1])
            + s * ((1.0 - t) * f[i + 1, j] + t * f[i + 1, j + 1]))


@kd.func
def velocity_at(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2], p: kd.vec2) -> kd.vec2:
    """The velocity at the point ``p`` of the box (interpolated from both face grids)."""
    return kd.vec2(sample(u, p.x, p.y + 0.5), sample(v, p.x + 0.5, p.y))


@kd.func
def trace_back(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2], p: kd.vec2,
               dt: kd.f32) -> kd.vec2:
    """Where the fluid at ``p`` was ``dt`` earlier (a midpoint step), kept in the box."""
    mid = p - 0.5 * dt * velocity_at(u, v, p)
    back = p - dt * velocity_at(u, v, mid)
    nx = u.shape[0] - 1
    ny = v.shape[1] - 1
    return kd.vec2(kd.clamp(back.x, 0.0, nx), kd.clamp(back.y, 0.0, ny))


# --- forces ---------------------------------------------------------------------------


@kd.func
def source_weight(sources: kd.Array[kd.f32, 2], k: kd.i32, p: kd.vec2) -> kd.f32:
    """How much source ``k`` acts at ``p``: 1 at its centre, falling smoothly to 0 at its
    rim."""
    d = p - kd.vec2(sources[k, SX], sources[k, SY])
    r = sources[k, SRADIUS]
    w = kd.clamp(1.0 - kd.dot(d, d) / (r * r), 0.0, 1.0)
    return w * w * (3.0 - 2.0 * w)


@kd.func
def add_sources(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2], dye: kd.Array[kd.f32, 2],
                sources: kd.Array[kd.f32, 2]):
    """Inside each source disc, pull the velocity towards the source's and raise the dye
    to the source's density. Each cell also sets its right and top faces."""
    nx = u.shape[0] - 1
    ny = v.shape[1] - 1
    for i, j in kd.ndrange(nx, ny):
        a = i + 1
        b = j + 1
        cu = u[a, b]
        cv = v[a, b]
        cd = dye[a, b]
        for k in range(sources.shape[0]):
            d = kd.vec2(a - 0.5 - sources[k, SX], b - 0.5 - sources[k, SY])
            reach = sources[k, SRADIUS] + 1.0
            if kd.dot(d, d) >= reach * reach:
                continue                             # too far for any of the three points
            w = source_weight(sources, k, kd.vec2(a, b - 0.5))
            cu += w * (sources[k, SVX] - cu)
            w = source_weight(sources, k, kd.vec2(a - 0.5, b))
            cv += w * (sources[k, SVY] - cv)
            w = source_weight(sources, k, kd.vec2(a - 0.5, b - 0.5))
            cd = max(cd, w * sources[k, SDYE])
        if a < nx:
            u[a, b] = cu
        if b < ny:
            v[a, b] = cv
        dye[a, b] = cd


@kd.func
def corner_force(curl: kd.Array[kd.f32, 2], a: kd.i64, b: kd.i64, strength: kd.f32) -> kd.vec2:
    """The vorticity-confinement force at cell corner ``(a, b)``: ``strength`` times the
    vorticity, turned towards the direction in which its magnitude grows (zero on the
    walls)."""
    if a <= 0 or b <= 0 or a >= curl.shape[0] - 1 or b >= curl.shape[1] - 1:
        return kd.vec2(0.0)
    gx = 0.5 * (abs(curl[a + 1, b]) - abs(curl[a - 1, b]))
    gy = 0.5 * (abs(curl[a, b + 1]) - abs(curl[a, b - 1]))
    scale = strength * curl[a, b] / (kd.sqrt(gx * gx + gy * gy) + 1e-6)
    return kd.vec2(scale * gy, -scale * gx)


@kd.func
def confine_vorticity(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2],
                      curl: kd.Array[kd.f32, 2], strength: kd.f32):
    """Vorticity confinement (Fedkiw, Stam and Jensen): push the flow around the places
    where the vorticity peaks, giving back the small swirls that numerical diffusion
    smooths away. ``curl`` holds the vorticity on the cell corners, ``(nx + 1, ny + 1)``;
    ``strength`` is epsilon times the time step. A face gets the mean force of its two
    corners."""
    curl[:, :] = v[1:, :] - v[:-1, :] - (u[:, 1:] - u[:, :-1])
    nx = u.shape[0] - 1
    ny = v.shape[1] - 1
    for i, j in kd.ndrange(nx, ny):
        a = i + 1
        b = j + 1
        top_right = corner_force(curl, a, b, strength)
        if a < nx:
            u[a, b] = u[a, b] + 0.5 * (corner_force(curl, a, b - 1, strength).x + top_right.x)
        if b < ny:
            v[a, b] = v[a, b] + 0.5 * (corner_force(curl, a - 1, b, strength).y + top_right.y)


# --- advection ------------------------------------------------------------------------


@kd.func
def advect_velocity(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2], u0: kd.Array[kd.f32, 2],
                    v0: kd.Array[kd.f32, 2], dt: kd.f32):
    """``u, v`` = the velocity ``u0, v0`` moved along itself for ``dt`` (inner faces)."""
    nx = u.shape[0] - 1
    ny = v.shape[1] - 1
    for i, j in kd.ndrange(nx, ny):
        a = i + 1
        b = j + 1
        if a < nx:
            p = trace_back(u0, v0, kd.vec2(a, b - 0.5), dt)
            u[a, b] = sample(u0, p.x, p.y + 0.5)
        if b < ny:
            p = trace_back(u0, v0, kd.vec2(a - 0.5, b), dt)
            v[a, b] = sample(v0, p.x + 0.5, p.y)


@kd.func
def advect_scalar(f: kd.Array[kd.f32, 2], f0: kd.Array[kd.f32, 2], u: kd.Array[kd.f32, 2],
                  v: kd.Array[kd.f32, 2], dt: kd.f32, keep: kd.f32):
    """``f`` = the cell-centred ``f0`` carried along ``u, v`` for ``dt``, times ``keep``."""
    for i, j in kd.ndrange(f.shape[0] - 2, f.shape[1] - 2):
        p = trace_back(u, v, kd.vec2(i + 0.5, j + 0.5), dt)
        f[i + 1, j + 1] = keep * sample(f0, p.x + 0.5, p.y + 0.5)


# --- projection -----------------------------------------------------------------------


@kd.func
def max_divergence(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2]) -> kd.f32:
    """The largest magnitude of the divergence of ``u, v`` over the cells (times the
    cell size): one fused reduction, no array written."""
    return kd.max(kd.abs(u[1:, 1:-1] - u[:-1, 1:-1] + v[1:-1, 1:] - v[1:-1, :-1]))


@kd.func
def project(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2], p: kd.Array[kd.f32, 2],
            p_new: kd.Array[kd.f32, 2], div: kd.Array[kd.f32, 2],
            iterations: kd.i32) -> tuple[kd.f32, kd.f32]:
    """Make ``u, v`` (nearly) divergence-free: ``iterations`` Jacobi sweeps for the pressure
    Poisson equation, from the pressure in ``p`` (the last step's, a good first guess),
    then subtract its gradient. Returns the largest divergence before and after."""
    before = max_divergence(u, v)
    div[1:-1, 1:-1] = -(u[1:, 1:-1] - u[:-1, 1:-1] + v[1:-1, 1:] - v[1:-1, :-1])
    for _ in range(iterations):
        p_new[1:-1, 1:-1] = 0.25 * (div[1:-1, 1:-1] + p[:-2, 1:-1] + p[2:, 1:-1]
                                    + p[1:-1, :-2] + p[1:-1, 2:])
        walls_scalar(p_new)
        p, p_new = p_new, p
    u[1:-1, 1:-1] -= p[2:-1, 1:-1] - p[1:-2, 1:-1]
    v[1:-1, 1:-1] -= p[1:-1, 2:-1] - p[1:-1, 1:-2]
    walls_velocity(u, v)
    return before, max_divergence(u, v)


@kd.kernel
def project_velocity(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2],
                     iterations: kd.i32) -> tuple[kd.f32, kd.f32]:
    """One projection of ``u, v`` starting from zero pressure; returns the largest
    divergence before and after."""
    p = kd.zeros((v.shape[0], u.shape[1]))
    return project(u, v, p, kd.zeros_like(p), kd.zeros_like(p), iterations)


# --- the time loop --------------------------------------------------------------------


@kd.kernel
def simulate(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2], dye: kd.Array[kd.f32, 2],
             p: kd.Array[kd.f32, 2], sources: kd.Array[kd.f32, 2], dt: kd.f32,
             buoyancy: kd.f32, confinement: kd.f32, dye_decay: kd.f32, jacobi: kd.i32,
             steps: kd.i32, stats: kd.Array[kd.f32, 2]):
    """Advance ``steps`` time steps of ``dt``. ``p`` keeps the pressure between calls.
    Records, for each step, the largest divergence before and after the projection and
    the total dye in ``stats[step]``."""
    u0 = kd.zeros_like(u)
    v0 = kd.zeros_like(v)
    dye0 = kd.zeros_like(dye)
    p_new = kd.zeros_like(p)
    div = kd.zeros_like(p)
    curl = kd.zeros((u.shape[0], v.shape[1]))
    keep = 1.0 / (1.0 + dt * dye_decay)
    for step in range(steps):
        # forces
        add_sources(u, v, dye, sources)
        v[1:-1, 1:-1] += dt * buoyancy * 0.5 * (dye[1:-1, 1:-2] + dye[1:-1, 2:-1])
        confine_vorticity(u, v, curl, dt * confinement)
        walls_velocity(u, v)
        # self-advection (of the inner faces), then projection
        u0[:, :] = u
        v0[:, :] = v
        advect_velocity(u, v, u0, v0, dt)
        before, after = project(u, v, p, p_new, div, jacobi)
        # the dye follows the divergence-free velocity
        dye0[:, :] = dye
        advect_scalar(dye, dye0, u, v, dt, keep)
        walls_scalar(dye)
        stats[step, 0] = before
        stats[step, 1] = after
        stats[step, 2] = kd.sum(dye[1:-1, 1:-1])


# --- Python side ----------------------------------------------------------------------


def make_grid(nx: int, ny: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Velocity ``u, v``, dye and pressure of an ``nx x ny`` box at rest."""
    return (np.zeros((nx + 1, ny + 2), np.float32), np.zeros((nx + 2, ny + 1), np.float32),
            np.zeros((nx + 2, ny + 2), np.float32), np.zeros((nx + 2, ny + 2), np.float32))


def default_sources(n: int, speed: float) -> np.ndarray:
    """Two jets from the side walls and a plume from the floor of an ``n x n`` box, in
    cells (``speed`` in box widths per unit time)."""
    table = np.array([
        # x,    y,    radius, vx,    vy,   dye      (box widths, speeds in units of speed)
        [0.00, 0.22, 0.040,  1.00,  0.45, 1.0],     # jet from the left wall
        [1.00, 0.42, 0.035, -1.00,  0.20, 0.8],     # jet from the right wall
        [0.56, 0.00, 0.060,  0.00,  0.50, 0.9],     # plume from the floor
    ], np.float64)
    table[:, [SX, SY, SRADIUS]] *= n
    table[:, [SVX, SVY]] *= speed * n
    return table.astype(np.float32)


def run(n: int, steps: int, dt: float = 0.004, speed: float = 0.6, buoyancy: float = 1.0,
        confinement: float = 1.2, dye_decay: float = 0.1,
        jacobi: int = 40, device: str = "cpu") -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                        np.ndarray]:
    """Simulate ``steps`` steps on an ``n x n`` grid from rest, in one kernel call, with
    the fields on ``device``.

    ``speed`` and ``buoyancy`` are in box widths (per unit time, per unit time squared).
    Returns the velocity ``u, v``, the dye and the per-step statistics (NumPy arrays).
    """
    fields = (*make_grid(n, n), np.zeros((steps, 3), np.float32), default_sources(n, speed))
    if device == "cuda":
        fields = tuple(kd.array(a, device="cuda") for a in fields)
    u, v, dye, p, stats, sources = fields
    simulate(u, v, dye, p, sources, dt, buoyancy * n, confinement,
             dye_decay, jacobi, steps, stats)
    if device == "cuda":
        return u.numpy(), v.numpy(), dye.numpy(), stats.numpy()
    return u, v, dye, stats


# --- picture --------------------------------------------------------------------------

#: Colour map stops (a "magma"-like ramp), from no dye to dense dye.
_COLORMAP = np.array([
    [2, 2, 10], [28, 16, 68], [79, 18, 123], [129, 37, 129], [181, 54, 122],
    [229, 80, 100], [251, 135, 97], [254, 194, 135], [252, 253, 191],
], dtype=np.float64)


def colormap(t: np.ndarray) -> np.ndarray:
    """RGB colours (uint8, shape ``t.shape + (3,)``) for values ``t`` in [0, 1]."""
    x = np.clip(t, 0.0, 1.0) * (len(_COLORMAP) - 1)
    lo = np.minimum(x.astype(int), len(_COLORMAP) - 2)
    frac = (x - lo)[..., None]
    return ((1 - frac) * _COLORMAP[lo] + frac * _COLORMAP[lo + 1]).astype(np.uint8)


def render(dye: np.ndarray, min_size: int = 512) -> Image.Image:
    """The dye inside the box (ghost cells dropped), ``y`` up, at least ``min_size`` px."""
    density = dye[1:-1, 1:-1].T[::-1]
    image = Image.fromarray(colormap(np.sqrt(np.clip(density, 0.0, 1.0))), "RGB")
    if image.width < min_size:
        scale = -(-min_size // image.width)
        image = image.resize((image.width * scale, image.height * scale),
                             Image.Resampling.BICUBIC)
    return image


# --- command line ---------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=256, help="grid cells per side")
    parser.add_argument("--steps", type=int, default=1200, help="time steps")
    parser.add_argument("--dt", type=float, default=0.004, help="time step")
    parser.add_argument("--jacobi", type=int, default=40,
                        help="Jacobi iterations per pressure solve")
    parser.add_argument("--output", default="stable_fluids.png", help="PNG to write")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where the arrays live and the kernels run")
    parser.add_argument("--small", action="store_true",
                        help="a quick run: 96 x 96 cells, 300 steps")
    args = parser.parse_args(argv)
    if args.small:
        args.size, args.steps, args.dt = 96, 300, 0.016
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.size
    print(f"grid: {n} x {n}  steps: {args.steps}  dt: {args.dt}  "
          f"Jacobi iterations: {args.jacobi}  device: {args.device}  "
          f"threads: {kd.get_num_threads()}")

    start = time.perf_counter()
    run(n, 0, args.dt, jacobi=args.jacobi, device=args.device)   # compiles the kernel
    print(f"compile: {time.perf_counter() - start:.2f} s")

    start = time.perf_counter()
    u, v, dye, stats = run(n, args.steps, args.dt, jacobi=args.jacobi, device=args.device)
    elapsed = time.perf_counter() - start
    print(f"simulate: {args.steps} steps in {elapsed:.2f} s "
          f"({1e3 * elapsed / max(args.steps, 1):.2f} ms/step, one kernel call)")

    before, after, total = stats[:, 0], stats[:, 1], stats[:, 2]
    ratio = after / np.maximum(before, 1e-30)
    settled = ratio[len(ratio) // 2:]
    worst = float(settled.max()) if len(settled) else 0.0
    if len(ratio):
        print(f"divergence (largest, in cells per unit time): first step {before[0]:.3g} -> "
              f"{after[0]:.3g};  last step {before[-1]:.3g} -> {after[-1]:.3g};  "
              f"worst ratio after/before in the second half {worst:.2e}")
    speed = max(float(np.abs(u).max()), float(np.abs(v).max())) / n
    print(f"dye: total {float(total[-1]) if len(total) else 0.0:.1f} cells, "
          f"min {dye.min():.3g}, max {dye.max():.3g};  largest speed {speed:.2f} "
          f"box widths per unit time")

    render(dye).save(args.output)
    print(f"wrote {args.output}")

    ok = True
    if not (np.all(np.isfinite(dye)) and np.all(np.isfinite(u)) and np.all(np.isfinite(v))):
        print("error: the fields are not finite", file=sys.stderr)
        ok = False
    elif dye.min() < 0.0 or dye.max() > 1.0 + 1e-5:
        print(f"error: dye left [0, 1]: min {dye.min()}, max {dye.max()}", file=sys.stderr)
        ok = False
    if not worst <= DIVERGENCE_RATIO_LIMIT:
        print(f"error: a projection left {worst:.2e} of the divergence "
              f"(limit {DIVERGENCE_RATIO_LIMIT})", file=sys.stderr)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

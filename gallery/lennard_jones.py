"""A 2-D Lennard-Jones fluid, simulated with kdsl kernels.

Particles of unit mass interact through the Lennard-Jones pair potential (reduced
units: sigma = epsilon = 1), truncated at ``CUTOFF`` and shifted so that it is
continuous there. They live in a periodic square box and are integrated with
velocity Verlet. Forces come from a ``kd.NeighborGrid`` rebuilt at every step (a
parallel radix sort of the particles by cell): each particle visits the particles
within the cutoff with ``for j in grid.neighbors(p, CUTOFF)``.

The whole time-stepping loop runs inside one kernel call: a serial ``for step in
range(steps)`` whose body is a handful of ``kd.prange`` loops (kick and drift, the
grid, forces with a potential-energy reduction, kick with a kinetic-energy
reduction). Started as a cold, sparse lattice, the fluid condenses into droplets.

    python gallery/lennard_jones.py                  # 6400 particles, 6000 + 2000 steps
    python gallery/lennard_jones.py --small          # a few seconds
    python gallery/lennard_jones.py --particles 20000 --steps 5000 --output lj.png
    mpiexec -n 4 python gallery/lennard_jones.py --distributed   # over 4 MPI ranks

The picture shows the final state, particles coloured by speed. The script checks that
the total energy is conserved and exits with status 1 if it drifted too far.
"""

import argparse
import math
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

import kdsl as kd

#: Interaction range of the truncated potential, in units of sigma.
CUTOFF = 2.5
CUTOFF2 = CUTOFF * CUTOFF
#: Potential energy at the cutoff, subtracted so that the potential is continuous.
ENERGY_SHIFT = 4.0 * (CUTOFF ** -12 - CUTOFF ** -6)

#: Largest tolerated drift of the total energy, per particle, over a run.
ENERGY_TOLERANCE = 5e-3


# --- physics: pair interaction and periodic geometry ----------------------------------


@kd.func
def pair_interaction(r2: kd.f32) -> tuple[kd.f32, kd.f32]:
    """Lennard-Jones force over distance, and shifted energy, for a squared distance."""
    inv2 = 1.0 / r2
    inv6 = inv2 * inv2 * inv2
    force_over_r = 24.0 * inv6 * (2.0 * inv6 - 1.0) * inv2
    energy = 4.0 * inv6 * (inv6 - 1.0) - ENERGY_SHIFT
    return force_over_r, energy


@kd.func
def minimum_image(d: kd.vec2, box: kd.f32) -> kd.vec2:
    """The periodic image of the separation ``d`` that is shortest."""
    return d - box * kd.floor(d / box + 0.5)


@kd.func
def wrap(p: kd.vec2, box: kd.f32) -> kd.vec2:
    """Position ``p`` folded back into the box ``[0, box)^2``."""
    return p - box * kd.floor(p / box)


@kd.func
def cell_coords(p: kd.vec2, box: kd.f32, ncell: kd.i32) -> kd.ivec2:
    """Integer cell coordinates of position ``p`` on an ``ncell x ncell`` grid."""
    q = p * (kd.f32(ncell) / box)
    cx = min(int(q.x), ncell - 1)
    cy = min(int(q.y), ncell - 1)
    return kd.ivec2(max(cx, 0), max(cy, 0))


@kd.func
def add_pair_force(force: kd.vec2, energy: kd.f32, i: kd.i64, j: kd.i64, p: kd.vec2,
                   pos: kd.Array[kd.vec2], box: kd.f32) -> tuple[kd.vec2, kd.f32]:
    """``force`` and ``energy`` plus the force on particle ``i`` (at ``p``) from particle
    ``j`` and their pair energy, if ``j`` is another particle within the cutoff. Both
    force loops (the cell list and the neighbour grid) sum it over the particles they
    visit."""
    if j != i:
        d = minimum_image(p - pos[j], box)
        r2 = kd.dot(d, d)
        if r2 < CUTOFF2:
            f, e = pair_interaction(r2)
            force += f * d
            energy += e
    return force, energy


# --- cell list of the distributed run (mpi_runs/lennard_jones.py) ----------------------


@kd.func
def build_cells(pos: kd.Array[kd.vec2], box: kd.f32, ncell: kd.i32,
                cell_start: kd.Array[kd.i32], cell_fill: kd.Array[kd.i32],
                particle_cell: kd.Array[kd.i32], cell_particles: kd.Array[kd.i32]):
    """Sort the particles into cells (a counting sort).

    Afterwards the particles of cell ``c`` are
    ``cell_particles[cell_start[c]:cell_start[c + 1]]``, in increasing order.
    """
    n = pos.shape[0]
    ncells = ncell * ncell
    for c in kd.prange(ncells):
        cell_fill[c] = 0
    for i in kd.prange(n):
        q = cell_coords(pos[i], box, ncell)
        c = q.x + ncell * q.y
        particle_cell[i] = c
        cell_fill[c] += 1                    # atomic: particles share cells
    start = 0
    for c in range(ncells):                  # serial exclusive prefix sum
        cell_start[c] = start
        start += cell_fill[c]
        cell_fill[c] = 0
    cell_start[ncells] = start
    for i in range(n):                       # serial scatter: deterministic order
        c = particle_cell[i]
        cell_particles[cell_start[c] + cell_fill[c]] = i
        cell_fill[c] += 1


# --- forces ---------------------------------------------------------------------------


@kd.func
def particle_force(i: kd.i32, pos: kd.Array[kd.vec2], box: kd.f32, ncell: kd.i32,
                   cell_start: kd.Array[kd.i32],
                   cell_particles: kd.Array[kd.i32]) -> tuple[kd.vec2, kd.f32]:
    """Force on particle ``i`` and its share (half) of its pair energies.

    With fewer than three cells per side the neighbour stencil would visit a cell
    twice, so the grid is then a single cell and this is an all-pairs sum.
    """
    p = pos[i]
    home = cell_coords(p, box, ncell)
    reach = 1 if ncell >= 3 else 0
    force = kd.vec2(0.0)
    energy = kd.f32(0.0)     # an f32 accumulator, stated explicitly
    for oy in range(-reach, reach + 1):
        for ox in range(-reach, reach + 1):
            c = (home.x + ox) % ncell + ncell * ((home.y + oy) % ncell)
            for k in range(cell_start[c], cell_start[c + 1]):
                force, energy = add_pair_force(force, energy, i, cell_particles[k], p, pos, box)
    return force, 0.5 * energy


@kd.func
def compute_forces(pos: kd.Array[kd.vec2], acc: kd.Array[kd.vec2], box: kd.f32) -> kd.f32:
    """Fill ``acc`` with the forces (unit mass) and return the potential energy."""
    grid = kd.NeighborGrid(pos, CUTOFF, (0.0, 0.0), (box, box), periodic=True)
    potential = 0.0
    for i in kd.prange(pos.shape[0]):
        p = pos[i]
        force = kd.vec2(0.0)
        energy = kd.f32(0.0)     # an f32 accumulator, stated explicitly
        for j in grid.neighbors(p, CUTOFF):
            force, energy = add_pair_force(force, energy, i, j, p, pos, box)
        acc[i] = force
        potential += 0.5 * energy            # reduction
    return potential


@kd.kernel
def forces(pos: kd.Array[kd.vec2], acc: kd.Array[kd.vec2], box: kd.f32) -> kd.f32:
    """Fill ``acc`` with the forces and return the potential energy."""
    return compute_forces(pos, acc, box)


@kd.kernel
def kinetic_energy(vel: kd.Array[kd.vec2]) -> kd.f32:
    """Total kinetic energy of unit-mass particles."""
    total = 0.0
    for i in kd.prange(vel.shape[0]):
        total += 0.5 * kd.dot(vel[i], vel[i])
    return total


@kd.func
def kick_and_drift(pos: kd.Array[kd.vec2], vel: kd.Array[kd.vec2], acc: kd.Array[kd.vec2],
                   box: kd.f32, dt: kd.f32):
    """The first half kick of a velocity-Verlet step, then the drift (wrapped into the box)."""
    for i in kd.prange(pos.shape[0]):
        v = vel[i] + 0.5 * dt * acc[i]
        vel[i] = v
        pos[i] = wrap(pos[i] + dt * v, box)


@kd.func
def kick(vel: kd.Array[kd.vec2], acc: kd.Array[kd.vec2], dt: kd.f32) -> kd.f32:
    """The second half kick; returns the kinetic energy."""
    kinetic = kd.f32(0.0)                    # an f32 accumulator, stated explicitly
    for i in kd.prange(vel.shape[0]):
        v = vel[i] + 0.5 * dt * acc[i]
        vel[i] = v
        kinetic += 0.5 * kd.dot(v, v)
    return kinetic


@kd.func
def thermostat(vel: kd.Array[kd.vec2], kinetic: kd.f32, n: kd.i64, temperature: kd.f32,
               coupling: kd.f32) -> kd.f32:
    """Berendsen: scales the velocities so that the kinetic energy ``kinetic`` of ``n``
    particles moves towards ``n * temperature``; returns the new kinetic energy."""
    # 2-D, k_B = 1: the kinetic energy is n * T
    scale = kd.sqrt(1.0 + coupling * (temperature * n / kinetic - 1.0))
    for i in kd.prange(vel.shape[0]):
        vel[i] = scale * vel[i]
    return kinetic * (scale * scale)


@kd.kernel
def simulate(pos: kd.Array[kd.vec2], vel: kd.Array[kd.vec2], acc: kd.Array[kd.vec2],
             box: kd.f32, dt: kd.f32, steps: kd.i32, energy: kd.Array[kd.vec2],
             temperature: kd.f32, coupling: kd.f32):
    """Advance ``steps`` velocity-Verlet steps; ``acc`` must hold the current forces.

    With ``coupling`` (``dt / tau``) above zero, a Berendsen thermostat pulls the
    kinetic temperature towards ``temperature`` after every step; with zero the
    dynamics conserve energy. Records the kinetic and potential energy after each
    step in ``energy[step]``.
    """
    n = pos.shape[0]
    for step in range(steps):
        kick_and_drift(pos, vel, acc, box, dt)
        potential = compute_forces(pos, acc, box)
        kinetic = kick(vel, acc, dt)
        if coupling > 0.0:
            kinetic = thermostat(vel, kinetic, n, temperature, coupling)
        energy[step] = kd.vec2(kinetic, potential)


# --- Python side: state, set-up, driver -----------------------------------------------


@dataclass
class System:
    """Particle state of one simulation."""

    pos: np.ndarray             # (n, 2) float32
    vel: np.ndarray             # (n, 2) float32
    acc: np.ndarray             # (n, 2) float32
    box: float
    ncell: int                  # cells per side of the distributed run's cell list

    @property
    def n(self) -> int:
        return len(self.pos)

    @property
    def device(self) -> str:
        return "cuda" if getattr(self.pos, "device", "cpu") == "cuda" else "cpu"

    def to(self, device: str) -> "System":
        """The same state with its arrays on ``device`` ("cpu" gives NumPy arrays)."""
        def move(a: Any) -> Any:
            if device == "cuda":
                return kd.array(a, device="cuda")
            return a.numpy() if getattr(a, "device", "cpu") == "cuda" else a
        arrays = {f: move(getattr(self, f)) for f in ("pos", "vel", "acc")}
        return System(box=self.box, ncell=self.ncell, **arrays)


def cells_per_side(box: float) -> int:
    """Cells per side of the grid: cells at least ``CUTOFF`` wide, or one cell."""
    ncell = int(box // CUTOFF)
    return ncell if ncell >= 3 else 1


def make_system(pos: np.ndarray, vel: np.ndarray, box: float) -> System:
    """A system with the given positions and velocities, its forces not yet computed."""
    if box < 2.0 * CUTOFF:
        raise ValueError(f"box {box:.3g} is smaller than twice the cutoff {CUTOFF}")
    n = len(pos)
    ncell = cells_per_side(box)
    return System(
        pos=np.ascontiguousarray(pos, dtype=np.float32),
        vel=np.ascontiguousarray(vel, dtype=np.float32),
        acc=np.zeros((n, 2), np.float32),
        box=box,
        ncell=ncell,
    )


def initial_state(n: int, density: float, temperature: float, seed: int) -> System:
    """``n`` particles on a square lattice with random velocities at ``temperature``."""
    rng = np.random.default_rng(seed)
    box = math.sqrt(n / density)
    side = math.ceil(math.sqrt(n))
    spacing = box / side
    grid = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1)
    pos = (grid.reshape(-1, 2)[:n] + 0.5) * spacing
    vel = rng.normal(size=(n, 2))
    vel -= vel.mean(axis=0)                               # no net momentum
    vel *= math.sqrt(temperature / np.mean(np.sum(vel**2, axis=1) / 2.0))
    return make_system(pos, vel, box)


def compute_acceleration(system: System) -> float:
    """Fill ``system.acc`` and return the potential energy."""
    return float(forces(system.pos, system.acc, system.box))


def total_energy(system: System) -> tuple[float, float]:
    """Kinetic and potential energy; refreshes ``system.acc``."""
    return float(kinetic_energy(system.vel)), compute_acceleration(system)


def run(system: System, steps: int, dt: float, temperature: float = 0.0,
        tau: float = 0.0) -> np.ndarray:
    """Advance ``steps`` steps in one kernel call; returns the (steps, 2) energy record.

    With ``tau > 0`` a thermostat with time constant ``tau`` holds ``temperature``.
    """
    energy = np.zeros((steps, 2), np.float32)
    if system.device == "cuda":
        energy = kd.array(energy, device="cuda")
    coupling = dt / tau if tau > 0.0 else 0.0
    compute_acceleration(system)
    simulate(system.pos, system.vel, system.acc, system.box, dt, steps, energy, temperature,
             coupling)
    return energy.numpy() if system.device == "cuda" else energy


# --- picture --------------------------------------------------------------------------

#: Colour map stops (an "inferno"-like ramp), from slow to fast.
_COLORMAP = np.array([
    [40, 11, 84], [101, 21, 110], [159, 42, 99], [212, 72, 66],
    [245, 125, 21], [250, 193, 39], [252, 255, 164],
], dtype=np.float64)


def colormap(t: np.ndarray) -> np.ndarray:
    """RGB colours (uint8, shape ``t.shape + (3,)``) for values ``t`` in [0, 1]."""
    x = np.clip(t, 0.0, 1.0) * (len(_COLORMAP) - 1)
    lo = np.minimum(x.astype(int), len(_COLORMAP) - 2)
    frac = (x - lo)[..., None]
    return ((1 - frac) * _COLORMAP[lo] + frac * _COLORMAP[lo + 1]).astype(np.uint8)


def render(system: System, size: int, supersample: int = 2) -> Image.Image:
    """Particles as discs of diameter ~sigma, coloured by speed, on a dark background."""
    scale = size * supersample / system.box
    image = Image.new("RGB", (size * supersample,) * 2, (8, 8, 16))
    draw = ImageDraw.Draw(image)
    speed = np.linalg.norm(system.vel, axis=1)
    colors = colormap(speed / max(float(np.percentile(speed, 99)), 1e-6))
    radius = max(0.5 * scale, 1.0)
    for (x, y), color in zip(system.pos * scale, colors, strict=True):
        y = size * supersample - y                        # y axis up
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=tuple(color))
    return image.resize((size, size), Image.Resampling.LANCZOS)


# --- command line ---------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--particles", type=int, default=6400)
    parser.add_argument("--steps", type=int, default=2000,
                        help="energy-conserving steps, after the thermostatted ones")
    parser.add_argument("--equilibrate", type=int, default=6000,
                        help="steps with a thermostat at --temperature, first")
    parser.add_argument("--dt", type=float, default=0.005, help="time step (reduced units)")
    parser.add_argument("--density", type=float, default=0.3, help="particles per area")
    parser.add_argument("--temperature", type=float, default=0.3,
                        help="initial and thermostat temperature")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--size", type=int, default=800, help="image side in pixels")
    parser.add_argument("--output", default="lennard_jones.png", help="PNG to write")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where the arrays live and the kernels run")
    parser.add_argument("--small", action="store_true",
                        help="a quick run: 900 particles, 300 + 300 steps, 400 px")
    parser.add_argument("--distributed", action="store_true",
                        help="split the box over MPI ranks (run under mpiexec; needs mpi4py)")
    args = parser.parse_args(argv)
    if args.small:
        args.particles, args.equilibrate, args.steps, args.size = 900, 300, 300, 400
    return args


def print_history(history: np.ndarray, first_step: int, lines: int = 4) -> None:
    """A few rows of an energy record."""
    if len(history) == 0:
        return
    for k in np.unique(np.linspace(0, len(history) - 1, lines).astype(int)):
        ke, pe = (float(x) for x in history[k])
        print(f"  step {first_step + k + 1:6d}: kinetic {ke:11.3f}  potential {pe:11.3f}"
              f"  total {ke + pe:11.3f}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.distributed:
        from mpi_runs.lennard_jones import run_distributed

        return run_distributed(args)
    system = initial_state(args.particles, args.density, args.temperature, args.seed)
    system = system.to(args.device)
    print(f"particles: {system.n}  box: {system.box:.1f}  "
          f"device: {args.device}  threads: {kd.get_num_threads()}")

    start = time.perf_counter()
    run(system, 0, args.dt)                    # compiles the kernels
    print(f"compile: {time.perf_counter() - start:.2f} s")

    start = time.perf_counter()
    history = run(system, args.equilibrate, args.dt, args.temperature, tau=0.5)
    elapsed = time.perf_counter() - start
    print(f"thermostat at T = {args.temperature}: {args.equilibrate} steps in "
          f"{elapsed:.2f} s")
    print_history(history, 0)

    ke0, pe0 = total_energy(system)
    start = time.perf_counter()
    history = run(system, args.steps, args.dt)
    elapsed = time.perf_counter() - start
    ke1, pe1 = total_energy(system)
    print(f"constant energy: {args.steps} steps in {elapsed:.2f} s "
          f"({1e3 * elapsed / max(args.steps, 1):.2f} ms/step)")
    print_history(history, args.equilibrate)

    e0, e1 = ke0 + pe0, ke1 + pe1
    drift = abs(e1 - e0) / system.n
    print(f"energy: start {e0:.3f}  end {e1:.3f}  drift per particle {drift:.2e}")
    print(f"temperature: start {ke0 / system.n:.3f}  end {ke1 / system.n:.3f}")

    render(system.to("cpu"), args.size).save(args.output)
    print(f"wrote {args.output}")
    if not math.isfinite(drift) or drift > ENERGY_TOLERANCE:
        print(f"error: energy not conserved (drift {drift:.2e} > {ENERGY_TOLERANCE:.0e})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

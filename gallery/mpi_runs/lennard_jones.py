"""``lennard_jones.py --distributed``: the fluid split over MPI ranks.

Run with ``mpiexec -n 4 python gallery/lennard_jones.py --distributed``. The periodic box
is tiled by the script's cell grid, whose blocks go to the ranks (``kdd.Grid``); each
rank owns the particles in its block (``kdd.Particles``). A step is the single-process
step, piece by piece, with the script's own functions: ``kick_and_drift``, migration of
the particles that left their block, ghost copies of the particles within the cutoff of
the block, ``build_cells`` and ``particle_force`` over the owned particles plus ghosts,
``kick``, and ``thermostat`` with the kinetic energy summed over the ranks.

Particles and ghosts are kept in id order, so every particle sees its neighbours in the
same order as in a single-process run and gets the same force; what differs is the
order of the energy sums across ranks, which feeds back through the thermostat, so the
trajectories agree within float rounding (growing over a long, chaotic run), not bit
for bit. Rank 0 gathers the particles and draws them with the script's ``render``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import lennard_jones as lj
import numpy as np

import kdsl as kd
import kdsl.distributed as kdd

#: Ghost copies reach a little past the cutoff, so that rounding never drops a pair the
#: single-process run counts.
GHOST_REACH = lj.CUTOFF * 1.001


@kd.kernel
def drift(pos: kd.Array[kd.vec2], vel: kd.Array[kd.vec2], acc: kd.Array[kd.vec2],
          box: kd.f32, dt: kd.f32):
    lj.kick_and_drift(pos, vel, acc, box, dt)


@kd.kernel
def second_kick(vel: kd.Array[kd.vec2], acc: kd.Array[kd.vec2], dt: kd.f32) -> kd.f32:
    return lj.kick(vel, acc, dt)


@kd.kernel
def rescale(vel: kd.Array[kd.vec2], kinetic: kd.f32, n: kd.i64, temperature: kd.f32,
            coupling: kd.f32) -> kd.f32:
    return lj.thermostat(vel, kinetic, n, temperature, coupling)


@kd.kernel
def owned_forces(pos: kd.Array[kd.vec2], owned: kd.Array[kd.i32], acc: kd.Array[kd.vec2],
                 box: kd.f32, ncell: kd.i32, cell_start: kd.Array[kd.i32],
                 cell_fill: kd.Array[kd.i32], particle_cell: kd.Array[kd.i32],
                 cell_particles: kd.Array[kd.i32]) -> kd.f32:
    """Bins owned particles and ghosts (``pos``), fills ``acc[k]`` with the force on
    particle ``owned[k]`` and returns the owned particles' potential energy."""
    lj.build_cells(pos, box, ncell, cell_start, cell_fill, particle_cell, cell_particles)
    potential = 0.0
    for k in kd.prange(owned.shape[0]):
        f, e = lj.particle_force(owned[k], pos, box, ncell, cell_start, cell_particles)
        acc[k] = f
        potential += e                       # reduction
    return potential


class DistributedSystem:
    """The particles of one rank, with the global box and cell grid."""

    def __init__(self, system: lj.System | None) -> None:
        box, ncell, total = kdd.mpi().COMM_WORLD.bcast(
            None if system is None else (system.box, system.ncell, system.n), root=0)
        self.box, self.ncell, self.total = box, ncell, total
        self.grid = kdd.Grid((ncell, ncell), ghost=0, periodic=True)
        empty = np.zeros((0, 2), np.float32)
        self.particles = kdd.Particles(
            self.grid, empty if system is None else system.pos, box=box,
            vel=empty if system is None else system.vel,
            acc=empty if system is None else system.acc)
        self.cell_start = np.zeros(ncell * ncell + 1, np.int32)
        self.cell_fill = np.zeros(ncell * ncell, np.int32)

    def forces(self) -> float:
        """Fills the owned particles' accelerations; returns the total potential energy."""
        return float(kdd.allreduce(self.owned_forces()))

    def owned_forces(self) -> np.float32:
        """Fills the owned particles' accelerations; returns their potential energy."""
        p = self.particles
        ghosts = p.ghosts(GHOST_REACH, shift_periodic=False)
        ids = np.concatenate([p.ids, ghosts.ids])
        order = np.argsort(ids, kind="stable")
        pos = np.ascontiguousarray(np.concatenate([p.pos, ghosts.pos])[order])
        where = np.empty_like(order)
        where[order] = np.arange(len(order))
        owned = where[:p.n].astype(np.int32)
        particle_cell = np.zeros(len(pos), np.int32)
        cell_particles = np.zeros(len(pos), np.int32)
        return np.float32(owned_forces(pos, owned, p["acc"], self.box, self.ncell,
                                       self.cell_start, self.cell_fill, particle_cell,
                                       cell_particles))

    def kinetic(self) -> float:
        return float(kdd.allreduce(np.float32(lj.kinetic_energy(self.particles["vel"]))))

    def run(self, steps: int, dt: float, temperature: float = 0.0,
            tau: float = 0.0) -> np.ndarray:
        """``lj.run`` over the ranks: the (steps, 2) energy record, on every rank."""
        energy = np.zeros((steps, 2), np.float32)
        coupling = dt / tau if tau > 0.0 else 0.0
        p = self.particles
        self.forces()
        for step in range(steps):
            drift(p.pos, p["vel"], p["acc"], self.box, dt)
            p.migrate()
            potential = self.owned_forces()
            kinetic = np.float32(second_kick(p["vel"], p["acc"], dt))
            kinetic, potential = kdd.allreduce(np.array([kinetic, potential]))
            if coupling > 0.0:
                kinetic = rescale(p["vel"], kinetic, self.total, temperature, coupling)
            energy[step] = kinetic, potential
        return energy

    def gather(self) -> lj.System | None:
        """The whole system on rank 0 (particles in id order); None elsewhere."""
        gathered = self.particles.gather()
        if gathered is None:
            return None
        pos, fields = gathered
        system = lj.make_system(pos, fields["vel"], self.box)
        system.acc[...] = fields["acc"]
        return system


def run_distributed(args: argparse.Namespace) -> int:
    if args.device != "cpu":
        raise ValueError("--distributed runs on the CPU (one rank per core group)")
    world = kdd.mpi().COMM_WORLD
    root = world.Get_rank() == 0
    system = lj.initial_state(args.particles, args.density, args.temperature, args.seed) \
        if root else None
    state = DistributedSystem(system)
    if root:
        print(f"particles: {state.total}  box: {state.box:.1f}  cells: {state.ncell}^2  "
              f"ranks: {world.Get_size()} ({' x '.join(map(str, state.grid.dims))})  "
              f"threads per rank: {kd.get_num_threads()}")

    start = time.perf_counter()
    state.run(0, args.dt)                    # compiles the kernels
    if root:
        print(f"compile: {time.perf_counter() - start:.2f} s")

    start = time.perf_counter()
    history = state.run(args.equilibrate, args.dt, args.temperature, tau=0.5)
    elapsed = time.perf_counter() - start
    if root:
        print(f"thermostat at T = {args.temperature}: {args.equilibrate} steps in "
              f"{elapsed:.2f} s")
        lj.print_history(history, 0)

    ke0, pe0 = state.kinetic(), state.forces()
    start = time.perf_counter()
    history = state.run(args.steps, args.dt)
    elapsed = time.perf_counter() - start
    ke1, pe1 = state.kinetic(), state.forces()
    counts = world.gather(state.particles.n, root=0)
    final = state.gather()
    if not root:
        return 0
    print(f"constant energy: {args.steps} steps in {elapsed:.2f} s "
          f"({1e3 * elapsed / max(args.steps, 1):.2f} ms/step)")
    lj.print_history(history, args.equilibrate)
    e0, e1 = ke0 + pe0, ke1 + pe1
    drift_per_particle = abs(e1 - e0) / state.total
    print(f"energy: start {e0:.3f}  end {e1:.3f}  drift per particle {drift_per_particle:.2e}")
    print(f"temperature: start {ke0 / state.total:.3f}  end {ke1 / state.total:.3f}")
    print(f"particles per rank: {counts}")
    assert final is not None
    if final.n != state.total:
        print(f"error: {state.total - final.n} particles lost", file=sys.stderr)
        return 1
    lj.render(final, args.size).save(args.output)
    print(f"wrote {args.output}")
    if not math.isfinite(drift_per_particle) or drift_per_particle > lj.ENERGY_TOLERANCE:
        print(f"error: energy not conserved (drift {drift_per_particle:.2e} > "
              f"{lj.ENERGY_TOLERANCE:.0e})", file=sys.stderr)
        return 1
    return 0

"""``heat_diffusion.py --distributed``: the plate split over MPI ranks.

Run with ``mpiexec -n 4 python gallery/heat_diffusion.py --distributed``. Each rank owns a
block of the plate plus one ghost layer (``kdd.Grid``) and runs the single-process
script's own ``sor_sweep`` on it; after every colour's sweep the ghosts are refreshed
(``halo_exchange``) and after both the largest update is combined over the ranks
(``allreduce``). Red-black SOR updates each cell from cells of the other colour only, so
the result is the single-process one bit for bit, and rank 0 writes the same picture
with the same ``render`` kernel from the gathered plate.

Ghosts stand for what ``sor_sweep`` sees across a face: at the plate's edge they are
insulators (the sweep then mirrors the centre, as it does past the array's end), inside
they carry the neighbour's temperature and are marked fixed (unless insulating), so the
sweep never updates them.
"""

from __future__ import annotations

import argparse
import sys
import time

import heat_diffusion as heat
import numpy as np
from PIL import Image

import kdsl as kd
import kdsl.distributed as kdd


@kd.kernel
def build_block_scene(kind: kd.Array[kd.u8, 2], u: kd.Array[kd.f32, 2],
                      pipes: kd.Array[kd.vec4], slots: kd.Array[kd.vec4], first_row: kd.i64,
                      first_column: kd.i64, n: kd.i64):
    """``build_scene`` for the block of an ``n x n`` plate whose element ``[0, 0]`` is the
    plate's ``[first_row, first_column]``."""
    h = 1.0 / n
    for i, j in kd.ndrange(u.shape[0], u.shape[1]):
        p = kd.vec2((first_column + j + 0.5) * h, (first_row + i + 0.5) / n)
        k, t = heat.classify(p, h, pipes, slots)
        kind[i, j] = k
        u[i, j] = t


@kd.kernel
def sweep(u: kd.Array[kd.f32, 2], kind: kd.Array[kd.u8, 2], colour: kd.i64,
          omega: kd.f32) -> kd.f32:
    """One colour's SOR sweep over a block; returns the block's largest update."""
    return heat.sor_sweep(u, kind, colour, omega)


def make_block(grid: kdd.Grid, n: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's cell kinds and starting temperatures, ghosts set up as described above."""
    kind = grid.full(heat.INSULATOR, np.uint8)
    u = grid.zeros(np.float32)
    pipes, slots = heat.default_scene()
    first_row, first_column = (s.start for s in grid.local_slices)
    build_block_scene(kind[grid.interior], u[grid.interior], pipes, slots, first_row,
                      first_column, n)
    grid.halo_exchange(kind)
    grid.halo_exchange(u)
    ghost = np.ones(kind.shape, bool)
    ghost[grid.interior] = False
    kind[ghost & (kind != heat.INSULATOR)] = heat.FIXED
    return kind, u


def solve_distributed(grid: kdd.Grid, u: np.ndarray, kind: np.ndarray, omega: float,
                      tolerance: float, max_iterations: int) -> tuple[int, np.float32]:
    """``heat.solve`` over the ranks: the same sweeps, halos refreshed between them."""
    parity = sum(grid.origin) % 2                 # colours follow global indices
    tolerance = np.float32(tolerance)
    change = tolerance + np.float32(1.0)
    iterations = 0
    while change > tolerance and iterations < max_iterations:
        red = sweep(u, kind, parity, omega)
        grid.halo_exchange(u)
        black = sweep(u, kind, (1 + parity) % 2, omega)
        grid.halo_exchange(u)
        change = kdd.allreduce(np.float32(max(red, black)), op="max", comm=grid.comm)
        iterations += 1
    return iterations, change


def run_distributed(args: argparse.Namespace) -> int:
    n = args.size
    if args.device != "cpu":
        raise ValueError("--distributed runs on the CPU (one rank per core group)")
    grid = kdd.Grid((n, n), ghost=1, periodic=False)
    root = grid.comm.Get_rank() == 0
    kind, u = make_block(grid, n)
    free_cells = int(kdd.allreduce(int(np.sum(kind[grid.interior] == heat.FREE))))
    if root:
        print(f"grid: {n} x {n}  free cells: {free_cells}  ranks: {grid.comm.Get_size()} "
              f"({' x '.join(map(str, grid.dims))})  threads per rank: {kd.get_num_threads()}")
    omega = heat.optimal_omega(n)

    start = time.perf_counter()
    solve_distributed(grid, u.copy(), kind, omega, args.tolerance, 1)      # compiles
    if root:
        print(f"compile: {time.perf_counter() - start:.2f} s")

    grid.comm.Barrier()
    start = time.perf_counter()
    iterations, change = solve_distributed(grid, u, kind, omega, args.tolerance,
                                           args.max_iterations)
    elapsed = time.perf_counter() - start
    u_global, kind_global = grid.gather(u), grid.gather(kind)
    if not root:
        return 0
    updates = float(iterations) * free_cells
    print(f"solve: {iterations} iterations in {elapsed:.2f} s "
          f"({updates / max(elapsed, 1e-9) / 1e6:.0f} M cell updates/s), "
          f"last update {float(change):.2e}")
    free = kind_global == heat.FREE
    print(f"temperature of free cells: min {u_global[free].min():.3f}  "
          f"max {u_global[free].max():.3f}  mean {u_global[free].mean():.3f}")
    image = np.zeros((n, n, 3), np.uint8)
    heat.render(u_global, kind_global, image)
    Image.fromarray(image, "RGB").save(args.output)
    print(f"wrote {args.output}")
    if not float(change) <= args.tolerance:
        print(f"error: no convergence after {iterations} iterations", file=sys.stderr)
        return 1
    return 0

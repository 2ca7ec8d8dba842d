"""Distributed runs (kdsl.distributed) on this machine: ``python benchmarks/distributed.py``.

Launches ``mpiexec`` jobs of itself and prints three tables:

- halo exchange: one ``grid.halo_exchange`` of a 1024^2 float32 grid (periodic, one ghost
  layer) split over 2 and 4 ranks: time per exchange (the slowest rank's mean), the bytes
  all ranks receive, the time those bytes take at this machine's memory-copy speed
  (``np.copyto`` of 64 MiB), and the time of the bare messages (the same sizes between
  contiguous buffers, nothing packed: the floor of any exchange through mpi4py);
- weak scaling of the grid solver (the heat-diffusion gallery's red-black SOR, a fixed
  number of iterations, two halo exchanges and a max-allreduce per iteration): about the
  same cells per rank on 1 and 2 ranks (1024^2 and 1448^2); efficiency = cell updates per second per rank against
  one rank on one thread;
- strong scaling: one grid on 1 rank x 1 thread, 1 rank x 2 threads and 2 ranks x 1 thread,
  with the share of each iteration spent in halo exchanges.

Each configuration runs ``--repeats`` times, interleaved with the others, and the best
run is kept; the load average is printed before and after (other work on the machine
slows MPI ranks that wait for each other much more than it slows one process).

    python benchmarks/distributed.py                 # about a minute
    python benchmarks/distributed.py --quick         # small grids, a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


# --- workers (run under mpiexec) ---------------------------------------------------------


def halo_worker(size: int, exchanges: int) -> dict[str, float]:
    import kdsl.distributed as kdd

    grid = kdd.Grid((size, size), ghost=1, periodic=True)
    u = grid.zeros(np.float32)
    u[grid.interior] = np.random.default_rng(grid.rank).random(grid.local_shape)
    for _ in range(20):
        grid.halo_exchange(u)
    grid.comm.Barrier()
    start = time.perf_counter()
    for _ in range(exchanges):
        grid.halo_exchange(u)
    elapsed = (time.perf_counter() - start) / exchanges
    received = 0
    shape = u.shape
    for axis in range(grid.ndim):
        face = int(np.prod(shape)) // shape[axis] * u.itemsize
        received += 2 * face if grid.dims[axis] > 1 or grid.periodic[axis] else 0
    bare = bare_messages(grid, shape, exchanges)
    MPI = kdd.mpi()
    return {"seconds": grid.comm.allreduce(elapsed, op=MPI.MAX),
            "bare": grid.comm.allreduce(bare, op=MPI.MAX),
            "bytes": grid.comm.allreduce(received)}


def bare_messages(grid: object, shape: tuple[int, ...], exchanges: int) -> float:
    """The floor under any halo exchange through mpi4py: the same messages (two per axis
    and direction, the same sizes) between preallocated contiguous buffers, nothing
    packed or unpacked; seconds per exchange."""
    from mpi4py import MPI

    plans = []
    for axis in range(grid.ndim):  # type: ignore[attr-defined]
        low, high = grid.neighbours[axis]  # type: ignore[attr-defined]
        face = int(np.prod(shape)) // shape[axis]
        plans.append((low, high, [np.zeros(face, np.float32) for _ in range(4)], axis))
    comm = grid.comm  # type: ignore[attr-defined]
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(exchanges):
        for low, high, (a, b, c, d), axis in plans:
            MPI.Request.Waitall([comm.Irecv(a, low, 2 * axis), comm.Irecv(b, high, 2 * axis + 1),
                                 comm.Isend(c, high, 2 * axis), comm.Isend(d, low, 2 * axis + 1)])
    return (time.perf_counter() - start) / exchanges


def solver_worker(size: int, iterations: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "gallery"))
    import heat_diffusion as heat
    from mpi_runs import heat_diffusion as heat_mpi

    import kdsl as kd
    import kdsl.distributed as kdd

    grid = kdd.Grid((size, size), ghost=1)
    kind, u = heat_mpi.make_block(grid, size)
    omega = heat.optimal_omega(size)
    heat_mpi.solve_distributed(grid, u.copy(), kind, omega, 0.0, 2)     # compiles
    exchange_time = 0.0
    original = grid.halo_exchange

    def timed_exchange(array: np.ndarray, width: int | None = None) -> None:
        nonlocal exchange_time
        start = time.perf_counter()
        original(array, width)
        exchange_time += time.perf_counter() - start

    grid.halo_exchange = timed_exchange  # type: ignore[method-assign]
    grid.comm.Barrier()
    start = time.perf_counter()
    heat_mpi.solve_distributed(grid, u, kind, omega, 0.0, iterations)
    elapsed = time.perf_counter() - start
    MPI = kdd.mpi()
    return {"seconds": grid.comm.allreduce(elapsed, op=MPI.MAX) / iterations,
            "exchange": grid.comm.allreduce(exchange_time, op=MPI.MAX) / iterations,
            "cells": float(size * size), "ranks": grid.comm.Get_size(),
            "threads": kd.get_num_threads()}


# --- driver ------------------------------------------------------------------------------


def mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        sys.exit("mpiexec not found: pip install 'kdsl[mpi]'")
    return found


def launch(ranks: int, threads: int, *worker_args: str) -> dict[str, float]:
    env = dict(os.environ, KDSL_NUM_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [mpiexec(), "-n", str(ranks), sys.executable, __file__, "--worker", *worker_args],
        env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        sys.exit(f"job failed:\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def best_of(repeats: int, configs: dict[str, tuple]) -> dict[str, dict[str, float]]:
    """Runs every configuration ``repeats`` times, interleaved; keeps the fastest run."""
    best: dict[str, dict[str, float]] = {}
    for _ in range(repeats):
        for name, (ranks, threads, *args) in configs.items():
            run = launch(ranks, threads, *map(str, args))
            if name not in best or run["seconds"] < best[name]["seconds"]:
                best[name] = run
    return best


def memcpy_bandwidth() -> float:
    """Bytes per second of ``np.copyto`` between two 64 MiB arrays (best of 5)."""
    src = np.ones(1 << 24, np.float32)
    dst = np.empty_like(src)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - start)
    return src.nbytes / min(times)


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="small grids, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.worker:
        kind, *numbers = args.worker
        worker = {"halo": halo_worker, "solver": solver_worker}[kind]
        result = worker(*map(int, numbers))
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps(result))
        return

    repeats = 1 if args.quick else args.repeats
    halo_size, exchanges = (256, 200) if args.quick else (1024, 2000)
    weak, strong, iterations = (256, 362, 20) if args.quick else (1024, 1448, 60)
    print(f"load average before: {load()}   cores: {os.cpu_count()}")

    bandwidth = memcpy_bandwidth()
    halo = best_of(repeats, {f"{r} ranks": (r, 1, "halo", halo_size, exchanges)
                             for r in (2, 4)})
    print(f"\nhalo exchange, {halo_size}^2 f32, periodic, ghost 1 "
          f"(memory copy: {bandwidth / 1e9:.1f} GB/s)")
    print(f"{'ranks':>6} {'per exchange':>14} {'bytes':>9} {'at memcpy speed':>16} {'ratio':>7}"
          f" {'bare messages':>14}")
    for name, run in halo.items():
        ideal = run["bytes"] / bandwidth
        print(f"{name.split()[0]:>6} {run['seconds'] * 1e6:>11.1f} us {int(run['bytes']):>9d} "
              f"{ideal * 1e6:>13.2f} us {run['seconds'] / ideal:>7.1f} "
              f"{run['bare'] * 1e6:>11.1f} us")

    solver = best_of(repeats, {
        "1x1 weak": (1, 1, "solver", weak, iterations),
        "2x1 weak": (2, 1, "solver", round(weak * 2 ** 0.5), iterations),
        "1x2 strong": (1, 2, "solver", strong, iterations),
        "2x1 strong": (2, 1, "solver", strong, iterations),
        "1x1 strong": (1, 1, "solver", strong, iterations),
    })
    print(f"\ngrid solver (red-black SOR sweeps of the heat-diffusion gallery, {iterations} "
          f"iterations)")
    print(f"{'run':>12} {'grid':>11} {'ranks x threads':>16} {'per iteration':>14} "
          f"{'M updates/s/rank':>17} {'efficiency':>11} {'halo share':>11}")
    base = solver["1x1 weak"]
    base_rate = base["cells"] / base["seconds"]
    strong_base = solver["1x1 strong"]
    for name, run in solver.items():
        kind = name.split()[1]
        ranks = int(run["ranks"])
        rate = run["cells"] / run["seconds"] / ranks
        if kind == "weak":
            efficiency = rate / base_rate
        else:
            efficiency = strong_base["seconds"] / run["seconds"] / (ranks * run["threads"])
        grid = f"{round(run['cells'] ** 0.5)}^2"
        layout = f"{ranks} x {int(run['threads'])}"
        print(f"{kind:>12} {grid:>11} {layout:>16} "
              f"{run['seconds'] * 1e3:>11.2f} ms {rate / 1e6:>17.0f} {efficiency:>11.2f} "
              f"{run['exchange'] / run['seconds']:>10.1%}")
    print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()

"""Run by ``run.py`` in a fresh process: ``python compile_probe.py {kdsl,numba,numpy} [N]``,
or ``python compile_probe.py {kdsl,numba} tensor`` for the tensor-kernel row.

Prints one JSON line: ``import`` (seconds to import the library, first thing in the
process; for ``numpy`` that is all), and for kdsl and numba ``first_call`` (the first n-body call: compile or cache load, plus one run),
``run`` (best of three later calls), the first call's CPU time (``first_call_cpu``, all
threads; ``first_call_main_cpu``, the calling thread) and a correctness check against NumPy. The cache
directory comes from ``KDSL_CACHE_DIR`` / ``NUMBA_CACHE_DIR``, set by the caller.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable


def import_library(library: str) -> float:
    start = time.perf_counter()
    if library == "kdsl":
        import kdsl  # noqa: F401
    elif library == "numpy":
        import numpy  # noqa: F401
    elif library == "numba":
        import numba  # noqa: F401
    else:
        raise SystemExit(f"unknown library {library!r}")
    return time.perf_counter() - start


def tensor_kernel(library: str) -> dict[str, float]:
    """``fluid_step`` (ten tensor statements) on 64 x 64: the first call, a later call,
    and the check of the first call's results against NumPy."""
    import kernels_numpy
    import numpy as np

    if library == "kdsl":
        import kernels_kdsl

        step = kernels_kdsl.fluid_step
    else:
        import numba

        step = numba.njit(fastmath=True, cache=True)(kernels_numpy.fluid_step)
    gen = np.random.default_rng(5)
    u, v = (gen.random((64, 64), dtype=np.float32) for _ in range(2))
    p, scratch, div = (np.zeros((64, 64), np.float32) for _ in range(3))
    inputs = [a.copy() for a in (u, v, p, scratch, div)]
    start = time.perf_counter()
    got = step(*inputs)
    first_call = time.perf_counter() - start
    want = kernels_numpy.fluid_step(u, v, p, scratch, div)
    runs = []
    for _ in range(3):
        again = [a.copy() for a in (u, v, p, scratch, div)]
        start = time.perf_counter()
        step(*again)
        runs.append(time.perf_counter() - start)
    return {"first_call": first_call, "run": min(runs),
            "max_abs_diff": float(max(abs(g - w) for g, w in zip(got, want))),
            "max_abs": float(max(abs(w) for w in want))}


def forces_function(library: str) -> Callable[..., None]:
    if library == "kdsl":
        import kernels_kdsl

        return kernels_kdsl.forces
    import kernels_numba
    import numba

    # The same function as in the main run, with Numba's own on-disk cache turned on.
    return numba.njit(parallel=True, fastmath=True, cache=True)(kernels_numba.forces.py_func)


def main() -> None:
    library = sys.argv[1]
    import_s = import_library(library)
    if library == "numpy":
        print(json.dumps({"import": import_s}))
        return
    if sys.argv[2] == "tensor":
        print(json.dumps({"import": import_s, **tensor_kernel(library)}))
        return
    n = int(sys.argv[2])

    import numpy as np
    from data import LJ_CUTOFF, lattice_positions

    forces = forces_function(library)
    pos = lattice_positions(n)
    acc = np.zeros_like(pos)
    cutoff = np.float32(LJ_CUTOFF)

    start, cpu, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    forces(pos, acc, cutoff)
    first_call = time.perf_counter() - start
    # CPU time: what a busy machine changes least (all threads, and this thread alone)
    first_call_cpu, first_call_main_cpu = time.process_time() - cpu, time.thread_time() - main_cpu

    runs = []
    for _ in range(3):
        start = time.perf_counter()
        forces(pos, acc, cutoff)
        runs.append(time.perf_counter() - start)

    import kernels_numpy

    want = kernels_numpy.forces(pos, cutoff)
    result = {
        "import": import_s,
        "first_call": first_call,
        "first_call_cpu": first_call_cpu,
        "first_call_main_cpu": first_call_main_cpu,
        "run": min(runs),
        "max_abs_diff": float(np.abs(acc - want).max()),
        "max_abs": float(np.abs(want).max()),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""Parallel loops on shared cores: all threads against one thread, on idle cores, with a
CPU-bound process per core, and with Numba's thread pool busy in the same process.

``python benchmarks/contention.py [--quick] [--always-parallel]``; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numba
import numpy as np

import kdsl as kd
from kdsl.runtime import threads

TARGET = 1.5  # all threads at most this many times the one-thread time


@kd.kernel
def many_short_loops(x: kd.Array[kd.f64], out: kd.Array[kd.f64], loops: kd.i64):
    for _k in range(loops):
        for i in kd.prange(x.shape[0]):
            out[i] = out[i] * 0.5 + x[i]


@kd.kernel
def one_long_loop(x: kd.Array[kd.f64], out: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        out[i] = kd.sqrt(x[i] * x[i] + 1.0) * kd.exp(-x[i])


@numba.njit(parallel=True, nogil=True, cache=False)
def _numba_work(x):  # pragma: no cover - compiled by Numba
    for i in numba.prange(x.shape[0]):
        x[i] = np.sqrt(x[i] * x[i] + 1.0) - 0.5


@dataclass(frozen=True)
class Workload:
    name: str
    size: str
    run: Callable[[], None]


@dataclass(frozen=True)
class Timing:
    one: list[float]
    all: list[float]

    @property
    def ratio(self) -> float:
        return statistics.median(self.all) / statistics.median(self.one)


def _workloads(quick: bool) -> list[Workload]:
    short_n, loops = 256, 2000
    long_n = 1 << (20 if quick else 22)
    xs, outs = np.random.default_rng(0).random(short_n), np.zeros(short_n)
    xl, outl = np.random.default_rng(1).random(long_n), np.zeros(long_n)
    return [
        Workload("many short loops", f"{loops} prange x {short_n} f64",
                 lambda: many_short_loops(xs, outs, loops)),
        Workload("one long loop", f"1 prange x 2^{long_n.bit_length() - 1} f64",
                 lambda: one_long_loop(xl, outl)),
    ]


def _measure(run: Callable[[], None], all_threads: int, repeats: int) -> Timing:
    """Runs with one thread and with all, interleaved, so both see the same load."""
    one, every = [], []
    for _ in range(repeats):
        for count, times in ((1, one), (all_threads, every)):
            kd.set_num_threads(count)
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    kd.set_num_threads(all_threads)
    return Timing(one, every)


@contextmanager
def _idle() -> Iterator[None]:
    yield


@contextmanager
def _busy_processes() -> Iterator[None]:
    """One CPU-bound process per core."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@contextmanager
def _numba_pool_busy() -> Iterator[None]:
    """A Python thread calling a Numba parallel loop (on all cores) over and over."""
    data = np.random.default_rng(2).random(1 << 20)
    _numba_work(data)  # compile first
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            _numba_work(data)

    worker = threading.Thread(target=spin, daemon=True)
    worker.start()
    try:
        time.sleep(0.2)
        yield
    finally:
        stop.set()
        worker.join()


SCENARIOS: dict[str, Callable[[], object]] = {
    "idle": _idle,
    "busy process per core": _busy_processes,
    "numba pool busy": _numba_pool_busy,
}


def _format(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller long loop, fewer repeats")
    parser.add_argument("--always-parallel", action="store_true",
                        help="every loop starts a team of threads, however small (no serial cutoff)")
    parser.add_argument("--only", action="append", choices=list(SCENARIOS), metavar="SCENARIO",
                        help="run only this scenario (repeatable)")
    args = parser.parse_args(argv)
    if args.always_parallel:
        threads.set_min_parallel_work(0)
    all_threads = kd.get_num_threads()
    repeats = 3 if args.quick else 9
    workloads = _workloads(args.quick)
    for w in workloads:  # compile, and load the OpenMP runtime before Numba does
        w.run()
    _numba_work(np.zeros(4))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} cores | kdsl threads {all_threads} | numba threading layer "
          f"{numba.threading_layer()} | load average at the start {load}")
    print(f"median of {repeats} runs; ratio = all threads / one thread (target <= {TARGET})")
    print(f"{'scenario':<22} {'kernel':<17} {'size':<22} {'1 thread':>10} "
          f"{f'{all_threads} threads':>10} {'ratio':>6}")
    missed = 0
    for scenario in args.only or list(SCENARIOS):
        with SCENARIOS[scenario]():  # type: ignore[attr-defined]
            for w in workloads:
                t = _measure(w.run, all_threads, repeats)
                verdict = "ok" if t.ratio <= TARGET else "MISSED"
                missed += verdict == "MISSED"
                print(f"{scenario:<22} {w.name:<17} {w.size:<22} "
                      f"{_format(statistics.median(t.one)):>10} "
                      f"{_format(statistics.median(t.all)):>10} {t.ratio:>5.2f}x {verdict}",
                      flush=True)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end {load}; {missed} row(s) missed the target")
    return 0


if __name__ == "__main__":
    sys.exit(main())

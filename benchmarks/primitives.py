"""Parallel primitives and the neighbour grid against NumPy, a brute-force all-pairs
kernel and Warp's HashGrid: ``python benchmarks/primitives.py`` (``--quick``: smaller).

Rows: ``kd.cumsum`` of 2^24 f64 and i32 against ``np.cumsum``; ``kd.sort`` in place of
2^24 f32 and i32 keys against ``ndarray.sort``; ``kd.argsort`` of 2^24 i32 and f32 keys
against ``np.argsort(kind="stable")`` (and NumPy's default quicksort in the notes); the
build of a ``kd.NeighborGrid`` over 10^6 particles in a periodic cube against one SPH
density pass over them (poly6 kernel, about 40 neighbours each); the density pass
against a brute-force all-pairs kernel (at 2^14 particles) and against Warp's
``HashGrid`` on the CPU (where ``warp-lang`` is installed). Every result is checked
before it is timed. Sides are interleaved run by run; times are the best of the runs.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import kdsl as kd

NEIGHBOURS = 40  # particles within the smoothing radius, on average


def best_times(sides: dict[str, Callable[[], Any]], repeats: int,
               cpu: dict[str, float] | None = None) -> dict[str, float]:
    """The best time of each side over ``repeats`` interleaved runs (after a warm-up);
    ``cpu``, if given, gets each side's least CPU time of the process (all its threads)."""
    for fn in sides.values():
        fn()
    best = dict.fromkeys(sides, math.inf)
    least_cpu = dict.fromkeys(sides, math.inf)
    for _ in range(repeats):
        for name, fn in sides.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
            least_cpu[name] = min(least_cpu[name], time.process_time() - start_cpu)
    if cpu is not None:
        cpu.update(least_cpu)
    return best


def cpu_note(cpu: dict[str, float]) -> str:
    """CPU times, which other load on the machine changes less than wall times do."""
    return f"cpu: kdsl {1e3 * cpu['kdsl']:.1f} ms (all threads), numpy {1e3 * cpu['numpy']:.1f} ms"


def row(label: str, kdsl_time: float, peer: str, peer_time: float | None, notes: str = "") -> None:
    ratio = f"{peer_time / kdsl_time:6.2f}x" if peer_time else "     -"
    peer_text = f"{1e3 * peer_time:9.2f} ms" if peer_time else "        - "
    print(f"{label:34s} kdsl {1e3 * kdsl_time:9.2f} ms  {peer:22s} {peer_text}  {ratio}  {notes}")


def scan_rows(n: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.int32):
        a = (rng.standard_normal(n) * 100).astype(dtype)
        assert np.allclose(kd.cumsum(a), np.cumsum(a), rtol=1e-6, atol=1e-6)
        cpu: dict[str, float] = {}
        t = best_times({"kdsl": lambda a=a: kd.cumsum(a), "numpy": lambda a=a: np.cumsum(a)},
                       repeats, cpu)
        row(f"cumsum 2^{int(math.log2(n))} {np.dtype(dtype).name}", t["kdsl"], "np.cumsum",
            t["numpy"], cpu_note(cpu))


def sort_rows(n: int, repeats: int) -> None:
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.int32):
        keys = (rng.standard_normal(n) * 1e6).astype(dtype)
        mine, theirs = keys.copy(), keys.copy()
        kd.sort(mine)
        theirs.sort()
        assert np.array_equal(mine, theirs)
        work = {"kdsl": keys.copy(), "numpy": keys.copy()}

        def run(side: str, sort: Callable[[np.ndarray], None], work: dict = work,
                keys: np.ndarray = keys) -> Callable[[], None]:
            def go() -> None:
                work[side][...] = keys  # unsorted again; the same copy for both sides
                sort(work[side])
            return go

        cpu: dict[str, float] = {}
        t = best_times({"kdsl": run("kdsl", kd.sort), "numpy": run("numpy", np.ndarray.sort)},
                       repeats, cpu)
        row(f"sort in place 2^{int(math.log2(n))} {np.dtype(dtype).name}", t["kdsl"],
            "ndarray.sort", t["numpy"], f"(both include refilling the keys; {cpu_note(cpu)})")
        order = np.empty(n, np.int64)
        assert np.array_equal(kd.argsort(keys, out=order), np.argsort(keys, kind="stable"))
        t = best_times({"kdsl": lambda k=keys, o=order: kd.argsort(k, out=o),
                        "numpy": lambda k=keys: np.argsort(k, kind="stable"),
                        "quick": lambda k=keys: np.argsort(k)}, max(1, repeats // 2))
        row(f"argsort 2^{int(math.log2(n))} {np.dtype(dtype).name}", t["kdsl"],
            "np.argsort stable", t["numpy"],
            f"np.argsort (quicksort) {1e3 * t['quick']:.1f} ms: {t['quick'] / t['kdsl']:.2f}x")


@kd.kernel
def grid_passes(x: kd.Array[kd.vec3], h: kd.f32, box: kd.f32, rho: kd.Array[kd.f32],
                passes: kd.i32):
    """Builds the grid, then makes ``passes`` SPH density passes (poly6, unit mass)."""
    grid = kd.NeighborGrid(x, h, (0.0, 0.0, 0.0), (box, box, box), periodic=True)
    scale = 315.0 / (64.0 * math.pi * h ** 9)
    for _ in range(passes):
        for i in kd.prange(x.shape[0]):
            total = kd.f32(0.0)
            for j in grid.neighbors(x[i], h):
                d = x[j] - x[i]
                d = d - box * kd.floor(d / box + 0.5)
                q = h * h - kd.dot(d, d)
                total += q * q * q
            rho[i] = scale * total


@kd.kernel
def all_pairs(x: kd.Array[kd.vec3], h: kd.f32, box: kd.f32, rho: kd.Array[kd.f32]):
    """The same density, every pair tested."""
    scale = 315.0 / (64.0 * math.pi * h ** 9)
    for i in kd.prange(x.shape[0]):
        total = kd.f32(0.0)
        for j in range(x.shape[0]):
            d = x[j] - x[i]
            d = d - box * kd.floor(d / box + 0.5)
            r2 = kd.dot(d, d)
            if r2 <= h * h:
                q = h * h - r2
                total += q * q * q
        rho[i] = scale * total


def smoothing_radius(n: int, box: float) -> float:
    return (NEIGHBOURS * 3.0 / (4.0 * math.pi * n)) ** (1.0 / 3.0) * box


def warp_density(x: np.ndarray, h: float, box: float) -> Callable[[], np.ndarray] | None:
    """Build a Warp HashGrid on the CPU and run the same density pass; None without Warp."""
    try:
        import warp as wp
    except ImportError:
        return None
    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def density(grid: wp.uint64, points: wp.array(dtype=wp.vec3), h: float, box: float,
                rho: wp.array(dtype=float)):
        i = wp.tid()
        p = points[i]
        total = float(0.0)  # noqa: UP018  (a Warp variable the loop may change)
        neighbours = wp.hash_grid_query(grid, p, h)
        for j in neighbours:
            d = points[j] - p
            d = d - box * wp.vec3(wp.floor(d[0] / box + 0.5), wp.floor(d[1] / box + 0.5),
                                  wp.floor(d[2] / box + 0.5))
            r2 = wp.dot(d, d)
            if r2 <= h * h:
                q = h * h - r2
                total += q * q * q
        rho[i] = 315.0 / (64.0 * 3.141592653589793 * h ** 9.0) * total

    cells = max(1, int(box / h))
    grid = wp.HashGrid(cells, cells, cells, device="cpu")
    points = wp.array(x, dtype=wp.vec3, device="cpu")
    rho = wp.zeros(len(x), dtype=float, device="cpu")

    def run() -> np.ndarray:
        grid.build(points, h)
        wp.launch(density, dim=len(x), inputs=[grid.id, points, h, box, rho], device="cpu")
        wp.synchronize_device("cpu")
        return rho.numpy()

    return run


def grid_rows(n: int, brute_n: int, repeats: int) -> None:
    rng = np.random.default_rng(2)
    box = 1.0
    x = (rng.random((n, 3)) * box).astype(np.float32)
    h = smoothing_radius(n, box)
    rho = np.zeros(n, np.float32)
    grid_passes(x[:brute_n], h, box, rho[:brute_n], 1)
    small_rho = np.zeros(brute_n, np.float32)
    all_pairs(x[:brute_n], h, box, small_rho)
    assert np.allclose(rho[:brute_n], small_rho, rtol=1e-4)
    t = best_times({"build": lambda: grid_passes(x, h, box, rho, 0),
                    "build+pass": lambda: grid_passes(x, h, box, rho, 1)}, repeats)
    density_pass = max(t["build+pass"] - t["build"], 1e-9)
    row(f"grid build, 10^{round(math.log10(n))} particles", t["build"], "one density pass",
        density_pass, f"build / pass = {t['build'] / density_pass:.2f}")
    small = x[:brute_n]
    t = best_times({"grid": lambda: grid_passes(small, h, box, small_rho, 1),
                    "brute": lambda: all_pairs(small, h, box, small_rho)}, repeats)
    row(f"density, grid vs all pairs, {brute_n}", t["grid"], "all pairs (kdsl)", t["brute"],
        "(the grid time includes its build)")
    warp_run = warp_density(x, h, box)
    if warp_run is None:
        print("warp HashGrid: skipped (warp-lang is not installed)")
        return
    assert np.allclose(warp_run(), rho, rtol=1e-3, atol=1e-3 * float(rho.max()))
    cpu: dict[str, float] = {}
    t = best_times({"kdsl": lambda: grid_passes(x, h, box, rho, 1), "warp": warp_run},
                   max(1, repeats // 2), cpu)
    row(f"build + density pass, 10^{round(math.log10(n))}", t["kdsl"], "warp HashGrid (cpu)",
        t["warp"], f"(each: build and one pass; cpu: kdsl {1e3 * cpu['kdsl']:.1f} ms (all "
        f"threads), warp {1e3 * cpu['warp']:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2^20 keys, 10^5 particles")
    args = parser.parse_args()
    keys, particles, repeats = (1 << 20, 100_000, 3) if args.quick else (1 << 24, 1_000_000, 7)
    print(f"threads: {kd.get_num_threads()}  load average: {os.getloadavg()[0]:.2f}")
    scan_rows(keys, repeats)
    sort_rows(keys, repeats)
    grid_rows(particles, 1 << 14 if not args.quick else 1 << 12, repeats)
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

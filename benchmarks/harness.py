"""Timing, checking and table printing shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Config:
    """Problem sizes and repeat counts for one run (``full`` or ``quick``)."""

    stream_n: int  # saxpy and sum
    nbody_n: int
    jacobi_n: int
    jacobi_iters: int
    particles: int
    grid_n: int
    softmax_rows: int  # softmax of a (rows, cols) array, row by row
    softmax_cols: int
    mlp_batch: int  # MLP: x is (batch, width), w1 and w2 (width, width)
    mlp_width: int
    matmul_sizes: tuple[int, ...]  # (n, n) @ (n, n), f32 and f64
    repeats: int  # timed runs after the warm-up (fewer when a run is slow, see best_of)
    budget_s: float  # a side stops repeating once its timed runs have used this long
    probes: int  # fresh processes per compile-time measurement (the best one counts)
    calls: int  # calls per timed run in the call-overhead benchmark (time is per call)

    @staticmethod
    def full() -> Config:
        return Config(
            stream_n=1 << 24,
            nbody_n=4096,
            jacobi_n=1024,
            jacobi_iters=100,
            particles=10**6,
            grid_n=256,
            softmax_rows=4096,
            softmax_cols=1024,
            mlp_batch=4096,
            mlp_width=256,
            matmul_sizes=(64, 256, 1024, 2048),
            repeats=20,
            budget_s=2.0,
            probes=3,
            calls=20_000,
        )

    @staticmethod
    def quick() -> Config:
        return Config(
            stream_n=1 << 20,
            nbody_n=1024,
            jacobi_n=256,
            jacobi_iters=20,
            particles=10**5,
            grid_n=256,
            softmax_rows=512,
            softmax_cols=1024,
            mlp_batch=512,
            mlp_width=256,
            matmul_sizes=(64, 256),
            repeats=3,
            budget_s=0.5,
            probes=1,
            calls=2_000,
        )


@dataclass
class Row:
    """One line of the table. Times are seconds per call; ``None`` means not measured."""

    workload: str
    size: str
    numpy: float | None = None
    numba: float | None = None
    kdsl: float | None = None
    notes: list[str] = field(default_factory=list)
    ok: bool = True


@dataclass(frozen=True)
class Timed:
    """One side of a measurement: ``run`` is timed, ``setup`` (optional) runs untimed
    before every timed run."""

    run: Callable[[], object]
    setup: Callable[[], object] | None = None


def last_level_cache_bytes() -> int:
    """The size of the first CPU's largest cache (Linux sysfs), or 32 MB where unknown."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        if text[:-1].isdigit() and text[-1] in units:
            sizes.append(int(text[:-1]) * units[text[-1]])
    return max(sizes, default=32 << 20)


def cache_evictor() -> Callable[[], object]:
    """A setup for ``Timed`` that reads a buffer of twice the last-level cache, so that the
    side timed next finds none of its arrays in the caches. Without it a side finds what
    the side before it left there: one whose streaming stores keep its input in the
    cache hands that input, cached, to the side after it (4096 x 1024 f32 layer norm:
    16 MB of a 32 MB cache), and which side profits depends on the order of the sides."""
    buffer = np.ones(2 * last_level_cache_bytes() // 8, np.int64)
    return lambda: int(buffer.max())


def best_of(sides: dict[str, Timed], config: Config) -> dict[str, float]:
    """Best time of each side over up to ``config.repeats`` timed runs, the sides
    interleaved run by run so that a burst of load from elsewhere on the machine hits
    all of them alike.

    The caller has already made the warm-up call (which also checked the result). Each
    side is timed at least twice; after that, a side stops repeating once its timed runs
    have used ``config.budget_s`` (so a slow NumPy version does not take minutes).
    """
    best = dict.fromkeys(sides, float("inf"))
    spent = dict.fromkeys(sides, 0.0)
    for k in range(config.repeats):
        active = [name for name in sides if k < 2 or spent[name] < config.budget_s]
        if not active:
            break
        for name in active:
            side = sides[name]
            if side.setup is not None:
                side.setup()
            t0 = time.perf_counter()
            side.run()
            elapsed = time.perf_counter() - t0
            spent[name] += elapsed
            best[name] = min(best[name], elapsed)
    return best


def agree(label: str, got: object, want: object, rtol: float, atol: float = 0.0) -> bool:
    """``np.allclose(got, want)``; prints a FAIL line naming the worst element if not."""
    got_a = np.asarray(got, dtype=np.float64)
    want_a = np.asarray(want, dtype=np.float64)
    if got_a.shape == want_a.shape and np.allclose(got_a, want_a, rtol=rtol, atol=atol):
        return True
    if got_a.shape != want_a.shape:
        print(f"FAIL {label}: shape {got_a.shape} != {want_a.shape}")
        return False
    err = np.abs(got_a - want_a)
    worst = np.unravel_index(int(np.argmax(err)), err.shape) if err.ndim else ()
    print(
        f"FAIL {label}: max abs error {err.max():.3g} at {tuple(int(i) for i in worst)} "
        f"(got {got_a[worst]:.6g}, want {want_a[worst]:.6g}; rtol={rtol:g}, atol={atol:.3g})"
    )
    return False


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def format_ratio(other: float | None, kdsl: float | None) -> str:
    """Speed of kdsl relative to ``other``: >= 1.0 means kdsl is faster."""
    if other is None or kdsl is None or kdsl <= 0.0:
        return "-"
    return f"{other / kdsl:.2f}x"


HEADERS = ("workload", "size", "numpy", "numba", "kdsl", "vs numpy", "vs numba", "notes")


def print_table(rows: list[Row]) -> None:
    cells = [
        (
            r.workload + ("" if r.ok else " [FAIL]"),
            r.size,
            format_time(r.numpy),
            format_time(r.numba),
            format_time(r.kdsl),
            format_ratio(r.numpy, r.kdsl),
            format_ratio(r.numba, r.kdsl),
            "; ".join(r.notes),
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(HEADERS)]
    right = {2, 3, 4, 5, 6}

    def line(values: tuple[str, ...]) -> str:
        parts = [
            v.rjust(widths[k]) if k in right else v.ljust(widths[k]) for k, v in enumerate(values)
        ]
        return "  ".join(parts).rstrip()

    print(line(HEADERS))
    print(line(tuple("-" * w for w in widths)))
    for c in cells:
        print(line(c))

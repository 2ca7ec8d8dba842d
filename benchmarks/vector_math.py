"""Vectorised math, function by function: ``python benchmarks/vector_math.py``.

For each math function and float type, ``out[i] = kd.<fn>(x[i])`` in a ``kd.prange``
loop over 2^22 elements (inputs in the function's usual range) is compiled twice, once
with the compiler's own vector variants (``KDSL_VECTOR_MATH=own``) and once with
glibc's libmvec (``=libmvec``); both and NumPy's ufunc are timed interleaved, best of
``--repeats``. Prints ns per element (wall time / elements, on kdsl's threads; NumPy on
one) and which of the two kdsl versions is faster. ``--only exp --only sin`` picks
functions; ``--threads 1`` for one thread; ``--log2n 16`` for arrays in cache;
``--cpu-time`` times by CPU time rather than wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ["KDSL_CACHE"] = "0"  # the two versions differ only by the environment
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kdsl as kd  # noqa: E402

FUNCTIONS: dict[str, tuple[Any, tuple[float, float]]] = {  # name: (numpy ufunc, input range)
    "exp": (np.exp, (-80.0, 80.0)),
    "log": (np.log, (1e-3, 1e3)),
    "sin": (np.sin, (-100.0, 100.0)),
    "cos": (np.cos, (-100.0, 100.0)),
    "tanh": (np.tanh, (-5.0, 5.0)),
    "exp2": (np.exp2, (-120.0, 120.0)),
    "log2": (np.log2, (1e-3, 1e3)),
    "log10": (np.log10, (1e-3, 1e3)),
    "expm1": (np.expm1, (-5.0, 5.0)),
    "log1p": (np.log1p, (-0.5, 1e3)),
    "tan": (np.tan, (-100.0, 100.0)),
    "sinh": (np.sinh, (-5.0, 5.0)),
    "cosh": (np.cosh, (-5.0, 5.0)),
    "atan": (np.arctan, (-50.0, 50.0)),
    "asin": (np.arcsin, (-1.0, 1.0)),
    "acos": (np.arccos, (-1.0, 1.0)),
    "erf": (None, (-3.0, 3.0)),
}



def exp_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.exp(x[i])


def log_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.log(x[i])


def sin_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.sin(x[i])


def cos_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.cos(x[i])


def tanh_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.tanh(x[i])


def exp2_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.exp2(x[i])


def log2_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.log2(x[i])


def log10_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.log10(x[i])


def expm1_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.expm1(x[i])


def log1p_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(out.shape[0]):
        out[i] = kd.log1p(x[i])


def tan_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(x.shape[0]):
        out[i] = kd.tan(x[i])


def sinh_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(x.shape[0]):
        out[i] = kd.sinh(x[i])


def cosh_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(x.shape[0]):
        out[i] = kd.cosh(x[i])


def atan_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(x.shape[0]):
        out[i] = kd.atan(x[i])


def asin_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(x.shape[0]):
        out[i] = kd.asin(x[i])


def acos_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(x.shape[0]):
        out[i] = kd.acos(x[i])


def erf_loop(x, out):  # type: ignore[no-untyped-def]
    for i in kd.prange(x.shape[0]):
        out[i] = kd.erf(x[i])


def _compile(name: str, mode: str, x: np.ndarray, out: np.ndarray) -> Callable[[], None]:
    """A fresh kernel of ``<name>_loop`` compiled in ``mode``."""
    os.environ["KDSL_VECTOR_MATH"] = mode
    kernel = kd.kernel(globals()[f"{name}_loop"])
    kernel(x, out)  # compiles now, in this mode
    return lambda: kernel(x, out)


def _best(fns: dict[str, Callable[[], object]], repeats: int,
          clock: Callable[[], float]) -> dict[str, float]:
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for side, fn in fns.items():
            start = clock()
            fn()
            best[side] = min(best[side], clock() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=list(FUNCTIONS))
    parser.add_argument("--threads", type=int)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--log2n", type=int, default=22)
    parser.add_argument("--cpu-time", action="store_true",
                        help="time by the process's CPU time (steadier on a busy machine; "
                             "with several threads, their sum)")
    args = parser.parse_args(argv)
    if args.threads:
        kd.set_num_threads(args.threads)
    n = 1 << args.log2n
    rng = np.random.default_rng(1)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    clock = "CPU time" if args.cpu_time else "wall time"
    print(f"n = 2^{args.log2n}, kdsl threads {kd.get_num_threads()}, {clock}, load average {load}")
    print(f"{'function':10} {'numpy':>8} {'libmvec':>8} {'own':>8}  ns/element   faster")
    for name in args.only or FUNCTIONS:
        ufunc, (lo, hi) = FUNCTIONS[name]
        for dtype in (np.float32, np.float64):
            x = rng.uniform(lo, hi, n).astype(dtype)
            outs = {side: np.empty_like(x) for side in ("numpy", "libmvec", "own")}
            sides: dict[str, Callable[[], object]] = {
                "libmvec": _compile(name, "libmvec", x, outs["libmvec"]),
                "own": _compile(name, "own", x, outs["own"]),
            }
            if ufunc is not None:  # NumPy has no erf
                sides["numpy"] = lambda x=x, o=outs["numpy"], f=ufunc: f(x, out=o)
                ufunc(x, out=outs["numpy"])
            else:
                outs["numpy"] = outs["libmvec"]
            for side in ("libmvec", "own"):
                np.testing.assert_allclose(outs[side], outs["numpy"], rtol=1e-5, atol=1e-30)
            best = _best(sides, args.repeats,
                         time.process_time if args.cpu_time else time.perf_counter)
            ns = {side: best[side] / n * 1e9 for side in sides}
            ns.setdefault("numpy", float("nan"))
            label = f"{name} {np.dtype(dtype).name[-2:]}"
            faster = "own" if ns["own"] < ns["libmvec"] else "libmvec"
            print(f"{label:10} {ns['numpy']:8.3f} {ns['libmvec']:8.3f} {ns['own']:8.3f}"
                  f"              {faster} ({max(ns['own'], ns['libmvec']) / min(ns['own'], ns['libmvec']):.2f}x)")
    os.environ.pop("KDSL_VECTOR_MATH", None)


if __name__ == "__main__":
    main()

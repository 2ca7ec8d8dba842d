"""Vectorised math and fused row reductions: the transcendental chain, softmax and layer
norm (into ``out`` and returning a new array), against NumPy, Numba and PyTorch on the CPU
with the same thread count (skipped where torch is not installed)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numba
import numpy as np
from data import normal, rng, uniform
from harness import Row, Timed, agree, best_of, cache_evictor
from numba import prange

import kdsl as kd

EPS = 1e-5
CHAIN_TARGET = 4.0  # kdsl at least this many times faster than NumPy
ROWS_TARGET = 3.0

# --- kdsl -------------------------------------------------------------------------------


@kd.kernel
def chain4_kdsl(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    out[:] = kd.log(kd.tanh(kd.sin(kd.exp(x))) + 2.0)


@kd.kernel
def softmax_kdsl(x: kd.Array[kd.f32, 2], out: kd.Array[kd.f32, 2]):
    m = kd.max(x, axis=1, keepdims=True)
    e = kd.exp(x - m)
    out[:] = e / kd.sum(e, axis=1, keepdims=True)


@kd.kernel
def softmax_new_kdsl(x: kd.Array[kd.f32, 2]):
    e = kd.exp(x - kd.max(x, axis=1, keepdims=True))
    return e / kd.sum(e, axis=1, keepdims=True)


@kd.kernel
def layer_norm_kdsl(x: kd.Array[kd.f32, 2], gamma: kd.Array[kd.f32], beta: kd.Array[kd.f32],
                    out: kd.Array[kd.f32, 2]):
    d = x - kd.mean(x, axis=1, keepdims=True)
    var = kd.mean(d * d, axis=1, keepdims=True)
    out[:] = d / kd.sqrt(var + 1e-5) * gamma + beta


@kd.kernel
def layer_norm_new_kdsl(x: kd.Array[kd.f32, 2], gamma: kd.Array[kd.f32], beta: kd.Array[kd.f32]):
    d = x - kd.mean(x, axis=1, keepdims=True)
    return d / kd.sqrt(kd.mean(d * d, axis=1, keepdims=True) + 1e-5) * gamma + beta


# --- NumPy ------------------------------------------------------------------------------


def chain4_numpy(x: np.ndarray, out: np.ndarray) -> None:
    """Five in-place passes, no temporaries."""
    np.exp(x, out=out)
    np.sin(out, out=out)
    np.tanh(out, out=out)
    out += np.float32(2.0)
    np.log(out, out=out)


def softmax_numpy(x: np.ndarray, out: np.ndarray) -> None:
    np.subtract(x, x.max(axis=1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)


def softmax_new_numpy(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm_numpy(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, out: np.ndarray) -> None:
    np.subtract(x, x.mean(axis=1, keepdims=True), out=out)
    var = np.mean(np.square(out), axis=1, keepdims=True)
    out /= np.sqrt(var + np.float32(EPS))
    out *= gamma
    out += beta


def layer_norm_new_numpy(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    d = x - x.mean(axis=1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + np.float32(EPS)) * gamma + beta


# --- Numba ------------------------------------------------------------------------------

_parallel = numba.njit(parallel=True, fastmath=True)


@_parallel
def chain4_numba(x: np.ndarray, out: np.ndarray) -> None:
    for i in prange(x.shape[0]):
        out[i] = np.log(np.tanh(np.sin(np.exp(x[i]))) + np.float32(2.0))


@_parallel
def layer_norm_numba(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, out: np.ndarray) -> None:
    rows, n = x.shape
    for i in prange(rows):
        s = np.float32(0.0)
        for j in range(n):
            s += x[i, j]
        mu = s / np.float32(n)
        v = np.float32(0.0)
        for j in range(n):
            d = x[i, j] - mu
            v += d * d
        inv = np.float32(1.0) / np.sqrt(v / np.float32(n) + np.float32(EPS))
        for j in range(n):
            out[i, j] = (x[i, j] - mu) * inv * gamma[j] + beta[j]


@_parallel
def softmax_numba(x: np.ndarray, out: np.ndarray) -> None:
    rows, n = x.shape
    for i in prange(rows):
        m = x[i, 0]
        for j in range(1, n):
            m = max(m, x[i, j])
        s = np.float32(0.0)
        for j in range(n):
            e = np.exp(x[i, j] - m)
            out[i, j] = e
            s += e
        inv = np.float32(1.0) / s
        for j in range(n):
            out[i, j] *= inv


# --- PyTorch ----------------------------------------------------------------------------


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(kd.get_num_threads())
    return torch


def _torch_sides(name: str, *arrays: np.ndarray) -> dict[str, Callable[[], Any]]:
    """PyTorch versions (into ``out`` where PyTorch has one, and returning)."""
    torch = _torch()
    if torch is None:
        return {}
    t = [torch.from_numpy(a) for a in arrays]
    fn = torch.nn.functional

    def chain() -> Any:
        x, out = t
        torch.exp(x, out=out)
        torch.sin(out, out=out)
        torch.tanh(out, out=out)
        out.add_(2.0)
        return torch.log(out, out=out)

    if name == "chain":
        return {"torch": chain}
    if name == "softmax":
        return {"torch": lambda: torch.softmax(t[0], dim=1)}
    x, gamma, beta = t[:3]
    return {"torch": lambda: fn.layer_norm(x, (x.shape[1],), gamma, beta, EPS)}


# --- rows -------------------------------------------------------------------------------


def _notes(row: Row, times: dict[str, float], target: float, torch_target: bool) -> None:
    ratio = times["numpy"] / times["kdsl"]
    row.notes.append(f"{'ok' if ratio >= target else 'MISSED'} target >= {target:g}x numpy")
    if "torch" in times:
        vs = times["torch"] / times["kdsl"]
        verdict = ("ok" if vs >= 1.0 else "MISSED") if torch_target else ""
        row.notes.append(f"torch {times['torch'] * 1e3:.2f} ms = {vs:.2f}x kdsl time {verdict}".rstrip())
    else:
        row.notes.append("torch: not installed, skipped")


def _measure(row: Row, sides: dict[str, Callable[[], Any]], cfg: Any,
             setup: Callable[[], object] | None = None) -> dict[str, float]:
    times = best_of({k: Timed(f, setup) for k, f in sides.items()}, cfg)
    for side in ("numpy", "numba", "kdsl"):
        if side in times:
            setattr(row, side, times[side])
    return times


def transcendental_chain(ctx: Any) -> list[Row]:
    cfg = ctx.config
    n = cfg.stream_n
    x = (uniform(n, rng()) * np.float32(4.0) - np.float32(2.0)).astype(np.float32)
    outs = {side: np.empty_like(x) for side in ("numpy", "numba", "kdsl", "torch")}
    sides: dict[str, Callable[[], Any]] = {
        "numpy": partial(chain4_numpy, x, outs["numpy"]),
        "numba": partial(chain4_numba, x, outs["numba"]),
        "kdsl": partial(chain4_kdsl, x, outs["kdsl"]),
        **_torch_sides("chain", x, outs["torch"]),
    }
    for fn in sides.values():
        fn()
    x64 = x.astype(np.float64)
    want = np.log(np.tanh(np.sin(np.exp(x64))) + 2.0)
    row = Row("chain exp,sin,tanh,log", f"n=2^{n.bit_length() - 1} f32, 5 ops")
    for side in sides:
        row.ok &= agree(f"chain4: {side} vs float64", outs[side], want, rtol=1e-5, atol=1e-6)
    _notes(row, _measure(row, sides, cfg), CHAIN_TARGET, torch_target=False)
    return [row]


def _rows_workload(name: str, ctx: Any, make_args: Callable[[np.random.Generator], tuple],
                   into: tuple[Callable, Callable, Callable], new: tuple[Callable, Callable],
                   reference: Callable[..., np.ndarray]) -> list[Row]:
    cfg = ctx.config
    rows_n, cols = cfg.softmax_rows, cfg.softmax_cols
    args = make_args(rng())
    want = reference(*[a.astype(np.float64) for a in args])
    atol = 1e-5 * float(np.abs(want).max())
    numpy_into, numba_into, kdsl_into = into
    outs = {side: np.empty((rows_n, cols), np.float32) for side in ("numpy", "numba", "kdsl")}
    torch_sides = _torch_sides(name, *args)
    evict = cache_evictor()  # every side timed from the same (cold) caches
    result_rows = []
    for label, sides in (
        ("-> out", {"numpy": partial(numpy_into, *args, outs["numpy"]),
                    "numba": partial(numba_into, *args, outs["numba"]),
                    "kdsl": partial(kdsl_into, *args, outs["kdsl"]), **torch_sides}),
        ("returning", {"numpy": partial(new[0], *args), "kdsl": partial(new[1], *args),
                       **torch_sides}),
    ):
        row = Row(f"{name} rows {label}", f"{rows_n}x{cols} f32")
        for side, fn in sides.items():
            got = fn()
            got = outs[side] if got is None else np.asarray(got)
            row.ok &= agree(f"{name} {label}: {side} vs float64", got, want, rtol=1e-4, atol=atol)
        _notes(row, _measure(row, sides, cfg, evict), ROWS_TARGET, torch_target=True)
        result_rows.append(row)
    return result_rows


def softmax_rows(ctx: Any) -> list[Row]:
    rows_n, cols = ctx.config.softmax_rows, ctx.config.softmax_cols

    def reference(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return _rows_workload("softmax", ctx, lambda g: (normal((rows_n, cols), g, scale=3.0),),
                          (softmax_numpy, softmax_numba, softmax_kdsl),
                          (softmax_new_numpy, softmax_new_kdsl), reference)


def layer_norm_rows(ctx: Any) -> list[Row]:
    rows_n, cols = ctx.config.softmax_rows, ctx.config.softmax_cols

    def make(g: np.random.Generator) -> tuple:
        return (normal((rows_n, cols), g, scale=2.0) + np.float32(1.0),
                normal((cols,), g), normal((cols,), g))

    return _rows_workload("layer norm", ctx, make,
                          (layer_norm_numpy, layer_norm_numba, layer_norm_kdsl),
                          (layer_norm_new_numpy, layer_norm_new_kdsl), layer_norm_new_numpy)

"""The NumPy side of every benchmark: idiomatic whole-array code, float32 throughout."""

from __future__ import annotations

import numpy as np


def saxpy(a: np.float32, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    np.multiply(x, a, out=out)
    out += y


def total(x: np.ndarray) -> np.float32:
    return x.sum()


def forces(pos: np.ndarray, cutoff: float, rows_per_block: int = 256) -> np.ndarray:
    """All-pairs Lennard-Jones forces, a block of rows at a time to bound the temporaries."""
    n = pos.shape[0]
    acc = np.empty_like(pos)
    c2 = np.float32(cutoff) ** 2
    for start in range(0, n, rows_per_block):
        stop = min(n, start + rows_per_block)
        d = pos[start:stop, None, :] - pos[None, :, :]
        r2 = np.einsum("ijk,ijk->ij", d, d)
        rows = np.arange(stop - start)
        r2[rows, rows + start] = np.inf  # no self-interaction
        inside = r2 < c2
        r2 = np.where(inside, r2, np.float32(1.0))
        inv6 = 1.0 / (r2 * r2 * r2)
        f = np.where(inside, 24.0 * inv6 * (2.0 * inv6 - 1.0) / r2, np.float32(0.0))
        acc[start:stop] = np.einsum("ij,ijk->ik", f, d)
    return acc


def jacobi(a: np.ndarray, b: np.ndarray, iters: int) -> None:
    """``iters`` sweeps ping-ponging ``a`` and ``b``; the result ends in ``a`` when even."""
    src, dst = a, b
    for _ in range(iters):
        dst[1:-1, 1:-1] = 0.25 * (src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:])
        src, dst = dst, src


def scatter(px: np.ndarray, py: np.ndarray, w: np.ndarray, grid: np.ndarray) -> None:
    nx, ny = grid.shape
    ix = (px * nx).astype(np.intp)
    iy = (py * ny).astype(np.intp)
    np.add.at(grid, (ix, iy), w)


def trivial(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    np.add(a, b, out=c)


def trivial_scalar(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: float, k: int) -> None:
    c[k] = s * a[k] + b[k]


def chain(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
    """``out = sqrt(a*b + c) * 0.5 - a`` in five in-place passes (no temporaries)."""
    np.multiply(a, b, out=out)
    out += c
    np.sqrt(out, out=out)
    out *= np.float32(0.5)
    out -= a


def softmax(x: np.ndarray, out: np.ndarray) -> None:
    """Row-wise softmax, in place in ``out`` apart from the two per-row vectors."""
    np.subtract(x, x.max(axis=1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)


def mlp(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    return np.tanh(x @ w1 + b1) @ w2


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ b


def fluid_step(u: np.ndarray, v: np.ndarray, p: np.ndarray, scratch: np.ndarray,
               div: np.ndarray) -> tuple[float, float]:
    """The kdsl ``fluid_step`` (compile-time row) with NumPy slicing, for its check."""
    div[1:-1, 1:-1] = 0.5 * (u[2:, 1:-1] - u[:-2, 1:-1] + v[1:-1, 2:] - v[1:-1, :-2])
    before = float(np.abs(div).max())
    src, dst = p, scratch
    for _ in range(20):
        dst[1:-1, 1:-1] = 0.25 * (src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2]
                                  + src[1:-1, 2:] - div[1:-1, 1:-1])
        src, dst = dst, src
    u[1:-1, 1:-1] -= 0.5 * (src[2:, 1:-1] - src[:-2, 1:-1])
    v[1:-1, 1:-1] -= 0.5 * (src[1:-1, 2:] - src[1:-1, :-2])
    return before, float((u * u + v * v).sum())

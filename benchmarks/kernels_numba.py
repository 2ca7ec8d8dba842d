"""The Numba side of every benchmark: ``@numba.njit(parallel=True, fastmath=True)`` with
``numba.prange``, written the way a Numba user would, with float32 constants so that both
sides do the same float32 arithmetic (a bare ``0.25`` would make Numba compute in float64).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

parallel = numba.njit(parallel=True, fastmath=True)

F0 = np.float32(0.0)
F1 = np.float32(1.0)
F2 = np.float32(2.0)
F24 = np.float32(24.0)
QUARTER = np.float32(0.25)


@parallel
def copy(src: np.ndarray, dst: np.ndarray) -> None:
    for i in prange(src.shape[0]):
        dst[i] = src[i]


@parallel
def saxpy(a: np.float32, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    for i in prange(x.shape[0]):
        out[i] = a * x[i] + y[i]


@parallel
def total(x: np.ndarray) -> np.float32:
    s = F0
    for i in prange(x.shape[0]):
        s += x[i]
    return s


@parallel
def forces(pos: np.ndarray, acc: np.ndarray, cutoff: np.float32) -> None:
    n = pos.shape[0]
    c2 = cutoff * cutoff
    for i in prange(n):
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax, ay, az = F0, F0, F0
        for j in range(n):
            if j == i:
                continue
            dx = xi - pos[j, 0]
            dy = yi - pos[j, 1]
            dz = zi - pos[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < c2:
                inv6 = F1 / (r2 * r2 * r2)
                f = F24 * inv6 * (F2 * inv6 - F1) / r2
                ax += f * dx
                ay += f * dy
                az += f * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@parallel
def jacobi(a: np.ndarray, b: np.ndarray, iters: int) -> None:
    nx, ny = a.shape
    src, dst = a, b
    for _ in range(iters):
        for i in prange(1, nx - 1):
            for j in range(1, ny - 1):
                dst[i, j] = QUARTER * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])
        src, dst = dst, src


@parallel
def scatter(px: np.ndarray, py: np.ndarray, w: np.ndarray, grid: np.ndarray) -> None:
    """Numba has no atomics: each thread scatters its share of the particles into its own
    copy of the grid, and the copies are summed in a second parallel loop."""
    nx, ny = grid.shape
    n = px.shape[0]
    nthreads = numba.get_num_threads()
    chunk = (n + nthreads - 1) // nthreads
    local = np.zeros((nthreads, nx, ny), dtype=np.float32)
    for t in prange(nthreads):
        mine = local[t]
        for p in range(t * chunk, min(n, (t + 1) * chunk)):
            mine[int(px[p] * nx), int(py[p] * ny)] += w[p]
    for ix in prange(nx):
        for t in range(nthreads):
            for iy in range(ny):
                grid[ix, iy] += local[t, ix, iy]


@numba.njit(fastmath=True)
def scatter_serial(px: np.ndarray, py: np.ndarray, w: np.ndarray, grid: np.ndarray) -> None:
    nx, ny = grid.shape
    for p in range(px.shape[0]):
        grid[int(px[p] * nx), int(py[p] * ny)] += w[p]


@numba.njit
def trivial(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    c[0] = a[0] + b[0]


@numba.njit
def trivial_scalar(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: float, k: int) -> None:
    c[k] = s * a[k] + b[k]


@parallel
def trivial_parallel(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    for i in prange(c.shape[0]):
        c[i] = a[i] + b[i]


HALF = np.float32(0.5)


@parallel
def chain(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
    for i in prange(out.shape[0]):
        out[i] = np.sqrt(a[i] * b[i] + c[i]) * HALF - a[i]


@parallel
def softmax(x: np.ndarray, out: np.ndarray) -> None:
    rows, n = x.shape
    for i in prange(rows):
        m = x[i, 0]
        for j in range(1, n):
            m = max(m, x[i, j])
        s = F0
        for j in range(n):
            e = np.exp(x[i, j] - m)
            out[i, j] = e
            s += e
        inv = F1 / s
        for j in range(n):
            out[i, j] *= inv


@parallel
def matmul_naive(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """The textbook triple loop: parallel over rows of ``c``, then ``j``, then ``k``."""
    n, kk = a.shape
    m = b.shape[1]
    for i in prange(n):
        for j in range(m):
            s = F0
            for k in range(kk):
                s += a[i, k] * b[k, j]
            c[i, j] = s

"""The kdsl side of every benchmark: kernels written as a kdsl user would write them."""

from __future__ import annotations

import kdsl as kd

# --- 1. saxpy -------------------------------------------------------------------------


@kd.kernel
def saxpy(a: kd.f32, x: kd.Array[kd.f32], y: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        out[i] = a * x[i] + y[i]


# --- 2. sum reduction -----------------------------------------------------------------


@kd.kernel
def total(x: kd.Array[kd.f32]) -> kd.f32:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i]
    return s


# --- 3. all-pairs n-body (the example at the top of API.md) ---------------------------


@kd.func
def lj(r2: kd.f32) -> kd.f32:
    inv6 = 1.0 / (r2 * r2 * r2)
    return 24.0 * inv6 * (2.0 * inv6 - 1.0) / r2


@kd.kernel
def forces(pos: kd.Array[kd.vec3], acc: kd.Array[kd.vec3], cutoff: kd.f32):
    n = pos.shape[0]
    for i in kd.prange(n):
        a = kd.vec3(0.0)
        for j in range(n):
            if j == i:
                continue
            d = pos[i] - pos[j]
            r2 = kd.dot(d, d)
            if r2 < cutoff * cutoff:
                a += lj(r2) * d
        acc[i] = a


# The same kernel on the (N, 3) array with scalar components, as the Numba version reads it.


@kd.kernel
def forces_scalar(pos: kd.Array[kd.f32, 2], acc: kd.Array[kd.f32, 2], cutoff: kd.f32):
    n = pos.shape[0]
    for i in kd.prange(n):
        ax = 0.0
        ay = 0.0
        az = 0.0
        for j in range(n):
            if j == i:
                continue
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff * cutoff:
                f = lj(r2)
                ax += f * dx
                ay += f * dy
                az += f * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


# --- 4. 2-D Jacobi: the whole time loop in one call -----------------------------------
# Each trip sweeps src into dst and swaps the two array locals; with an even `iters` the
# result ends in `a`.


@kd.kernel
def jacobi(a: kd.Array[kd.f32, 2], b: kd.Array[kd.f32, 2], iters: kd.i32):
    nx = a.shape[0]
    ny = a.shape[1]
    src = a
    dst = b
    for _ in range(iters):
        for i in kd.prange(1, nx - 1):
            for j in range(1, ny - 1):
                dst[i, j] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])
        src, dst = dst, src


# --- 5. particle-to-grid scatter (the += is atomic inside prange) ---------------------


@kd.kernel
def scatter(
    px: kd.Array[kd.f32], py: kd.Array[kd.f32], w: kd.Array[kd.f32], grid: kd.Array[kd.f32, 2]
):
    nx = grid.shape[0]
    ny = grid.shape[1]
    for p in kd.prange(px.shape[0]):
        ix = int(px[p] * nx)
        iy = int(py[p] * ny)
        grid[ix, iy] += w[p]


# --- 6. call overhead -----------------------------------------------------------------


@kd.kernel
def trivial(a: kd.Array[kd.f32], b: kd.Array[kd.f32], c: kd.Array[kd.f32]):
    c[0] = a[0] + b[0]


@kd.kernel
def trivial_scalar(a: kd.Array[kd.f32], b: kd.Array[kd.f32], c: kd.Array[kd.f32], s: kd.f32,
                   k: kd.i64):
    c[k] = s * a[k] + b[k]


@kd.kernel
def trivial_parallel(a: kd.Array[kd.f32], b: kd.Array[kd.f32], c: kd.Array[kd.f32]):
    for i in kd.prange(c.shape[0]):
        c[i] = a[i] + b[i]


# --- 7. tensor expressions (API.md section 7), each next to the same computation written
# by hand with kd.prange, so that the table shows what the tensor form costs -------------


@kd.kernel
def chain_tensor(
    a: kd.Array[kd.f32], b: kd.Array[kd.f32], c: kd.Array[kd.f32], out: kd.Array[kd.f32]
):
    out[:] = kd.sqrt(a * b + c) * 0.5 - a


@kd.kernel
def chain_loop(
    a: kd.Array[kd.f32], b: kd.Array[kd.f32], c: kd.Array[kd.f32], out: kd.Array[kd.f32]
):
    for i in kd.prange(out.shape[0]):
        out[i] = kd.sqrt(a[i] * b[i] + c[i]) * 0.5 - a[i]


@kd.kernel
def jacobi_slices(a: kd.Array[kd.f32, 2], b: kd.Array[kd.f32, 2], iters: kd.i32):
    src = a
    dst = b
    for _ in range(iters):
        dst[1:-1, 1:-1] = 0.25 * (src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:])
        src, dst = dst, src


@kd.kernel
def softmax_tensor(x: kd.Array[kd.f32, 2], out: kd.Array[kd.f32, 2]):
    m = kd.max(x, axis=1, keepdims=True)
    e = kd.exp(x - m)
    out[:] = e / kd.sum(e, axis=1, keepdims=True)


@kd.kernel
def softmax_loop(x: kd.Array[kd.f32, 2], out: kd.Array[kd.f32, 2]):
    n = x.shape[1]
    for i in kd.prange(x.shape[0]):
        m = x[i, 0]
        for j in range(1, n):
            m = max(m, x[i, j])
        s = 0.0
        for j in range(n):
            e = kd.exp(x[i, j] - m)
            out[i, j] = e
            s += e
        inv = 1.0 / s
        for j in range(n):
            out[i, j] = out[i, j] * inv


@kd.kernel
def mlp(
    x: kd.Array[kd.f32, 2], w1: kd.Array[kd.f32, 2], b1: kd.Array[kd.f32], w2: kd.Array[kd.f32, 2]
):
    return kd.tanh(x @ w1 + b1) @ w2


@kd.kernel
def matmul(a: kd.Array[kd.f32, 2], b: kd.Array[kd.f32, 2]):
    return a @ b


@kd.kernel
def matmul_any(a, b):
    """``a @ b`` of any float type (one specialisation per type)."""
    return a @ b


@kd.kernel
def matmul_batched(a, b, out):
    """A batch of small products, one per iteration of a ``prange``."""
    for i in kd.prange(a.shape[0]):
        out[i] = a[i] @ b[i]


# --- compile time of a tensor-heavy kernel: one step of a pressure projection ----------
# Ten statements: the divergence, its largest magnitude, 20 Jacobi sweeps written with
# slices, the velocity update and the kinetic energy.


@kd.kernel
def fluid_step(u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2], p: kd.Array[kd.f32, 2],
               scratch: kd.Array[kd.f32, 2], div: kd.Array[kd.f32, 2]) -> tuple[kd.f32, kd.f32]:
    div[1:-1, 1:-1] = 0.5 * (u[2:, 1:-1] - u[:-2, 1:-1] + v[1:-1, 2:] - v[1:-1, :-2])
    before = kd.max(kd.abs(div))
    src = p
    dst = scratch
    for _ in range(20):
        dst[1:-1, 1:-1] = 0.25 * (src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2]
                                  + src[1:-1, 2:] - div[1:-1, 1:-1])
        src, dst = dst, src
    u[1:-1, 1:-1] -= 0.5 * (src[2:, 1:-1] - src[:-2, 1:-1])
    v[1:-1, 1:-1] -= 0.5 * (src[1:-1, 2:] - src[1:-1, :-2])
    energy = kd.sum(u * u + v * v)
    return before, energy

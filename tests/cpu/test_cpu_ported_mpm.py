"""Taichi's mpm88 (MLS-MPM in 88 lines), ported with the constructs a Taichi user writes:
``kd.static(kd.ndrange(3, 3))``, a list of weight vectors, ``grid_v[base + offset]``
with ivec2s, ``vec2 - ivec2`` staying vec2, ``kd.mat22([[s, 0], [0, s]])``,
``grid_v[i, j] = [0, 0]``, ``grid_v[i, j].y -= g``, ``.outer_product`` and ``.trace()``.
Compiled, plain Python and the emulated CUDA device agree (through ``check``)."""

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def substep(x: kd.Array[kd.vec2], v: kd.Array[kd.vec2], C: kd.Array[kd.mat22],
            J: kd.Array[kd.f32], grid_v: kd.Array[kd.vec2, 2], grid_m: kd.Array[kd.f32, 2],
            dt: kd.f32):
    n_grid = grid_m.shape[0]
    dx = 1.0 / n_grid
    inv_dx = float(n_grid)
    p_vol, p_mass, E, bound = (dx * 0.5) ** 2, 1.0, 400.0, 3
    for i, j in kd.ndrange(n_grid, n_grid):
        grid_v[i, j] = [0, 0]
        grid_m[i, j] = 0
    for p in kd.prange(x.shape[0]):
        Xp = x[p] * inv_dx
        base = kd.ivec2(Xp - 0.5)
        fx = Xp - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
        stress = -dt * 4 * E * p_vol * (J[p] - 1) * inv_dx * inv_dx
        affine = kd.mat22([[stress, 0], [0, stress]]) + p_mass * C[p]
        for i, j in kd.static(kd.ndrange(3, 3)):
            offset = kd.ivec2(i, j)
            dpos = (offset - fx) * dx
            weight = w[i].x * w[j].y
            grid_v[base + offset] += weight * (p_mass * v[p] + affine @ dpos)
            grid_m[base + offset] += weight * p_mass
    for i, j in kd.ndrange(n_grid, n_grid):
        if grid_m[i, j] > 0:
            grid_v[i, j] = grid_v[i, j] / grid_m[i, j]
        grid_v[i, j].y -= dt * 9.8
        if i < bound and grid_v[i, j].x < 0:
            grid_v[i, j].x = 0
        if i > n_grid - bound and grid_v[i, j].x > 0:
            grid_v[i, j].x = 0
        if j < bound and grid_v[i, j].y < 0:
            grid_v[i, j][1] = 0
        if j > n_grid - bound and grid_v[i, j].y > 0:
            grid_v[i, j][1] = 0
    for p in kd.prange(x.shape[0]):
        Xp = x[p] * inv_dx
        base = kd.ivec2(Xp - 0.5)
        fx = Xp - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        new_v = kd.vec2(0.0)
        new_C = kd.mat22(0.0)
        for i, j in kd.static(kd.ndrange(3, 3)):
            offset = kd.ivec2(i, j)
            dpos = (offset - fx) * dx
            weight = w[i].x * w[j].y
            g_v = grid_v[base + offset]
            new_v += weight * g_v
            new_C += 4 * weight * g_v.outer_product(dpos) * inv_dx * inv_dx
        v[p] = new_v
        x[p] += dt * v[p]
        J[p] *= 1 + dt * new_C.trace()
        C[p] = new_C


def test_mpm88_substeps_agree_with_plain_python(rng):
    n, n_grid = 300, 24
    x = (rng.random((n, 2)) * 0.4 + 0.2).astype(np.float32)
    v = np.zeros((n, 2), np.float32)
    v[:, 1] = -1.0
    C = np.zeros((n, 2, 2), np.float32)
    J = np.ones(n, np.float32)
    grid_v, grid_m = np.zeros((n_grid, n_grid, 2), np.float32), np.zeros((n_grid, n_grid), np.float32)
    # C sums terms of size ~10 that cancel: an absolute tolerance of 1e-4 is float32 rounding
    for _ in range(3):  # each step starts from the compiled state; the scatter is atomic
        check(substep, x, v, C, J, grid_v, grid_m, np.float32(2e-4), rtol=1e-4, atol=1e-4)
    assert np.isclose(grid_m.sum(), n, rtol=1e-4)  # the weights of every particle sum to one
    assert (v[:, 1] < -1.0).all() and np.isfinite(C).all() and (J > 0).all()

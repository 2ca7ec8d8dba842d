"""Solvers as Taichi and Warp users write them (API.md sections 1-4), each compared with
its own plain-Python run and with NumPy: Taichi's mpm128 (2-D MPM with three materials:
matrices, ivec2 grid indices, vector atomics, `kd.static` stencils), an implicit
mass-spring chain solved by matrix-free conjugate gradients inside one kernel (Taichi's
implicit_mass_spring: `while` with `break`, reductions of vectors), and Warp's wave
example (a time loop of parallel stencils in one call)."""

from __future__ import annotations

import math

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd

N_GRID = 32
DX = 1.0 / N_GRID
INV_DX = float(N_GRID)
DT = 1e-4
P_VOL = (DX * 0.5) ** 2
P_MASS = P_VOL * 1.0
E, NU = 5e3, 0.2
MU_0, LAMBDA_0 = E / (2 * (1 + NU)), E * NU / ((1 + NU) * (1 - 2 * NU))
IDENTITY = kd.mat22([[1.0, 0.0], [0.0, 1.0]])


@kd.kernel
def mpm_substep(x: kd.Array[kd.vec2], v: kd.Array[kd.vec2], C: kd.Array[kd.mat22],
                F: kd.Array[kd.mat22], material: kd.Array[kd.i32], Jp: kd.Array[kd.f32],
                grid_v: kd.Array[kd.vec2, 2], grid_m: kd.Array[kd.f32, 2]):
    for i, j in kd.ndrange(N_GRID, N_GRID):
        grid_v[i, j] = [0, 0]
        grid_m[i, j] = 0
    for p in kd.prange(x.shape[0]):
        base = kd.ivec2(x[p] * INV_DX - 0.5)
        fx = x[p] * INV_DX - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
        F[p] = (IDENTITY + DT * C[p]) @ F[p]
        h = kd.exp(10 * (1.0 - Jp[p]))
        if material[p] == 1:  # jelly
            h = 0.3
        mu, la = MU_0 * h, LAMBDA_0 * h
        if material[p] == 0:  # liquid
            mu = 0.0
        J = kd.determinant(F[p])
        if material[p] == 0:
            F[p] = IDENTITY * kd.sqrt(J)
        stress = 2 * mu * (F[p] - IDENTITY) @ F[p].transpose() + IDENTITY * la * J * (J - 1)
        affine = (-DT * P_VOL * 4 * INV_DX * INV_DX) * stress + P_MASS * C[p]
        for i, j in kd.static(kd.ndrange(3, 3)):
            offset = kd.ivec2(i, j)
            dpos = (offset - fx) * DX
            weight = w[i][0] * w[j][1]
            grid_v[base + offset] += weight * (P_MASS * v[p] + affine @ dpos)
            grid_m[base + offset] += weight * P_MASS
    for i, j in kd.ndrange(N_GRID, N_GRID):
        if grid_m[i, j] > 0:
            grid_v[i, j] = (1 / grid_m[i, j]) * grid_v[i, j]
            grid_v[i, j][1] -= DT * 50
            if i < 3 and grid_v[i, j][0] < 0 or i > N_GRID - 3 and grid_v[i, j][0] > 0:
                grid_v[i, j][0] = 0
            if j < 3 and grid_v[i, j][1] < 0 or j > N_GRID - 3 and grid_v[i, j][1] > 0:
                grid_v[i, j][1] = 0
    for p in kd.prange(x.shape[0]):
        base = kd.ivec2(x[p] * INV_DX - 0.5)
        fx = x[p] * INV_DX - kd.vec2(base)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        new_v = kd.vec2(0.0)
        new_C = kd.mat22(0.0)
        for i, j in kd.static(kd.ndrange(3, 3)):
            g_v = grid_v[base + kd.ivec2(i, j)]
            weight = w[i][0] * w[j][1]
            new_v += weight * g_v
            new_C += 4 * INV_DX * weight * kd.outer(g_v, kd.vec2(i, j) - fx)
        v[p], C[p] = new_v, new_C
        x[p] += DT * v[p]


def test_mpm128_conserves_mass_and_agrees_with_plain_python(rng):
    n = 240
    x = (rng.random((n, 2)) * 0.4 + 0.3).astype(np.float32)
    v = np.zeros((n, 2), np.float32)
    C = np.zeros((n, 2, 2), np.float32)
    F = np.tile(np.eye(2, dtype=np.float32), (n, 1, 1))
    material = (np.arange(n) % 3).astype(np.int32)
    Jp = np.ones(n, np.float32)
    grid_v = np.zeros((N_GRID, N_GRID, 2), np.float32)
    grid_m = np.zeros((N_GRID, N_GRID), np.float32)
    for _ in range(2):
        check(mpm_substep, x, v, C, F, material, Jp, grid_v, grid_m, rtol=1e-3, atol=1e-5)
    assert math.isclose(grid_m.sum(), n * P_MASS, rel_tol=1e-4)
    assert (v[:, 1] < 0).all()  # everything falls


@kd.func
def apply_system(p: kd.Array[kd.vec2d], out: kd.Array[kd.vec2d], mass: kd.f64, hk: kd.f64):
    """(M + h^2 k L) p for a chain of springs (L the chain's graph Laplacian)."""
    n = p.shape[0]
    for i in kd.prange(n):
        lap = kd.vec2d(0.0)
        if i > 0:
            lap += p[i] - p[i - 1]
        if i < n - 1:
            lap += p[i] - p[i + 1]
        out[i] = mass * p[i] + hk * lap


@kd.func
def dot_all(a: kd.Array[kd.vec2d], b: kd.Array[kd.vec2d]) -> kd.f64:
    s = 0.0
    for i in kd.prange(a.shape[0]):
        s += kd.dot(a[i], b[i])
    return s


@kd.kernel
def implicit_step(x: kd.Array[kd.vec2d], v: kd.Array[kd.vec2d], rest: kd.f64, mass: kd.f64,
                  k: kd.f64, h: kd.f64, tol: kd.f64):
    n = x.shape[0]
    b = kd.zeros(n, kd.vec2d)
    for i in kd.prange(n):  # b = M v + h f(x)
        f = kd.vec2d(0.0, -9.8 * mass)
        for j in (i - 1, i + 1):
            if 0 <= j < n:
                d = x[j] - x[i]
                length = kd.length(d)
                f += k * (length - rest) * d / length
        b[i] = mass * v[i] + h * f
    r = kd.zeros_like(b)
    p = kd.zeros_like(b)
    ap = kd.zeros_like(b)
    apply_system(v, ap, mass, h * h * k)
    for i in kd.prange(n):
        r[i] = b[i] - ap[i]
        p[i] = r[i]
    rs = dot_all(r, r)
    iterations = 0
    while True:
        if math.sqrt(rs) < tol or iterations == 10 * n:
            break
        apply_system(p, ap, mass, h * h * k)
        alpha = rs / dot_all(p, ap)
        for i in kd.prange(n):
            v[i] += alpha * p[i]
            r[i] -= alpha * ap[i]
        new_rs = dot_all(r, r)
        for i in kd.prange(n):
            p[i] = r[i] + (new_rs / rs) * p[i]
        rs = new_rs
        iterations += 1
    for i in kd.prange(n):
        x[i] += h * v[i]
    return iterations


def test_implicit_mass_spring_solves_its_linear_system(rng):
    n = 24
    x = np.stack([np.arange(n) * 0.1, np.zeros(n)], 1) + rng.normal(0, 0.01, (n, 2))
    v = rng.normal(0, 0.1, (n, 2))
    x0, v0 = x.copy(), v.copy()
    iterations = check(implicit_step, x, v, 0.1, 0.5, 200.0, 0.01, 1e-11, rtol=1e-7, atol=1e-9)
    assert 0 < iterations < 10 * n
    # NumPy: the same system, dense
    laplacian = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    laplacian[0, 0] = laplacian[-1, -1] = 1
    system = 0.5 * np.eye(n) + 0.01 ** 2 * 200.0 * laplacian
    force = np.zeros((n, 2))
    force[:, 1] = -9.8 * 0.5
    for i in range(n):
        for j in (i - 1, i + 1):
            if 0 <= j < n:
                d = x0[j] - x0[i]
                force[i] += 200.0 * (np.linalg.norm(d) - 0.1) * d / np.linalg.norm(d)
    expected = np.linalg.solve(system, 0.5 * v0 + 0.01 * force)
    np.testing.assert_allclose(v, expected, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(x, x0 + 0.01 * expected, rtol=1e-12, atol=1e-12)


@kd.func
def laplacian5(u: kd.Array[kd.f32, 2], y: kd.i64, x: kd.i64) -> kd.f32:
    h, w = u.shape[0], u.shape[1]
    x0, x1 = max(x - 1, 0), min(x + 1, w - 1)
    y0, y1 = max(y - 1, 0), min(y + 1, h - 1)
    return u[y, x0] + u[y, x1] + u[y0, x] + u[y1, x] - 4.0 * u[y, x]


@kd.kernel
def wave(current: kd.Array[kd.f32, 2], previous: kd.Array[kd.f32, 2], speed: kd.f32,
         damping: kd.f32, dt: kd.f32, steps: kd.i32, cx: kd.f32, cy: kd.f32, radius: kd.f32):
    for y, x in kd.ndrange(current.shape[0], current.shape[1]):  # a drop
        d2 = (x - cx) ** 2 + (y - cy) ** 2
        if d2 < radius * radius:
            current[y, x] += 1.0 - kd.sqrt(d2) / radius
    for _ in range(steps):
        for y, x in kd.ndrange(current.shape[0], current.shape[1]):
            c = current[y, x]
            p = previous[y, x]
            acceleration = speed * laplacian5(current, y, x) - damping * (c - p) / dt
            previous[y, x] = 2.0 * c - p + acceleration * dt * dt
        for y, x in kd.ndrange(current.shape[0], current.shape[1]):
            current[y, x], previous[y, x] = previous[y, x], current[y, x]
    return kd.sum(current * current)


def test_wave_equation_time_loop(rng):
    current = rng.normal(0, 0.01, (20, 28)).astype(np.float32)
    previous = current.copy()
    energy = check(wave, current, previous, 1.0, 0.01, 0.1, 15, 14.0, 10.0, 5.0,
                   rtol=1e-4, atol=1e-6)
    assert math.isclose(energy, float((current.astype(np.float64) ** 2).sum()), rel_tol=1e-4)

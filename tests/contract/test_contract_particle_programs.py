"""Particle programs as Warp (wp.HashGrid) and Taichi users write them, ported to
kd.NeighborGrid and checked against brute-force NumPy: Warp's SPH example (poly6
density, spiky pressure and viscosity forces) and Taichi's DEM example (grains of
different radii pushing apart, with damping). Each kernel also runs as plain Python and
on the CUDA device (emulated), with the same results."""

from __future__ import annotations

import math

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd

# --- Warp's example_sph: density, then pressure and viscosity accelerations ---------------


@kd.func
def poly6(r2: kd.f32, h: kd.f32) -> kd.f32:
    q = h * h - r2
    return 315.0 / (64.0 * math.pi * h ** 9) * q * q * q


@kd.kernel
def sph_step(x: kd.Array[kd.vec3], v: kd.Array[kd.vec3], h: kd.f32, mass: kd.f32,
             stiffness: kd.f32, rest: kd.f32, viscosity: kd.f32, box: kd.f32,
             rho: kd.Array[kd.f32], acc: kd.Array[kd.vec3]):
    grid = kd.NeighborGrid(x, h, (0.0, 0.0, 0.0), (box, box, box))
    for i in kd.prange(x.shape[0]):
        total = kd.f32(0.0)
        for j in grid.neighbors(x[i], h):
            d = x[j] - x[i]
            total += mass * poly6(kd.dot(d, d), h)
        rho[i] = total
    spiky = -45.0 / (math.pi * h ** 6)
    for i in kd.prange(x.shape[0]):
        p_i = stiffness * (rho[i] - rest)
        a = kd.vec3(0.0)
        for j in grid.neighbors(x[i], h):
            if j == i:
                continue
            d = x[i] - x[j]
            r = kd.length(d)
            if r > 0.0:
                p_j = stiffness * (rho[j] - rest)
                w = h - r
                a += -mass * (p_i + p_j) / (2.0 * rho[j]) * spiky * w * w * (d / r)
                a += viscosity * mass * (v[j] - v[i]) / rho[j] * 45.0 / (math.pi * h ** 6) * w
        acc[i] = a / rho[i]


def sph_reference(x, v, h, mass, stiffness, rest, viscosity):
    x, v = x.astype(np.float64), v.astype(np.float64)
    d = x[None, :, :] - x[:, None, :]                 # d[i, j] = x[j] - x[i]
    r2 = (d * d).sum(-1)
    near = r2 <= h * h
    rho = (near * mass * 315.0 / (64.0 * np.pi * h ** 9) * (h * h - r2) ** 3).sum(1)
    p = stiffness * (rho - rest)
    r = np.sqrt(r2)
    pair = near & (r > 0)
    w = np.where(pair, h - r, 0.0)
    unit = np.where(pair[..., None], -d / np.where(pair, r, 1.0)[..., None], 0.0)
    spiky = -45.0 / (np.pi * h ** 6)
    pressure = (-mass * (p[:, None] + p[None, :]) / (2.0 * rho[None, :]) * spiky * w * w)
    visc = viscosity * mass / rho[None, :] * 45.0 / (np.pi * h ** 6) * w
    acc = (pressure[..., None] * unit + visc[..., None] * (v[None, :, :] - v[:, None, :])).sum(1)
    return rho, acc / rho[:, None]


def test_warp_sph_step_matches_brute_force(rng):
    n, box, h = 600, 1.0, 0.12
    x = (rng.random((n, 3)) * box).astype(np.float32)
    v = rng.normal(0.0, 0.1, (n, 3)).astype(np.float32)
    rho, acc = np.zeros(n, np.float32), np.zeros((n, 3), np.float32)
    args = (0.12, 0.002, 40.0, 1.0, 0.5, box)
    check(sph_step, x, v, *args, rho, acc, rtol=2e-4, atol=1e-3)
    ref_rho, ref_acc = sph_reference(x, v, h, 0.002, 40.0, 1.0, 0.5)
    np.testing.assert_allclose(rho, ref_rho, rtol=1e-4)
    scale = np.abs(ref_acc).max()
    np.testing.assert_allclose(acc, ref_acc, rtol=1e-3, atol=1e-4 * scale)


# --- Taichi's dem.py: grains of two sizes in a 2-D box ------------------------------------


@kd.kernel
def dem_forces(x: kd.Array[kd.vec2d], v: kd.Array[kd.vec2d], r: kd.Array[kd.f64],
               r_max: kd.f64, stiffness: kd.f64, damping: kd.f64, f: kd.Array[kd.vec2d]):
    grid = kd.NeighborGrid(x, 2.0 * r_max, (0.0, 0.0), (1.0, 1.0))
    for i in kd.prange(x.shape[0]):
        total = kd.vec2d(0.0, -9.8 * r[i] * r[i])        # gravity on a grain's mass
        for j in grid.neighbors(x[i], 2.0 * r_max):
            if j == i:
                continue
            d = x[j] - x[i]
            dist = kd.length(d)
            overlap = r[i] + r[j] - dist
            if overlap > 0.0:
                n = d / dist
                push = -stiffness * overlap * n
                relative = kd.dot(v[j] - v[i], n)
                total += push + damping * relative * n
        f[i] = total


def dem_reference(x, v, r, stiffness, damping):
    d = x[None, :, :] - x[:, None, :]
    dist = np.sqrt((d * d).sum(-1))
    np.fill_diagonal(dist, np.inf)
    overlap = r[:, None] + r[None, :] - dist
    touching = overlap > 0
    n = np.where(touching[..., None], d / np.where(touching, dist, 1.0)[..., None], 0.0)
    relative = ((v[None, :, :] - v[:, None, :]) * n).sum(-1)
    pair = (-stiffness * np.where(touching, overlap, 0.0))[..., None] * n \
        + (damping * relative)[..., None] * n
    gravity = np.stack([np.zeros_like(r), -9.8 * r * r], -1)
    return gravity + pair.sum(1)


def test_taichi_dem_forces_match_brute_force(rng):
    n = 500
    r = np.where(rng.random(n) < 0.5, 0.01, 0.02)
    x = rng.random((n, 2)) * 0.9 + 0.05
    x[:6] = [[0.3, 0.3], [0.33, 0.3], [0.3, 0.34], [0.5, 0.5], [0.5, 0.52], [0.06, 0.06]]
    v = rng.normal(0.0, 0.5, (n, 2))
    f = np.zeros((n, 2))
    check(dem_forces, x, v, r, 0.02, 1e4, 2.0, f, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(f, dem_reference(x, v, r, 1e4, 2.0), rtol=1e-9, atol=1e-9)
    assert (np.abs(f[:5, 0]) > 1.0).any()          # the hand-placed grains do touch

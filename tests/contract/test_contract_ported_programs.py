"""Programs as users of Warp, Taichi and Numba write them, ported line by line: each runs
compiled, as plain Python (``kernel.python``) and on the emulated CUDA device, and is
checked against NumPy where NumPy can say the answer."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def particle_to_grid(pos: kd.Array[kd.vec3], vel: kd.Array[kd.vec3],
                     grid_v: kd.Array[kd.vec3, 3], grid_m: kd.Array[kd.f32, 3], inv_dx: kd.f32):
    """Taichi's MLS-MPM scatter: quadratic B-spline weights, vector atomics."""
    for p in kd.prange(pos.shape[0]):
        base = kd.ivec3(pos[p] * inv_dx - 0.5)
        fx = pos[p] * inv_dx - kd.vec3(base)
        w = (0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2)
        for i, j, k in kd.static(kd.ndrange(3, 3, 3)):
            weight = w[i].x * w[j].y * w[k].z
            offset = kd.ivec3(i, j, k)
            kd.atomic_add(grid_v, base + offset, weight * vel[p])
            grid_m[base + offset] += weight


def test_mpm_scatter_conserves_mass_and_momentum(rng):
    pos = rng.uniform(0.2, 0.8, (200, 3)).astype(np.float32)
    vel = rng.normal(size=(200, 3)).astype(np.float32)
    grid_v = np.zeros((16, 16, 16, 3), np.float32)
    grid_m = np.zeros((16, 16, 16), np.float32)
    check(particle_to_grid, pos, vel, grid_v, grid_m, 16.0, rtol=1e-5, atol=1e-6)
    assert np.isclose(grid_m.sum(), 200, rtol=1e-4)
    assert np.allclose(grid_v.sum(axis=(0, 1, 2)), vel.sum(axis=0), rtol=1e-3, atol=1e-3)


@kd.kernel
def bounce(pos: kd.Array[kd.vec3], vel: kd.Array[kd.vec3], dt: kd.f32, steps: kd.i32):
    """Warp's particle integration with walls, many steps in one call."""
    g = kd.vec3(0.0, -9.8, 0.0)
    for _ in range(steps):
        for i in kd.prange(pos.shape[0]):
            v = vel[i] + g * dt
            x = pos[i] + v * dt
            if x.y < 0.0:
                x.y = -x.y
                v.y = -v.y * 0.9
            for k in range(3):
                if x[k] > 1.0:
                    x[k] = 2.0 - x[k]
                    v[k] = -v[k]
            pos[i] = x
            vel[i] = v


def test_bouncing_particles(rng):
    pos = rng.uniform(0.1, 0.9, (100, 3)).astype(np.float32)
    vel = rng.normal(size=(100, 3)).astype(np.float32)
    check(bounce, pos, vel, 0.01, 50, rtol=1e-4, atol=1e-5)
    assert pos[:, 1].min() >= 0.0 and pos.max() <= 1.0


@kd.kernel
def sph_density(x: kd.Array[kd.vec3], h: kd.f32, box: kd.f32, rho: kd.Array[kd.f32]):
    """An SPH density sum over a neighbour grid built in the kernel."""
    grid = kd.NeighborGrid(x, h, (0.0, 0.0, 0.0), (box, box, box))
    for i in kd.prange(x.shape[0]):
        total = kd.f32(0.0)
        for j in grid.neighbors(x[i], h):
            d = x[j] - x[i]
            q = 1.0 - kd.dot(d, d) / (h * h)
            total += q * q * q
        rho[i] = total


def test_sph_density_matches_all_pairs(rng):
    x = rng.uniform(0, 4, (300, 3)).astype(np.float32)
    rho = np.zeros(300, np.float32)
    check(sph_density, x, 0.7, 4.0, rho, rtol=1e-4, atol=1e-4)
    r2 = ((x[:, None] - x[None]) ** 2).sum(-1)
    expected = np.where(r2 <= 0.49, (1 - r2 / 0.49) ** 3, 0).sum(1)
    assert np.allclose(rho, expected, rtol=1e-4)


@kd.func
def bilerp(q: kd.Array[kd.f32, 2], x: kd.f32, y: kd.f32) -> kd.f32:
    x = kd.clamp(x, 0.0, q.shape[0] - 1.001)
    y = kd.clamp(y, 0.0, q.shape[1] - 1.001)
    i = int(x)
    j = int(y)
    fx = x - i
    fy = y - j
    return (q[i, j] * (1 - fx) * (1 - fy) + q[i + 1, j] * fx * (1 - fy)
            + q[i, j + 1] * (1 - fx) * fy + q[i + 1, j + 1] * fx * fy)


@kd.kernel
def advect_and_project(q: kd.Array[kd.f32, 2], u: kd.Array[kd.f32, 2], v: kd.Array[kd.f32, 2],
                       out: kd.Array[kd.f32, 2], p: kd.Array[kd.f32, 2], dt: kd.f32,
                       iterations: kd.i32):
    """Taichi's stable fluids: semi-Lagrangian advection, then Jacobi iterations on the
    advected field mixing loops and whole-array statements; returns the residual."""
    for i, j in kd.ndrange(q.shape[0], q.shape[1]):
        out[i, j] = bilerp(q, i - dt * u[i, j], j - dt * v[i, j])
    tmp = kd.zeros_like(p)
    for _ in range(iterations):
        for i, j in kd.ndrange((1, p.shape[0] - 1), (1, p.shape[1] - 1)):
            tmp[i, j] = 0.25 * (p[i - 1, j] + p[i + 1, j] + p[i, j - 1] + p[i, j + 1]
                                - out[i, j])
        p[1:-1, 1:-1] = tmp[1:-1, 1:-1]
    residual = 0.0
    for i, j in kd.ndrange((1, p.shape[0] - 1), (1, p.shape[1] - 1)):
        e = 4 * p[i, j] - p[i - 1, j] - p[i + 1, j] - p[i, j - 1] - p[i, j + 1] + out[i, j]
        residual = max(residual, abs(e))
    return residual


def test_stable_fluids_step(rng):
    q = rng.random((20, 24)).astype(np.float32)
    u = rng.normal(size=q.shape).astype(np.float32)
    v = rng.normal(size=q.shape).astype(np.float32)
    out = np.zeros_like(q)
    p = np.zeros_like(q)
    first = check(advect_and_project, q, u, v, out, p, 0.5, 5, rtol=1e-4, atol=1e-5)
    more = advect_and_project(q, u, v, out, p, 0.5, 200)
    assert more < first  # Jacobi converges


@kd.kernel
def monte_carlo_pi(n: kd.i64):
    """Numba's classic: random points in the unit square, a reduction of the hits."""
    inside = 0
    for _ in kd.prange(n):
        a = kd.random()
        b = kd.random()
        if a * a + b * b < 1.0:
            inside += 1
    return 4.0 * inside / n


def test_monte_carlo_pi_is_reproducible_whatever_the_threads():
    kd.seed(7)
    first = monte_carlo_pi(100_000)
    kd.seed(7)
    kd.set_num_threads(1)
    assert monte_carlo_pi(100_000) == first
    kd.seed(7)
    assert monte_carlo_pi.python(100_000) == first
    assert abs(first - np.pi) < 0.03

"""Whole simulations as Warp and Taichi users write them (API.md sections 1-4): a cloth
of springs with pinned particles, a pressure solve on a grid iterated to convergence, and
a particle sort into cells, each run compiled, as plain Python (``kernel.python``) and on
the emulated CUDA device by ``check``."""

from __future__ import annotations

import math

import numpy as np
from kdsl_cpu_util import check, with_threads

import kdsl as kd

GRAVITY = -9.8
DAMPING = 0.5


@kd.func
def spring_force(xa: kd.vec3, xb: kd.vec3, rest: kd.f32, stiffness: kd.f32) -> kd.vec3:
    d = xb - xa
    length = kd.length(d)
    if length == 0.0:
        return kd.vec3(0.0)  # an early return from a func
    return stiffness * (length - rest) * (d / length)


@kd.func
def ground(x: kd.vec3, v: kd.vec3):
    """Two results: a func returning a tuple."""
    if x.y < 0.0:
        x.y = 0.0
        v.y = -DAMPING * v.y
    return x, v


@kd.kernel
def cloth(x: kd.Array[kd.vec3], v: kd.Array[kd.vec3], inv_mass: kd.Array[kd.f32],
          springs: kd.Array[kd.i32, 2], rest: kd.Array[kd.f32], f: kd.Array[kd.vec3],
          stiffness: kd.f32, dt: kd.f32, steps: kd.i32):
    """Warp's cloth example: spring forces scattered with vector atomics (two springs
    share a particle), then a semi-implicit Euler step that skips pinned particles."""
    kinetic = 0.0
    for _ in range(steps):
        for i in kd.prange(len(f)):
            f[i] = kd.vec3(0.0)
        for s in kd.prange(springs.shape[0]):
            a = springs[s, 0]
            b = springs[s, 1]
            force = spring_force(x[a], x[b], rest[s], stiffness)
            f[a] += force
            f[b] -= force
        for i in kd.prange(x.shape[0]):
            w = inv_mass[i]
            if w == 0.0:
                continue
            vi = v[i] + (f[i] * w + kd.vec3(0.0, GRAVITY, 0.0)) * dt
            xi = x[i] + vi * dt
            x[i], v[i] = ground(xi, vi)
    for i in kd.prange(x.shape[0]):
        if inv_mass[i] > 0.0:
            kinetic += 0.5 * kd.dot(v[i], v[i]) / inv_mass[i]
    return kinetic, x[0], steps * springs.shape[0]


def _cloth(n: int) -> tuple:
    xs, zs = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    x = np.stack([xs.ravel() * 0.1, np.full(n * n, 0.5), zs.ravel() * 0.1], 1).astype(np.float32)
    pairs = [(i * n + j, i * n + j + 1) for i in range(n) for j in range(n - 1)]
    pairs += [(i * n + j, (i + 1) * n + j) for i in range(n - 1) for j in range(n)]
    springs = np.array(pairs, np.int32)
    rest = np.linalg.norm(x[springs[:, 0]] - x[springs[:, 1]], axis=1).astype(np.float32)
    inv_mass = np.ones(n * n, np.float32)
    inv_mass[[0, n - 1]] = 0.0  # two pinned corners
    return x, np.zeros_like(x), inv_mass, springs, rest, np.zeros_like(x)


def test_cloth_falls_and_stays_pinned():
    x, v, inv_mass, springs, rest, f = _cloth(6)
    start = x.copy()
    kinetic, first, count = check(cloth, x, v, inv_mass, springs, rest, f, 40.0, 0.01, 30,
                                  rtol=2e-4, atol=2e-5)
    assert count == 30 * len(springs) and count.dtype == np.int32  # i32 times a weak int
    assert np.array_equal(first, start[0]) and np.array_equal(x[5], start[5])  # pinned
    assert kinetic > 0.0 and x[:, 1].min() < start[:, 1].min()  # the rest fell
    assert (x[:, 1] >= 0.0).all()


@kd.kernel
def pressure_solve(p: kd.Array[kd.f64, 2], div: kd.Array[kd.f64, 2],
                   solid: kd.Array[kd.u8, 2], tolerance: kd.f64, max_iterations: kd.i32):
    """Taichi's Jacobi solve: red-black sweeps over the interior (kd.ndrange with
    (start, stop) pairs), a max-reduction of the residual, stopped by a while loop."""
    nx, ny = p.shape[0], p.shape[1]
    iterations = 0
    residual = math.inf
    while residual > tolerance:
        if iterations == max_iterations:
            return iterations, residual, False
        for colour in range(2):
            for i, j in kd.ndrange((1, nx - 1), (1, ny - 1)):
                if (i + j) % 2 != colour or solid[i, j]:
                    continue
                total = 0.0
                count = 0
                for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                    if not solid[i + di, j + dj]:
                        total += p[i + di, j + dj]
                        count += 1
                p[i, j] = (total - div[i, j]) / count if count > 0 else 0.0
        residual = 0.0
        for i, j in kd.ndrange((1, nx - 1), (1, ny - 1)):
            if solid[i, j] == 0:
                s = 0.0
                count = 0
                for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                    if solid[i + di, j + dj] == 0:
                        s += p[i + di, j + dj] - p[i, j]
                        count += 1
                residual = max(residual, abs(s - div[i, j]))
        iterations += 1
    return iterations, residual, True


def test_pressure_solve_converges_as_python_does(rng):
    n = 8
    solid = np.zeros((n, n), np.uint8)
    solid[0, :] = solid[-1, :] = solid[:, 0] = solid[:, -1] = 1
    solid[3:5, 2:6] = 1
    div = rng.normal(size=(n, n))
    div[solid == 1] = 0.0
    div -= div[solid == 0].mean() * (solid == 0)  # solvable
    iterations, residual, converged = check(pressure_solve, np.zeros((n, n)), div, solid, 1e-4,
                                            2000, rtol=1e-9, atol=1e-9)
    assert converged and residual <= 1e-4 and 10 < iterations < 2000
    stopped = check(pressure_solve, np.zeros((n, n)), div, solid, 1e-4, 7, rtol=1e-9, atol=1e-9)
    assert stopped[0] == 7 and not stopped[2]


@kd.kernel
def bin_particles(pos: kd.Array[kd.vec2], cell_size: kd.f32, counts: kd.Array[kd.i32, 2],
                  slots: kd.Array[kd.i32], cells: kd.Array[kd.ivec2]):
    """Counting particles per cell: the slot each takes is the old count atomic_add
    returns (a tuple index), and particles outside the grid are skipped."""
    for p in kd.prange(pos.shape[0]):
        c = kd.ivec2(kd.floor(pos[p] / cell_size))
        cells[p] = c
        if c.x < 0 or c.y < 0 or c.x >= counts.shape[0] or c.y >= counts.shape[1]:
            slots[p] = -1
            continue
        slots[p] = kd.atomic_add(counts, (c.x, c.y), 1)


def test_atomic_slots_number_each_cell_densely(rng):
    pos = rng.uniform(-0.1, 1.0, (3000, 2)).astype(np.float32)
    for threads in (1, 3):
        counts = np.zeros((4, 4), np.int32)
        slots = np.zeros(3000, np.int32)
        cells = np.zeros((3000, 2), np.int32)
        with_threads(threads, bin_particles, pos, 0.25, counts, slots, cells)
        expected = np.floor(pos / np.float32(0.25)).astype(np.int32)
        assert np.array_equal(cells, expected)
        inside = ((expected >= 0) & (expected < 4)).all(axis=1)
        assert (slots[~inside] == -1).all()
        for cx, cy in np.ndindex(4, 4):
            here = inside & (cells[:, 0] == cx) & (cells[:, 1] == cy)
            assert sorted(slots[here]) == list(range(counts[cx, cy]))
        assert counts.sum() == inside.sum()

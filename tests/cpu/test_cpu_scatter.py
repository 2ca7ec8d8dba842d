"""Scatter privatisation: arrays a parallel loop only updates with += / -= get private
per-thread copies (when small next to the iteration count), added in after the loop. The
results must equal the serial ones for every layout, element type and thread count."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def scatter_2d(px: kd.Array[kd.f64], py: kd.Array[kd.f64], w: kd.Array[kd.f64], grid):
    nx = grid.shape[0]
    ny = grid.shape[1]
    for p in kd.prange(px.shape[0]):
        grid[int(px[p] * nx), int(py[p] * ny)] += w[p]
        grid[0, 0] -= 0.5 * w[p]


@kd.kernel
def scatter_vectors(idx: kd.Array[kd.i64], v: kd.Array[kd.vec3], out: kd.Array[kd.vec3]):
    for p in kd.prange(idx.shape[0]):
        out[idx[p]] += v[p]


@kd.kernel
def counts_and_old_values(idx: kd.Array[kd.i64], h: kd.Array[kd.i64], seen: kd.Array[kd.i64]):
    for p in kd.prange(idx.shape[0]):
        h[idx[p]] += 1  # a scatter target
        seen[p] = kd.atomic_add(h, idx[p] + 0, 0)  # its old value is used: not private


def _reference_2d(px, py, w, shape):
    ref = np.zeros(shape)
    np.add.at(ref, ((px * shape[0]).astype(int), (py * shape[1]).astype(int)), w)
    ref[0, 0] -= 0.5 * w.sum()
    return ref


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
def test_scatter_into_a_small_grid(threads, layout, rng):
    kd.set_num_threads(threads)
    n = 20000
    px, py, w = rng.random(n), rng.random(n), rng.uniform(0.5, 1.5, n)
    base = np.zeros((16, 24)) if layout != "transposed" else np.zeros((24, 16))
    grid = {"contiguous": base, "strided": np.zeros((32, 24))[::2], "transposed": base.T}[layout]
    scatter_2d(px, py, w, grid)
    np.testing.assert_allclose(grid, _reference_2d(px, py, w, grid.shape), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("threads", [1, 2])
def test_scatter_into_a_grid_too_big_to_copy(threads, rng):
    kd.set_num_threads(threads)
    n = 1000  # fewer iterations than grid cells: stays atomic
    px, py, w = rng.random(n), rng.random(n), rng.uniform(0.5, 1.5, n)
    grid = np.zeros((64, 64))
    scatter_2d(px, py, w, grid)
    np.testing.assert_allclose(grid, _reference_2d(px, py, w, grid.shape), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("threads", [1, 2])
def test_scatter_of_vectors(threads, rng):
    kd.set_num_threads(threads)
    idx = rng.integers(0, 7, 5000)
    v = rng.uniform(-1, 1, (5000, 3)).astype(np.float32)
    out = np.zeros((7, 3), np.float32)
    scatter_vectors(idx, v, out)
    ref = np.zeros((7, 3))
    np.add.at(ref, idx, v.astype(np.float64))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("threads", [1, 2])
def test_used_old_values_stay_atomic(threads, rng):
    kd.set_num_threads(threads)
    idx = rng.integers(0, 5, 4000)
    h = np.zeros(5, np.int64)
    seen = np.full(4000, -1, np.int64)
    counts_and_old_values(idx, h, seen)
    np.testing.assert_array_equal(h, np.bincount(idx, minlength=5))
    assert seen.min() >= 0 and (seen <= h[idx]).all()

"""kd.NeighborGrid: every particle within the radius visited exactly once, against
brute-force pair lists; open and periodic boundaries, 2-D and 3-D."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


def _brute_force(x: np.ndarray, radius: float, box: np.ndarray | None) -> np.ndarray:
    """near[i, j]: j within radius of i (nearest image in a periodic box)."""
    d = x[:, None, :] - x[None, :, :]
    if box is not None:
        d = d - box * np.floor(d / box + x.dtype.type(0.5))
    return (d * d).sum(-1) <= x.dtype.type(radius) ** 2


@kd.kernel
def pairs_3d(x: kd.Array[kd.vec3], cell: kd.f32, radius: kd.f32, lower: kd.vec3, upper: kd.vec3,
             counts: kd.Array[kd.i64], index_sums: kd.Array[kd.i64],
             square_sums: kd.Array[kd.i64]):
    grid = kd.NeighborGrid(x, cell, lower, upper, periodic=True)
    for i in kd.prange(x.shape[0]):
        c = 0
        for j in grid.neighbors(x[i], radius):
            c += 1
            index_sums[i] += j
            square_sums[i] += j * j
        counts[i] = c


@kd.kernel
def pairs_2d_open(x: kd.Array[kd.vec2d], cell: kd.f64, radius: kd.f64,
                  counts: kd.Array[kd.i64], index_sums: kd.Array[kd.i64],
                  square_sums: kd.Array[kd.i64]):
    grid = kd.NeighborGrid(x, cell, (-1.0, 0.0), (3.0, 2.0))
    for i in kd.prange(x.shape[0]):
        for j in grid.neighbors(x[i], radius):
            if j == i:
                continue
            counts[i] += 1
            index_sums[i] += j
            square_sums[i] += j * j


def _check_visits(near: np.ndarray, counts, index_sums, square_sums, skip_self: bool = False):
    """Counts and the sums of j and j*j pin down each visited set with multiplicity
    (for sets this small), so a particle visited twice or missed shows."""
    if skip_self:
        near = near & ~np.eye(len(near), dtype=bool)
    j = np.arange(len(near))
    np.testing.assert_array_equal(counts, near.sum(1))
    np.testing.assert_array_equal(index_sums, (near * j).sum(1))
    np.testing.assert_array_equal(square_sums, (near * j * j).sum(1))


@pytest.mark.parametrize("box, cell, radius", [
    (10.0, 1.0, 1.0),    # radius one cell
    (10.0, 0.5, 1.2),    # reaching three cells out
    (3.0, 1.0, 1.4),     # fewer cells than the reach covers: each cell once
    (10.0, 4.0, 1.0),    # cells wider than the radius (two cells along each axis)
])
def test_periodic_3d_visits_each_neighbour_once(rng, box, cell, radius):
    n = 700
    x = (rng.random((n, 3)) * box).astype(np.float32)
    x[:5] = [box - 1e-3, 0.0, box * 0.5]  # on the boundary, and repeated positions
    outs = [np.zeros(n, np.int64) for _ in range(3)]
    check(pairs_3d, x, cell, radius, np.zeros(3, np.float32), np.full(3, box, np.float32), *outs)
    _check_visits(_brute_force(x, radius, np.float32(box)), *outs)


def test_periodic_wraps_positions_outside_the_box(rng):
    n, box = 300, 6.0
    x = (rng.random((n, 3)) * box).astype(np.float32)
    shifted = x.copy()
    shifted[::3] += box  # the same particles, one box over
    shifted[1::3] -= 2 * box
    outs = [np.zeros(n, np.int64) for _ in range(3)]
    pairs_3d(shifted, 1.0, 1.1, np.zeros(3, np.float32), np.full(3, box, np.float32), *outs)
    _check_visits(_brute_force(x, 1.1, np.float32(box)), *outs)


def test_open_2d_finds_particles_outside_the_domain(rng):
    n = 600
    x = rng.random((n, 2)) * [4.0, 2.0] + [-1.0, 0.0]
    x[:40] += rng.normal(0.0, 1.0, (40, 2))  # some outside the domain
    outs = [np.zeros(n, np.int64) for _ in range(3)]
    check(pairs_2d_open, x, 0.25, 0.3, *outs)
    _check_visits(_brute_force(x, 0.3, None), *outs, skip_self=True)


@kd.kernel
def pairs_2d_periodic(x: kd.Array[kd.vec2d], cell: kd.f64, radius: kd.f64,
                      counts: kd.Array[kd.i64], index_sums: kd.Array[kd.i64],
                      square_sums: kd.Array[kd.i64]):
    grid = kd.NeighborGrid(x, cell, (0.0, 0.0), (5.0, 3.0), periodic=True)
    for i in kd.prange(x.shape[0]):
        for j in grid.neighbors(x[i], radius):
            counts[i] += 1
            index_sums[i] += j
            square_sums[i] += j * j


@pytest.mark.parametrize("cell, radius", [(0.5, 0.5), (0.25, 0.6), (1.0, 1.6)])
def test_periodic_2d_rows_that_wrap(rng, cell, radius):
    """Rows of cells running past either end of the last axis (and, at the largest
    radius, the whole of it) are searched in two runs of sorted particles."""
    n = 500
    x = rng.random((n, 2)) * [5.0, 3.0]
    x[:6] = [[0.01, 2.99], [4.99, 0.01], [2.5, 0.0], [0.0, 1.5], [4.999, 2.999], [2.5, 1.5]]
    outs = [np.zeros(n, np.int64) for _ in range(3)]
    check(pairs_2d_periodic, x, cell, radius, *outs)
    _check_visits(_brute_force(x, radius, np.array([5.0, 3.0])), *outs)


def test_periodic_3d_box_of_unequal_sides(rng):
    n, box = 600, np.array([6.0, 4.0, 3.0], np.float32)
    x = (rng.random((n, 3)) * box).astype(np.float32)
    outs = [np.zeros(n, np.int64) for _ in range(3)]
    check(pairs_3d, x, 0.5, 0.8, np.zeros(3, np.float32), box, *outs)
    _check_visits(_brute_force(x, 0.8, box), *outs)


@kd.kernel
def neighbour_offsets(x: kd.Array[kd.vec3], radius: kd.f32, box: kd.f32,
                      sums: kd.Array[kd.vec3]):
    """Reads the neighbours' positions, which the grid's copy in cell order gives."""
    grid = kd.NeighborGrid(x, radius, (0.0, 0.0, 0.0), (box, box, box), periodic=True)
    for i in kd.prange(x.shape[0]):
        total = kd.vec3(0.0, 0.0, 0.0)
        for j in grid.neighbors(x[i], radius):
            d = x[j] - x[i]
            total += d - box * kd.floor(d / box + 0.5) + 0.25 * kd.vec3(x[j].y, x[j].z, x[j].x)
        sums[i] = total


@kd.kernel
def moved_after_build(x: kd.Array[kd.vec3], radius: kd.f32, box: kd.f32,
                      sums: kd.Array[kd.vec3]):
    """Moves the particles after building the grid: the query reads where they are now."""
    grid = kd.NeighborGrid(x, radius, (0.0, 0.0, 0.0), (box, box, box), periodic=True)
    for i in kd.prange(x.shape[0]):
        x[i] = x[i] * 0.5
    for i in kd.prange(x.shape[0]):
        total = kd.vec3(0.0, 0.0, 0.0)
        for j in grid.neighbors(x[i] * 2.0, radius):
            total += x[j]
        sums[i] = total


def _periodic_sums(x: np.ndarray, radius: float, box: float, read: np.ndarray) -> np.ndarray:
    near = _brute_force(x, radius, np.float32(box))
    d = x[None, :, :] - x[:, None, :]
    d = d - box * np.floor(d / box + np.float32(0.5))
    return np.einsum("ij,ijk->ik", near.astype(np.float64), d + 0.25 * read[None, :, [1, 2, 0]])


def test_body_reads_neighbour_positions(rng):
    n, box = 800, 4.0
    x = (rng.random((n, 3)) * box).astype(np.float32)
    sums = np.zeros((n, 3), np.float32)
    check(neighbour_offsets, x, 0.7, box, sums, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sums, _periodic_sums(x, 0.7, box, x), rtol=1e-4, atol=1e-3)


def test_positions_changed_after_the_build_are_read_as_they_are(rng):
    n, box = 600, 4.0
    x = (rng.random((n, 3)) * box).astype(np.float32)
    near = _brute_force(x, 0.6, np.float32(box))
    sums = np.zeros((n, 3), np.float32)
    moved = x.copy()
    check(moved_after_build, moved, 0.6, box, sums, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sums, near.astype(np.float64) @ (x * 0.5), rtol=1e-5, atol=1e-4)


def test_no_particles():
    outs = [np.zeros(0, np.int64) for _ in range(3)]
    pairs_3d(np.zeros((0, 3), np.float32), 1.0, 1.0, np.zeros(3, np.float32),
             np.ones(3, np.float32), *outs)


def test_grid_in_plain_python_matches_brute_force(rng):
    x = rng.random((200, 3)) * 5.0
    grid = kd.NeighborGrid(x, 0.7, (0, 0, 0), (5, 5, 5), periodic=True)
    near = _brute_force(x, 0.9, np.float64(5.0))
    for i in range(0, 200, 17):
        found = list(grid.neighbors(x[i], 0.9))
        assert sorted(found) == list(np.flatnonzero(near[i]))


def test_bad_grids_are_errors():
    with pytest.raises(ValueError, match="cell_size"):
        kd.NeighborGrid(np.zeros((3, 3)), 0.0, (0, 0, 0), (1, 1, 1))
    with pytest.raises(kd.CompileError, match="float vectors"):
        @kd.kernel
        def bad(x: kd.Array[kd.f32]):
            kd.NeighborGrid(x, 1.0, (0.0, 0.0), (1.0, 1.0))

        bad(np.zeros(3, np.float32))
    with pytest.raises(kd.CompileError, match="break"):
        @kd.kernel
        def stops(x: kd.Array[kd.vec2]):
            grid = kd.NeighborGrid(x, 1.0, (0.0, 0.0), (1.0, 1.0))
            for i in kd.prange(x.shape[0]):
                for _j in grid.neighbors(x[i], 0.5):
                    break

        stops(np.zeros((3, 2), np.float32))

"""kd.NeighborGrid against brute force where rounding cannot excuse a difference:
particles on a lattice of exactly representable coordinates, so pairs at exactly the
radius (distance == radius) must be visited, on cells of the lattice's spacing or not,
domains whose upper bound is a cell edge or not, open and periodic; radii longer than the
domain visit everyone; bad grids are ValueErrors, as in plain Python. Each kernel runs
compiled, as plain Python and on the CUDA device (emulated)."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def visits_open(x: kd.Array[kd.vec3], cell: kd.f32, radius: kd.f32, lower: kd.vec3,
                upper: kd.vec3, seen: kd.Array[kd.i32, 2]):
    grid = kd.NeighborGrid(x, cell, lower, upper)
    for i in kd.prange(x.shape[0]):
        for j in grid.neighbors(x[i], radius):
            seen[i, j] += 1


@kd.kernel
def visits_periodic(x: kd.Array[kd.vec3], cell: kd.f32, radius: kd.f32, lower: kd.vec3,
                    upper: kd.vec3, seen: kd.Array[kd.i32, 2]):
    grid = kd.NeighborGrid(x, cell, lower, upper, periodic=True)
    for i in kd.prange(x.shape[0]):
        for j in grid.neighbors(x[i], radius):
            seen[i, j] += 1


@kd.kernel
def visits_2d(x: kd.Array[kd.vec2d], cell: kd.f64, radius: kd.f64, seen: kd.Array[kd.i32, 2]):
    grid = kd.NeighborGrid(x, cell, (-1.0, 0.5), (2.0, 2.5))
    for i in kd.prange(x.shape[0]):
        for j in grid.neighbors(x[i], radius):
            seen[i, j] += 1


def _lattice(m: int, spacing: float, origin: float, dim: int = 3) -> np.ndarray:
    axes = np.meshgrid(*[np.arange(m)] * dim, indexing="ij")
    return np.stack(axes, -1).reshape(-1, dim) * spacing + origin


def _within(x: np.ndarray, radius: float, box: float | None) -> np.ndarray:
    """Exact (float64) distances of coordinates that are small multiples of powers of 2."""
    d = x[:, None, :].astype(np.float64) - x[None, :, :]
    if box is not None:
        d -= box * np.round(d / box)
    return (d * d).sum(-1) <= radius * radius


@pytest.mark.parametrize("spacing, cell, radius, extra", [
    (0.25, 0.25, 0.25, 0.0),     # cell == radius == spacing: neighbours on cell edges
    (0.25, 0.5, 0.5, 0.125),     # two spacings, domain not a whole number of cells
    (0.5, 0.375, 1.0, 0.0),      # cells narrower than the radius
    (1.0, 3.0, 2.0, 0.5),        # cells wider than the radius
])
@pytest.mark.parametrize("periodic", [False, True])
def test_pairs_at_exactly_the_radius_are_visited_once(spacing, cell, radius, extra, periodic):
    m, origin = 6, -1.0
    x = _lattice(m, spacing, origin).astype(np.float32)
    lower = np.full(3, origin, np.float32)
    upper = np.full(3, origin + m * spacing + extra, np.float32)
    seen = np.zeros((len(x), len(x)), np.int32)
    kernel = visits_periodic if periodic else visits_open
    check(kernel, x, cell, radius, lower, upper, seen)
    expected = _within(x, radius, m * spacing + extra if periodic else None)
    np.testing.assert_array_equal(seen, expected.astype(np.int32))


def test_f64_2d_lattice_at_the_radius_with_particles_outside_the_domain():
    x = _lattice(7, 0.5, -1.5, dim=2)             # some rows below and above the domain
    seen = np.zeros((len(x), len(x)), np.int32)
    check(visits_2d, x, 0.5, 1.0, seen)
    np.testing.assert_array_equal(seen, _within(x, 1.0, None).astype(np.int32))


@pytest.mark.parametrize("radius", [1e30, np.inf])
@pytest.mark.parametrize("periodic", [False, True])
def test_a_radius_longer_than_the_domain_visits_everyone_once(radius, periodic):
    x = (np.random.default_rng(3).random((40, 3)) * 2.0).astype(np.float32)
    seen = np.zeros((40, 40), np.int32)
    kernel = visits_periodic if periodic else visits_open
    check(kernel, x, 0.5, radius, np.zeros(3, np.float32), np.full(3, 2.0, np.float32), seen)
    assert (seen == 1).all()


@pytest.mark.parametrize("radius", [-1e30, -1.0, np.nan])
def test_a_negative_or_nan_radius_visits_no_one(radius):
    x = (np.random.default_rng(4).random((30, 3)) * 2.0).astype(np.float32)
    seen = np.zeros((30, 30), np.int32)
    check(visits_periodic, x, 0.5, radius, np.zeros(3, np.float32), np.full(3, 2.0, np.float32),
          seen)
    assert not seen.any()


@pytest.mark.parametrize("cell, lower, upper, message", [
    (0.0, 0.0, 1.0, "cell_size must be positive"),
    (-0.5, 0.0, 1.0, "cell_size must be positive"),
    (np.nan, 0.0, 1.0, "cell_size must be positive"),
    (0.1, 1.0, 0.0, "upper must exceed lower"),
    (1e-7, 0.0, 1.0, "too many cells"),
])
def test_bad_grids_are_value_errors(cell, lower, upper, message):
    x = np.random.default_rng(5).random((10, 3)).astype(np.float32)
    seen = np.zeros((10, 10), np.int32)
    bounds = np.full(3, lower, np.float32), np.full(3, upper, np.float32)
    with pytest.raises(ValueError, match=message):
        visits_open(x, cell, 0.3, *bounds, seen)
    with pytest.raises(ValueError, match="cell_size|upper|too many cells"):
        kd.NeighborGrid(x, cell, *bounds)

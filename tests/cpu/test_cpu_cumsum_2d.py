"""kd.cumsum of 2-D arrays inside kernels (along either axis, or over the flattened
array, exclusive too), compiled, as plain Python and on the CUDA device (emulated where
there is no GPU), against np.cumsum; and of empty arrays from Python."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def scans_2d(a):
    return (kd.cumsum(a), kd.cumsum(a, axis=0), kd.cumsum(a, 1),
            kd.cumsum(a, axis=-1, exclusive=True), kd.cumsum(a, axis=-2, exclusive=True),
            kd.cumsum(a, exclusive=True))


def _exclusive(a: np.ndarray, axis: int | None) -> np.ndarray:
    total = np.cumsum(a, axis=axis)
    return total - (a.ravel() if axis is None else a)


@pytest.mark.parametrize(("shape", "dtype"), [((0, 7), np.int32), ((70, 130), np.int32)])
def test_cumsum_of_2d_arrays_in_a_kernel(rng, shape, dtype):
    a = (rng.integers(-50, 50, shape) + 0.25 * (dtype == np.float64)).astype(dtype)
    flat, down, across, across_before, down_before, flat_before = check(scans_2d, a)
    for got, expected in ((flat, np.cumsum(a)), (down, np.cumsum(a, axis=0)),
                          (across, np.cumsum(a, axis=1)),
                          (across_before, _exclusive(a, 1)), (down_before, _exclusive(a, 0)),
                          (flat_before, _exclusive(a, None))):
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_cumsum_of_a_column_view_in_a_kernel(rng):
    a = rng.integers(-9, 9, (40, 6)).astype(np.int32)
    flat, down, *_ = check(scans_2d, a[:, ::2])
    np.testing.assert_array_equal(flat, np.cumsum(a[:, ::2]))
    np.testing.assert_array_equal(down, np.cumsum(a[:, ::2], axis=0))


def test_cumsum_from_python_of_empty_arrays_along_an_axis():
    for shape in ((0, 3), (3, 0), (0, 0), (2, 0, 4)):
        a = np.zeros(shape, np.int32)
        for axis in range(len(shape)):
            got, expected = kd.cumsum(a, axis=axis), np.cumsum(a, axis=axis)
            assert got.shape == expected.shape and got.dtype == expected.dtype

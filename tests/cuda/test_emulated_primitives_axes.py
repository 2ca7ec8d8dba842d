"""The primitives called from Python on CUDA arrays of several axes, on the emulated
device, against NumPy: cumsum along any axis, sort and argsort along the last one."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_cumsum_along_an_axis(emulated_device, axis):
    a = np.random.default_rng(axis + 5).integers(-9, 9, (5, 6, 7)).astype(np.int32)
    d = kd.array(a, device="cuda")
    inclusive = kd.cumsum(d, axis=axis).numpy()
    assert inclusive.dtype == np.cumsum(a, axis=axis).dtype
    np.testing.assert_array_equal(inclusive, np.cumsum(a, axis=axis))
    np.testing.assert_array_equal(kd.cumsum(d, axis=axis, exclusive=True).numpy(),
                                  np.cumsum(a, axis=axis) - a)


def test_cumsum_axis_out_of_range(emulated_device):
    d = kd.array(np.ones((2, 3), np.float32), device="cuda")
    with pytest.raises(np.exceptions.AxisError):
        kd.cumsum(d, axis=2)
    with pytest.raises(np.exceptions.AxisError):
        kd.cumsum(kd.array(np.ones(3), device="cuda"), axis=1)


@pytest.mark.parametrize("shape", [(4, 5, 7), (3, 100), (2, 0), (0, 5)])  # short rows, long
def test_sort_and_argsort_along_the_last_axis(emulated_device, shape):
    rng = np.random.default_rng(sum(shape))
    a = (rng.standard_normal(shape) * 10).round().astype(np.float32)  # ties: stable order
    if a.size:
        a.flat[::5] = np.nan
    d = kd.array(a, device="cuda")
    np.testing.assert_array_equal(kd.argsort(d).numpy(), np.argsort(a, axis=-1, kind="stable"))
    out = kd.array(np.zeros(shape, np.int64), device="cuda")
    assert kd.argsort(d, out=out) is out
    np.testing.assert_array_equal(out.numpy(), np.argsort(a, axis=-1, kind="stable"))
    kd.sort(d)
    np.testing.assert_array_equal(d.numpy(), np.sort(a, axis=-1))


def test_argsort_out_of_the_wrong_shape(emulated_device):
    d = kd.array(np.ones((2, 3), np.float32), device="cuda")
    with pytest.raises(ValueError, match="out must be an int64 array"):
        kd.argsort(d, out=kd.array(np.zeros((3, 2), np.int64), device="cuda"))


def test_sort_by_key_moves_rows_of_values(emulated_device):
    rng = np.random.default_rng(12)
    keys = rng.integers(0, 20, 300).astype(np.int32)  # many ties: the order must be stable
    values = rng.standard_normal((300, 3, 2))
    d_keys, d_values = kd.array(keys, device="cuda"), kd.array(values, device="cuda")
    kd.sort_by_key(d_keys, d_values)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(d_keys.numpy(), keys[order])
    np.testing.assert_array_equal(d_values.numpy(), values[order])
    with pytest.raises(ValueError, match="values need 300 rows"):
        kd.sort_by_key(d_keys, kd.array(np.zeros((5, 2)), device="cuda"))

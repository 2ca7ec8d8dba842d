"""kd.searchsorted in kernels compares as np.searchsorted does, in the common type of the
array and the value (a Python float searched in an int array is not truncated, a float64
value in a float32 array is not rounded); argsort(out=) and sort_by_key of arrays of
different lengths are a ValueError naming the call, never a write past the shorter one.
Each kernel runs compiled, as plain Python and on the CUDA device (emulated)."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def search_literals(a, out):
    out[0] = kd.searchsorted(a, 2.5)
    out[1] = kd.searchsorted(a, 2.5, side="right")
    out[2] = kd.searchsorted(a, -3.75)
    out[3] = kd.searchsorted(a, 300)
    out[4] = kd.searchsorted(a, -1, side="right")
    out[5] = kd.searchsorted(a, 0.1, side="right")


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64, np.float32])
def test_python_numbers_compare_as_numpy(dtype):
    a = np.array([0, 1, 2, 2, 3, 7, 9], dtype)
    if dtype == np.float32:
        a[1] = np.float32(0.1)
    out = np.zeros(6, np.int64)
    check(search_literals, a, out)
    expected = [np.searchsorted(a, 2.5), np.searchsorted(a, 2.5, side="right"),
                np.searchsorted(a, -3.75), np.searchsorted(a, 300),
                np.searchsorted(a, -1, side="right"), np.searchsorted(a, 0.1, side="right")]
    np.testing.assert_array_equal(out, expected)


@kd.kernel
def search_each(a, v, out):
    for i in kd.prange(v.shape[0]):
        out[i] = kd.searchsorted(a, v[i], side="right")


@kd.kernel
def search_all(a, v):
    return kd.searchsorted(a, v)


@pytest.mark.parametrize("a_dtype, v_dtype", [
    (np.int32, np.float64), (np.int32, np.float32), (np.uint32, np.int32),
    (np.int32, np.int64), (np.float32, np.float64), (np.float64, np.int32),
])
def test_values_of_another_type_compare_in_the_common_type(rng, a_dtype, v_dtype):
    a = np.sort(rng.integers(-40, 40, 200).astype(a_dtype))
    v = (rng.normal(size=60) * 30).astype(v_dtype)
    if np.dtype(v_dtype).kind == "f":
        v[:4] = [np.nan, np.inf, -np.inf, 0.5]
        if np.dtype(a_dtype).kind == "f":
            v[4:8] = a[:4].astype(v_dtype) + v_dtype(1e-9)      # between two float32s
    else:
        v[:3] = [np.iinfo(v_dtype).max, np.iinfo(v_dtype).min, 2**20 if v_dtype == np.int64 else 7]
    out = np.zeros(len(v), np.int64)
    check(search_each, a, v, out)
    np.testing.assert_array_equal(out, np.searchsorted(a, v, side="right"))
    np.testing.assert_array_equal(check(search_all, a, v), np.searchsorted(a, v))


@kd.kernel
def argsort_into(keys: kd.Array[kd.f64], out: kd.Array[kd.i64]):
    kd.argsort(keys, out=out)


@kd.kernel
def sort_pairs(keys: kd.Array[kd.f64], values: kd.Array[kd.f32]):
    kd.sort_by_key(keys, values)


def test_arrays_of_different_lengths_are_a_value_error():
    keys = np.array([3.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=r"argsort\(keys, out=\).*sizes 3 and 2"):
        argsort_into(keys, np.zeros(2, np.int64))
    with pytest.raises(ValueError, match=r"sort_by_key\(keys, values\).*sizes 3 and 4"):
        sort_pairs(keys, np.zeros(4, np.float32))
    out = np.zeros(3, np.int64)
    argsort_into(keys, out)
    values = np.array([30.0, 10.0, 20.0], np.float32)
    sort_pairs(keys, values)
    assert out.tolist() == [1, 2, 0] and values.tolist() == [10.0, 20.0, 30.0]

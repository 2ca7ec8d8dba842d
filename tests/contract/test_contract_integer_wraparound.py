"""Integer arithmetic past the type's range (API.md section 3; docs/language.md): it
wraps around in the type as NumPy's fixed-width integers do, division and remainder by
zero give 0, and shifts by the width or more give what NumPy gives. Compared with NumPy's
own arithmetic on the same values, in every integer type."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def arithmetic(a, b, out):
    for i in kd.prange(a.shape[0]):
        out[i, 0] = a[i] + b[i]
        out[i, 1] = a[i] - b[i]
        out[i, 2] = a[i] * b[i]
        out[i, 3] = -a[i]
        out[i, 4] = abs(a[i])
        out[i, 5] = a[i] // b[i]
        out[i, 6] = a[i] % b[i]
        out[i, 7] = a[i] << b[i]
        out[i, 8] = a[i] >> b[i]


def _numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.stack([a + b, a - b, a * b, -a, np.abs(a), a // b, a % b, a << b, a >> b], 1)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])
def test_arithmetic_wraps_around_as_numpy(dtype, rng):
    info = np.iinfo(dtype)
    edges = [info.min, info.max, info.min + 1, 0, 1, 2, -1 if info.min < 0 else 3]
    a = np.array(edges * len(edges), dtype)
    b = np.array([e for e in edges for _ in edges], dtype)
    a = np.concatenate([a, rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)])
    b = np.concatenate([b, rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)])
    shifts = np.array([0, 1, info.bits - 1, info.bits, info.bits + 3], dtype)
    b[-len(shifts):] = shifts
    out = np.zeros((a.shape[0], 9), dtype)
    check(arithmetic, a, b, out)
    np.testing.assert_array_equal(out, _numpy(a, b))


@kd.kernel
def hash_in_int32(a: kd.Array[kd.i32]) -> kd.i32:
    h = kd.i32(17)
    for i in range(a.shape[0]):
        h = h * 31 + a[i]
    return h


@kd.kernel
def factorial(n: kd.i64) -> kd.i64:
    r = 1
    for i in range(2, n + 1):
        r *= i
    return r


def test_a_hash_wraps_in_its_type(rng):
    a = rng.integers(-2**31, 2**31, 100, dtype=np.int32)
    expected = np.int32(17)
    with np.errstate(over="ignore"):
        for x in a:
            expected = expected * np.int32(31) + x
    assert check(hash_in_int32, a) == expected


def test_python_ints_wrap_at_64_bits_where_plain_python_grows_them():
    assert factorial(20) == 2432902008176640000
    expected = 1
    for i in range(2, 26):
        expected = (expected * i) % 2**64
    assert factorial(25) == expected - 2**64 * (expected >= 2**63)
    assert factorial.python(25) == 15511210043330985984000000

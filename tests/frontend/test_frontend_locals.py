"""A local's type is inferred from all its assignments (API section 3): ``s = 0.0`` then
``s += x[j]`` with ``x`` an f32 array makes ``s`` an f32, wherever the update is."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd

X = np.array([0.1, 1.1, 2.1, 3.1], dtype=np.float32)


@kd.kernel
def plain_sum(x: kd.Array[kd.f32]):
    s = 0.0
    for j in range(x.shape[0]):
        s += x[j]
    return s


@kd.kernel
def int_start_sum(x: kd.Array[kd.f32]):
    s = 0
    for j in range(x.shape[0]):
        s += x[j]
    return s


@kd.kernel
def guarded_sum(x: kd.Array[kd.f32]):
    s = 0.0
    for j in range(x.shape[0]):
        if j != 1:
            s += x[j]
    return s


@pytest.mark.parametrize("kernel", [plain_sum, int_start_sum])
def test_accumulator_takes_the_array_type(kernel):
    result = kernel(X)
    expected = kernel.python(X)
    assert type(expected) is np.float32
    assert type(result) is np.float32
    assert result == expected
    assert "-> f32" in kernel.ir(X, stage="frontend").splitlines()[0]


def test_accumulator_updated_under_if_takes_the_array_type():
    expected = guarded_sum.python(X)
    assert type(expected) is np.float32
    result = guarded_sum(X)
    assert type(result) is np.float32
    assert result == expected
    header = guarded_sum.ir(X, stage="frontend").splitlines()[0]
    assert header.endswith("-> f32 {")


def test_accumulator_updated_under_if_has_the_right_value():
    assert np.float32(guarded_sum(X)) == guarded_sum.python(X)


# --- Python int literals -------------------------------------------------------------------


@kd.kernel
def big_powers(a: kd.Array[kd.f64]):
    a[0] = 2**70
    a[1] = 3**41


def test_int_literal_arithmetic_does_not_wrap_silently():
    a = np.full(2, 5.0)
    expected = a.copy()
    big_powers.python(expected)
    assert expected.tolist() == [2.0**70, float(3**41)]
    try:
        big_powers(a)
    except kd.CompileError as error:  # refusing the overflow is correct too
        assert "overflow" in error.message or "64 bits" in error.message
        return
    np.testing.assert_array_equal(a, expected)


@kd.kernel
def small_powers(a: kd.Array[kd.f64]):
    a[0] = 2**40
    a[1] = 3**5 - 7 // 2


def test_int_literal_arithmetic_in_range():
    a = np.full(2, 5.0)
    small_powers(a)
    np.testing.assert_array_equal(a, [2.0**40, 243.0 - 3.0])

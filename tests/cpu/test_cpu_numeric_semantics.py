"""Numeric semantics where NumPy 2 and Python have the final word: unsigned integers
against negative Python ints, NaN in kd.min/kd.max (np.minimum) and np.fmin, integer
powers with a negative exponent, the sign of a zero float remainder, bools in integer
arithmetic, Python ints out of an integer type's range, kd.floor of integers, and
Python's min/max of a Python float argument and a float32."""

import math

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kdsl_cpu_util import check, fuzz_settings, kernel_from_source

import kdsl as kd

# --- unsigned against negative Python ints ------------------------------------------


@kd.kernel
def unsigned_against_python_ints(x, n):
    return (x[0] > -1, x[0] < -3, x[0] == 261, x[0] >= n, x[0] != n, -1 < x[0],
            x[1] > 256, x[1] <= -1)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.int32])
@pytest.mark.parametrize("n", [-1, 5, 2**40, -(2**40)])
def test_unsigned_compares_with_python_ints_exactly(dtype, n):
    x = np.array([5, 255], dtype)
    out = check(unsigned_against_python_ints, x, n)
    assert out[:3] == (True, False, False)


@kd.kernel
def unsigned_array_against_python_ints(x):
    return x > -1, x < -3, x == 261, x >= 3


def test_unsigned_array_compares_with_python_ints_exactly():
    out = check(unsigned_array_against_python_ints, np.array([5, 0, 255, 2], np.uint8))
    assert out[0].all() and not out[1].any() and not out[2].any()


@kd.kernel
def count_above_negative_loop_variable(x, n):
    s = 0
    for i in range(-3, n):
        if x[0] > i:
            s += 1
    return s


def test_unsigned_compares_with_a_negative_loop_variable():
    assert check(count_above_negative_loop_variable, np.array([2], np.uint8), 6) == 5


# --- NaN in kd.min / kd.max / np.fmin / np.fmax ----------------------------------------


@kd.kernel
def numpy_min_max(a: kd.f64, b: kd.f64):
    return kd.min(a, b), kd.max(a, b), np.minimum(a, b), np.maximum(a, b), np.fmin(a, b), \
        np.fmax(a, b), min(a, b), max(a, b)


_SPECIAL = [1.0, -2.5, math.nan, math.inf, -math.inf, 0.0, -0.0]


@pytest.mark.parametrize("a", _SPECIAL)
@pytest.mark.parametrize("b", _SPECIAL)
def test_nan_in_min_and_max_follows_numpy_and_python(a, b):
    out = check(numpy_min_max, a, b)
    np.testing.assert_array_equal(out[:2], [np.minimum(a, b), np.maximum(a, b)])
    np.testing.assert_array_equal(out[4:6], [np.fmin(a, b), np.fmax(a, b)])
    np.testing.assert_array_equal(out[6:], [min(a, b), max(a, b)])


def test_kd_min_of_one_and_nan_is_nan_in_either_order():
    assert math.isnan(numpy_min_max(1.0, math.nan)[0])
    assert math.isnan(numpy_min_max(math.nan, 1.0)[0])
    assert math.isnan(numpy_min_max(1.0, math.nan)[1])


@kd.kernel
def vector_min_max(a: kd.vec3, b: kd.vec3):
    return kd.min(a, b), kd.max(a, b)


def test_nan_in_vector_min_and_max():
    a = np.array([1.0, math.nan, 3.0], np.float32)
    b = np.array([math.nan, 2.0, 1.0], np.float32)
    lo, hi = check(vector_min_max, a, b)
    np.testing.assert_array_equal(lo, np.minimum(a, b))
    np.testing.assert_array_equal(hi, np.maximum(a, b))


# --- integer powers, remainders, bools --------------------------------------------


@kd.kernel
def integer_power(base: kd.i64, e: kd.i64):
    return base ** e


def test_integer_power_with_negative_run_time_exponent_raises_value_error():
    assert integer_power(2, 10) == 1024
    with pytest.raises(ValueError, match="negative integer powers"):
        integer_power.python(2, -1)
    with pytest.raises(ValueError, match="negative integer powers") as error:
        integer_power(2, -1)
    assert "base ** e" in str(error.value)


@kd.kernel
def powers_in_parallel(x, e):
    for i in kd.prange(x.shape[0]):
        x[i] = 2 ** e[i]


def test_negative_integer_power_in_a_parallel_loop_raises_on_cpu_and_cuda():
    e = np.array([1, 2, -3, 4])
    with pytest.raises(ValueError, match="negative integer powers"):
        powers_in_parallel(np.zeros(4, np.int64), e)
    check(powers_in_parallel, np.zeros(4, np.int64), np.array([1, 2, 3, 0]))
    if cuda_testing.enabled():
        with cuda_testing.on_device():
            x = kd.zeros(4, kd.i64, device="cuda")
            with pytest.raises(ValueError, match="negative integer powers"):
                powers_in_parallel(x, kd.array(e, device="cuda"))


@kd.kernel
def float_remainder(a: kd.f64, b: kd.f64):
    return a % b, a // b


@pytest.mark.parametrize("a,b", [(-0.0, 5.0), (0.0, -5.0), (-0.0, -5.0), (10.0, 5.0),
                                 (-10.0, 5.0), (10.0, -5.0), (-7.5, 2.5), (7.0, -3.0)])
def test_zero_float_remainder_takes_the_sign_of_the_divisor(a, b):
    r, _ = check(float_remainder, a, b)
    assert r == a % b and math.copysign(1.0, r) == math.copysign(1.0, a % b)


@given(st.floats(-1e6, 1e6), st.floats(-1e3, 1e3).filter(lambda b: b != 0))
@fuzz_settings(80)
def test_float_remainder_matches_python(a, b):
    r, q = float_remainder(a, b)
    assert math.copysign(1.0, r) == math.copysign(1.0, a % b) and r == a % b
    assert q == a // b


@kd.kernel
def bool_arithmetic(x, n: kd.i32):
    c = x[0] > 0
    d = x[0] > 0
    d += 1
    return c + n, c + 1, c - n, c * n, True + n, c + x[0], d


def test_bool_plus_int_is_an_int():
    out = check(bool_arithmetic, np.array([2], np.int32), 3)
    assert out == (4, 2, -2, 3, 4, 3, 2)
    assert all(np.asarray(v).dtype.kind == "i" for v in out)


# --- Python ints out of range ---------------------------------------------------------


@pytest.mark.parametrize("expression", ["x[0] + 300", "x[0] - (-1)", "x + 256", "x[0] * 1000"])
def test_python_int_out_of_range_of_uint8_raises_overflow_error(expression):
    k = kernel_from_source(f"""
        @kd.kernel
        def k(x):
            return {expression}
    """)
    x = np.array([5], np.uint8)
    with pytest.raises(OverflowError, match="out of bounds for uint8"):
        k.python(x)
    with pytest.raises(OverflowError, match="out of bounds for uint8") as error:
        k(x)
    assert isinstance(error.value, kd.CompileError)


def test_python_int_in_range_wraps_as_numpy():
    k = kernel_from_source("""
        @kd.kernel
        def k(x):
            return x[0] + 255, x[0] * 200
    """)
    with np.errstate(all="ignore"):
        check(k, np.array([5], np.uint8))


@kd.kernel
def floor_of_int(x):
    return kd.floor(x[0]), kd.ceil(x[0])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_floor_of_an_integer_keeps_its_type(dtype):
    out = check(floor_of_int, np.array([7], dtype))
    assert np.asarray(out[0]).dtype == dtype and out[0] == 7


# --- min/max of a Python float and a float32 -----------------------------------------


@kd.kernel
def max_of_python_float(x, a):
    return kd.f64(x) >= max(x, a[0]), max(x, a[0]), max(a[0], x), min(x, a[0]), min(a[0], x)


@pytest.mark.parametrize("x", [0.1, 0.3, 0.30000001, 0.7, -1.0, 1e300])
def test_max_of_a_python_float_argument_and_a_float32_agrees_with_python(x):
    a = np.array([0.3], np.float32)
    with np.errstate(over="ignore"):
        compiled, python = max_of_python_float(x, a), max_of_python_float.python(x, a)
    assert compiled[0] == python[0]
    assert [float(v) for v in compiled[1:]] == [float(v) for v in python[1:]]
    if cuda_testing.enabled():
        with cuda_testing.on_device():
            on_device = max_of_python_float(x, kd.array(a, device="cuda"))
        assert [float(v) for v in on_device] == [float(v) for v in compiled]


@given(st.floats(-10, 10), st.floats(-10, 10))
@fuzz_settings(80)
def test_python_max_never_below_its_python_float_argument(x, y):
    a = np.array([y], np.float32)
    out = max_of_python_float(x, a)
    assert out[1] >= x and out[3] <= x and out[0] == (x >= float(out[1]))
    assert [float(v) for v in out[1:]] == [float(v) for v in max_of_python_float.python(x, a)[1:]]


@kd.kernel
def max_with_literal(a):
    return max(a[0], 1e-6), min(a[0], 0.5)


def test_max_with_a_float_literal_stays_float32():
    out = max_with_literal(np.array([0.25], np.float32))
    assert np.asarray(out[0]).dtype == np.float32 and np.asarray(out[1]).dtype == np.float32


@kd.kernel
def array_min_max(a, b):
    return kd.min(a, b), kd.max(a, b), np.minimum(a, 0.5), np.fmin(a, b), np.fmax(b, a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_in_array_min_and_max(dtype, rng):
    a = rng.uniform(-1, 1, 40).astype(dtype)
    b = rng.uniform(-1, 1, 40).astype(dtype)
    a[::3] = np.nan
    b[::4] = np.nan
    out = check(array_min_max, a, b)
    expected = (np.minimum(a, b), np.maximum(a, b), np.minimum(a, dtype(0.5)), np.fmin(a, b),
                np.fmax(b, a))
    for actual, wanted in zip(out, expected):
        np.testing.assert_array_equal(actual, wanted)


def test_integer_array_min_and_max_are_unchanged(rng):
    a, b = rng.integers(-9, 9, 30), rng.integers(-9, 9, 30)
    k = kernel_from_source("""
        @kd.kernel
        def k(a, b):
            return kd.min(a, b), np.fmax(a, b)
    """)
    lo, hi = check(k, a, b)
    np.testing.assert_array_equal(lo, np.minimum(a, b))
    np.testing.assert_array_equal(hi, np.maximum(a, b))


@kd.kernel
def unsigned_against_literal_in_range(x, out):
    for i in kd.prange(x.shape[0]):
        out[i] = x[i] > 128


def test_comparison_with_a_literal_the_type_holds_stays_in_that_type():
    x = np.arange(256).astype(np.uint8)
    out = np.zeros(256, np.bool_)
    check(unsigned_against_literal_in_range, x, out)
    assert "gt %" in unsigned_against_literal_in_range.ir(x, out)
    assert "cast" not in unsigned_against_literal_in_range.ir(x, out)


# --- int() and float() of a value that already has the type -------------------------


@kd.kernel
def product_after_python_int(n, m):
    v = n[0] + 0
    w = int(v)  # a Python int of its own; v stays an int64
    return m[0] * v, w


@kd.kernel
def product_after_python_float(n, m):
    v = n[0] + 0.0
    w = float(v)
    return m[0] * v, m[0] * w


def test_python_int_of_an_int64_leaves_the_value_strong():
    out = check(product_after_python_int, np.array([81739]), np.array([97139], np.int32))
    assert out[0] == 81739 * 97139


def test_python_float_of_a_float64_leaves_the_value_strong():
    out = check(product_after_python_float, np.array([1.1]), np.array([3.3], np.float32))
    assert isinstance(out[0], np.float64) and isinstance(out[1], np.float32)

"""Scalar arithmetic with NumPy 2 typing and weak literals, Python's // and %, **, abs,
min, max, casts and bool operations: compiled kernels against their own Python."""


import numpy as np
import pytest
from kdsl_cpu_util import (
    assert_same,
    check,
    kernel_from_source,
    nonzero_floats,
    nonzero_ints,
    positive_floats,
)

import kdsl as kd

N = 67  # not a multiple of any vector width

DTYPES = {
    "f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "i16": np.int16, "u32": np.uint32,
}


def _data(rng, dtype, n=N, positive=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return positive_floats(rng, n, dtype) if positive else nonzero_floats(rng, n, dtype)
    if dtype.kind == "u":
        return nonzero_ints(rng, n, dtype, 1, 15)
    return nonzero_ints(rng, n, dtype, 1 if positive else -40, 40)


# --- binary operators on two arrays: values and NumPy 2 result types ------------------

BINARY_SOURCE = """
@kd.kernel
def k(a, b, out):
    for i in kd.prange(a.shape[0]):
        out[i] = a[i] {op} b[i]
    return a[1] {op} b[1]
"""

_PAIRS = [("f32", "f32"), ("f64", "f64"), ("i32", "i32"), ("i64", "i64"), ("i32", "f32"),
          ("f32", "i64"), ("i32", "i64"), ("f32", "f64"), ("u8", "u8"), ("u8", "i32"),
          ("i16", "f32"), ("u32", "i64")]
_BINARY_KERNELS: dict = {}


def _binary_kernel(op):
    if op not in _BINARY_KERNELS:
        _BINARY_KERNELS[op] = kernel_from_source(BINARY_SOURCE.format(op=op), prefix="binop")
    return _BINARY_KERNELS[op]


@pytest.mark.parametrize("pair", _PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%"])
def test_binary_operator_types_and_values(op, pair, rng):
    ta, tb = (DTYPES[t] for t in pair)
    a, b = _data(rng, ta), _data(rng, tb)
    with np.errstate(all="ignore"):
        reference = eval(f"a {op} b")  # NumPy 2's result type and values
    out = np.full(N, 7, dtype=reference.dtype)
    result = check(_binary_kernel(op), a, b, out)
    # the returned scalar has NumPy 2's result type of the two elements
    assert np.asarray(result).dtype == reference.dtype
    if reference.dtype.kind in "iub" or op in "+-*":
        np.testing.assert_array_equal(out, reference)


def test_mixed_i32_f32_is_f64_like_numpy(rng):
    a = nonzero_ints(rng, N, np.int32, -1000, 1000)
    b = nonzero_floats(rng, N, np.float32)
    out = np.zeros(N, np.float64)
    result = check(_binary_kernel("*"), a, b, out)
    assert isinstance(result, np.float64)
    np.testing.assert_array_equal(out, a.astype(np.float64) * b.astype(np.float64))


# --- weak literals -------------------------------------------------------------------

FLOAT_LITERALS = """
@kd.kernel
def k(x, out):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = x[i] * 0.1
        out[i, 1] = 0.1 * x[i]
        out[i, 2] = x[i] + 0.3
        out[i, 3] = 1.7 - x[i]
        out[i, 4] = x[i] / 3.0
        out[i, 5] = 2.5 / x[i]
    return x[0] * 0.1, 1.7 - x[0], x[0] / 3.0
"""

INT_LITERALS = """
@kd.kernel
def k(x, out):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = x[i] * 3
        out[i, 1] = 3 * x[i]
        out[i, 2] = x[i] + 2
        out[i, 3] = 20 - x[i]
        out[i, 4] = x[i] - 1
    return x[0] * 3, 20 - x[0]
"""


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "u8"])
def test_float_literals_are_weak(dtype, rng):
    x = _data(rng, DTYPES[dtype])
    out_dtype = (x[:1] * 0.1).dtype  # f32 stays f32; integers become f64
    out = np.zeros((N, 6), out_dtype)
    k = kernel_from_source(FLOAT_LITERALS, prefix="weakf")
    result = check(k, x, out)
    assert all(np.asarray(r).dtype == out_dtype for r in result)
    if dtype == "f32":
        # bit for bit what NumPy 2 gives for whole-array expressions
        np.testing.assert_array_equal(out[:, 0], x * 0.1)
        np.testing.assert_array_equal(out[:, 1], 0.1 * x)
        np.testing.assert_array_equal(out[:, 2], x + 0.3)
        np.testing.assert_array_equal(out[:, 3], 1.7 - x)
        np.testing.assert_array_equal(out[:, 4], x / 3.0)
        np.testing.assert_array_equal(out[:, 5], 2.5 / x)


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "u8", "i16"])
def test_int_literals_are_weak(dtype, rng):
    x = _data(rng, DTYPES[dtype])
    out_dtype = (x[:1] * 3).dtype  # the array's type wins
    assert out_dtype == x.dtype
    out = np.zeros((N, 5), out_dtype)
    k = kernel_from_source(INT_LITERALS, prefix="weaki")
    result = check(k, x, out)
    assert all(np.asarray(r).dtype == out_dtype for r in result)
    np.testing.assert_array_equal(out[:, 0], x * 3)
    np.testing.assert_array_equal(out[:, 3], 20 - x)


@kd.kernel
def scale_by(x, s, out):
    for i in kd.prange(x.shape[0]):
        out[i] = x[i] * s
    return x[0] * s


def test_python_float_argument_is_weak(rng):
    x = nonzero_floats(rng, N)
    out = np.zeros(N, np.float32)
    result = check(scale_by, x, 0.1, out)
    assert isinstance(result, np.float32)
    np.testing.assert_array_equal(out, x * 0.1)


def test_numpy_f32_scalar_argument_is_strong(rng):
    x = nonzero_ints(rng, N, np.int16)
    out = np.zeros(N, np.float32)
    result = check(scale_by, x, np.float32(0.1), out)
    assert isinstance(result, np.float32)


# Regression test (was a kdsl bug): an np.float64 argument is taken for a weak Python float
# (np.float64 subclasses float), so f32 array * np.float64 is f32
def test_numpy_f64_scalar_argument_is_strong(rng):
    x = nonzero_floats(rng, N)
    out = np.zeros(N, np.float64)
    result = check(scale_by, x, np.float64(0.1), out)
    assert isinstance(result, np.float64)
    np.testing.assert_array_equal(out, x * np.float64(0.1))


@kd.kernel
def literal_chain(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        t = x[i] * 0.5
        out[i] = t * (1.0 / 3.0)


def test_folded_literal_subexpression_is_f32(rng):
    x = nonzero_floats(rng, N)
    out = np.zeros(N, np.float32)
    check(literal_chain, x, out)
    np.testing.assert_array_equal(out, (x * 0.5) * (1.0 / 3.0))


# --- // and % with Python semantics --------------------------------------------------

FLOORDIV_MOD = """
@kd.kernel
def k(a, b, q, r):
    for i in kd.prange(a.shape[0]):
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]
"""


@pytest.mark.parametrize("dtype", ["i32", "i64", "i16", "u8", "u32"])
def test_floordiv_mod_integers(dtype, rng):
    t = np.dtype(DTYPES[dtype])
    if t.kind == "u":
        a = nonzero_ints(rng, 200, t, 0, 250)
        b = nonzero_ints(rng, 200, t, 1, 17)
    else:
        a = nonzero_ints(rng, 200, t, -100, 100)
        b = nonzero_ints(rng, 200, t, -9, 9)
    q, r = np.zeros_like(a), np.zeros_like(a)
    check(kernel_from_source(FLOORDIV_MOD, prefix="divmod"), a, b, q, r)
    for x, y, qq, rr in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist()):
        assert (qq, rr) == (x // y, x % y)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_floordiv_mod_floats(dtype, rng):
    a = nonzero_floats(rng, 200, DTYPES[dtype], 0.1, 20.0)
    b = nonzero_floats(rng, 200, DTYPES[dtype], 0.3, 3.0)
    q, r = np.zeros_like(a), np.zeros_like(a)
    check(kernel_from_source(FLOORDIV_MOD, prefix="divmodf"), a, b, q, r)
    np.testing.assert_array_equal(q, np.floor_divide(a, b))
    np.testing.assert_array_equal(r, np.mod(a, b))
    assert np.all((r == 0) | (np.sign(r) == np.sign(b)))


@kd.kernel
def float_floordiv(a: kd.Array[kd.f64], b: kd.Array[kd.f64], q: kd.Array[kd.f64]):
    for i in range(a.shape[0]):
        q[i] = a[i] // b[i]


# Regression test (was a kdsl bug): float // is floor(a / b), not Python's floor((a - a % b)
# / b): 1.0 // 0.1 gives 10.0 instead of 9.0
def test_float_floordiv_matches_python_when_division_rounds_up():
    a = np.array([1.0, 0.7, -1.0], np.float64)
    b = np.array([0.1, 0.1, 0.1], np.float64)
    q = np.zeros(3)
    float_floordiv(a, b, q)
    assert q.tolist() == [1.0 // 0.1, 0.7 // 0.1, -1.0 // 0.1]  # [9.0, 6.0, -10.0]


@kd.kernel
def literal_divmod(x: kd.Array[kd.i64], out: kd.Array[kd.i64, 2]):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = x[i] // 3
        out[i, 1] = x[i] % 3
        out[i, 2] = x[i] // -3
        out[i, 3] = x[i] % -3
        out[i, 4] = -7 // 2
        out[i, 5] = -7 % 3
        out[i, 6] = 7 % -3
        out[i, 7] = (-x[i]) // 4


def test_floordiv_mod_by_literals(rng):
    x = nonzero_ints(rng, 100, np.int64, -30, 30)
    out = np.zeros((100, 8), np.int64)
    check(literal_divmod, x, out)
    assert out[0, 4] == -4 and out[0, 5] == 2 and out[0, 6] == -2
    for v, row in zip(x.tolist(), out.tolist()):
        assert row[:4] == [v // 3, v % 3, v // -3, v % -3]
        assert row[7] == (-v) // 4


# --- ** ------------------------------------------------------------------------------


@kd.kernel
def powers(x, y, out):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = x[i] ** 2
        out[i, 1] = x[i] ** 3
        out[i, 2] = x[i] ** y[i]
        out[i, 3] = x[i] ** 0.5
        out[i, 4] = kd.pow(x[i], y[i])
        out[i, 5] = x[i] ** 0
        out[i, 6] = 2.0 ** y[i]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_float_powers(dtype, rng):
    x = positive_floats(rng, N, DTYPES[dtype], 0.5, 3.0)
    y = nonzero_floats(rng, N, DTYPES[dtype], 0.1, 2.5)
    out = np.zeros((N, 7), DTYPES[dtype])
    check(powers, x, y, out, rtol=2e-6 if dtype == "f32" else 1e-13)
    np.testing.assert_array_equal(out[:, 0], x * x)
    np.testing.assert_array_equal(out[:, 5], np.ones(N))


@kd.kernel
def int_powers(x, e, out):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = x[i] ** e[i]
        out[i, 1] = x[i] ** 2
        out[i, 2] = x[i] ** 5
        out[i, 3] = 3 ** e[i]


@pytest.mark.parametrize("dtype", ["i32", "i64"])
def test_integer_powers(dtype, rng):
    x = nonzero_ints(rng, N, DTYPES[dtype], -6, 6)
    e = rng.integers(0, 9, N).astype(DTYPES[dtype])
    out = np.zeros((N, 4), DTYPES[dtype])
    check(int_powers, x, e, out)
    for v, p, row in zip(x.tolist(), e.tolist(), out.tolist()):
        assert row == [v**p, v**2, v**5, 3**p]


# --- abs, min, max -------------------------------------------------------------------


@kd.kernel
def abs_min_max(a, b, c, out):
    for i in kd.prange(a.shape[0]):
        out[i, 0] = abs(a[i])
        out[i, 1] = min(a[i], b[i])
        out[i, 2] = max(a[i], b[i])
        out[i, 3] = min(a[i], b[i], c[i])
        out[i, 4] = max(a[i], b[i], c[i])
        out[i, 5] = kd.abs(b[i])
        out[i, 6] = kd.min(a[i], c[i])
        out[i, 7] = kd.max(a[i], c[i])
        out[i, 8] = abs(a[i] - b[i])
        out[i, 9] = max(a[i], 1)
        out[i, 10] = min(2, b[i])


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64"])
def test_abs_min_max(dtype, rng):
    a, b, c = (_data(rng, DTYPES[dtype]) for _ in range(3))
    out = np.zeros((N, 11), DTYPES[dtype])
    check(abs_min_max, a, b, c, out)
    np.testing.assert_array_equal(out[:, 0], np.abs(a))
    np.testing.assert_array_equal(out[:, 4], np.maximum(np.maximum(a, b), c))


def test_min_max_of_mixed_types_promotes(rng):
    a = nonzero_ints(rng, N, np.int32)
    b = nonzero_floats(rng, N, np.float32, 1, 40)
    c = nonzero_floats(rng, N, np.float32, 1, 40)
    out = np.zeros((N, 11), np.float64)
    check(abs_min_max, a, b, c, out)


# --- casts ---------------------------------------------------------------------------


@kd.kernel
def casts(x, f32_out, f64_out, i64_out, i32_out, u8_out):
    for i in kd.prange(x.shape[0]):
        f32_out[i] = kd.f32(x[i]) * 0.1
        f64_out[i] = float(x[i]) * 0.1
        i64_out[i] = int(x[i])
        i32_out[i] = kd.i32(x[i]) + 1
        u8_out[i] = kd.u8(abs(int(x[i])) % 200)
    return kd.f32(x[0]), float(x[0]), int(x[0]), kd.i64(x[0])


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "u8"])
def test_casts(dtype, rng):
    if np.dtype(DTYPES[dtype]).kind == "f":
        x = nonzero_floats(rng, N, DTYPES[dtype], 0.1, 90.0)
    else:
        x = _data(rng, DTYPES[dtype])
    outs = [np.zeros(N, t) for t in (np.float32, np.float64, np.int64, np.int32, np.uint8)]
    r = check(casts, x, *outs)
    assert isinstance(r[0], np.float32) and isinstance(r[3], np.int64)
    # int() truncates toward zero, like Python
    assert outs[2].tolist() == [int(v) for v in x.tolist()]
    np.testing.assert_array_equal(outs[0], x.astype(np.float32) * np.float32(0.1))
    np.testing.assert_array_equal(outs[1], x.astype(np.float64) * 0.1)


@kd.kernel
def f64_to_f32(x: kd.Array[kd.f64], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        out[i] = kd.f32(x[i])


def test_f64_to_f32_rounds_to_nearest(rng):
    x = rng.uniform(-1e3, 1e3, 500)
    out = np.zeros(500, np.float32)
    check(f64_to_f32, x, out)
    np.testing.assert_array_equal(out, x.astype(np.float32))


# --- bool operations -----------------------------------------------------------------


@kd.kernel
def bool_ops(a, b, x, out):
    for i in kd.prange(a.shape[0]):
        out[i, 0] = a[i] & b[i]
        out[i, 1] = a[i] | b[i]
        out[i, 2] = a[i] ^ b[i]
        out[i, 3] = not a[i]
        out[i, 4] = a[i] and b[i]
        out[i, 5] = a[i] or not b[i]
        out[i, 6] = x[i] > 0.0
        out[i, 7] = (x[i] > 0.0) == a[i]
        out[i, 8] = (x[i] < -1.0) != b[i]
        out[i, 9] = not (a[i] and (x[i] > 1.0))


def test_bool_operations(rng):
    a = rng.random(N) < 0.5
    b = rng.random(N) < 0.5
    x = nonzero_floats(rng, N)
    out = np.zeros((N, 10), np.bool_)
    check(bool_ops, a, b, x, out)
    np.testing.assert_array_equal(out[:, 2], a ^ b)
    np.testing.assert_array_equal(out[:, 5], a | ~b)


@kd.kernel
def bool_to_numbers(a, out):
    for i in kd.prange(a.shape[0]):
        out[i, 0] = int(a[i]) + int(a[i])
        out[i, 1] = int(a[i]) * 7 - 3
        out[i, 2] = kd.i64(a[i]) * 5
        out[i, 3] = 2 if a[i] else -2


def test_bool_to_numbers(rng):
    a = rng.random(N) < 0.5
    out = np.zeros((N, 4), np.int64)
    check(bool_to_numbers, a, out)
    np.testing.assert_array_equal(out[:, 1], np.where(a, 4, -3))


@kd.kernel
def int_bit_ops(a, b, out):
    for i in kd.prange(a.shape[0]):
        out[i, 0] = a[i] & b[i]
        out[i, 1] = a[i] | b[i]
        out[i, 2] = a[i] ^ b[i]
        out[i, 3] = ~a[i]
        out[i, 4] = a[i] << 3
        out[i, 5] = a[i] >> 2
        out[i, 6] = -a[i]


@pytest.mark.parametrize("dtype", ["i32", "i64"])
def test_integer_bit_operations(dtype, rng):
    a = nonzero_ints(rng, N, DTYPES[dtype], -1000, 1000)
    b = nonzero_ints(rng, N, DTYPES[dtype], -1000, 1000)
    out = np.zeros((N, 7), DTYPES[dtype])
    check(int_bit_ops, a, b, out)
    np.testing.assert_array_equal(out[:, 5], a >> 2)


@kd.kernel
def unary_float(x, out):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = -x[i]
        out[i, 1] = +x[i]
        out[i, 2] = -(x[i] * 2.0)


def test_unary_minus_floats(rng):
    x = nonzero_floats(rng, N)
    out = np.zeros((N, 3), np.float32)
    check(unary_float, x, out)


def test_scalar_return_types(rng):
    x = nonzero_floats(rng, 4)
    r = scale_by(x, 2.0, np.zeros(4, np.float32))
    assert_same(r, x[0] * 2.0)


@kd.kernel
def cast_literals(x, y):
    return x[0] + kd.i64(1), y[0] * kd.f64(0.1), y[0] * kd.f64(x[0])


def test_cast_of_literal_is_strongly_typed():
    x, y = np.array([7], np.int32), np.array([1.5], np.float32)
    check(cast_literals, x, y)


@kd.kernel
def typed_zero_state(x):
    s1 = kd.i64(0)
    s2 = kd.i32(0)
    for i in range(x.shape[0]):
        s1 = s1 + s2 + 3_000_000_000
        s2 = kd.i32(i)
    return s1, s2


def test_typed_zero_initial_state_keeps_its_type():
    s1, s2 = typed_zero_state(np.zeros(3))
    assert isinstance(s1, np.int64) and s1 == 9_000_000_001  # 3e9 * 3 + (0 + 0 + 1)
    assert (s1, s2) == typed_zero_state.python(np.zeros(3))


@kd.kernel
def math_of_python_scalars(x):
    return x[0] * kd.sqrt(2.0), x[0] * kd.min(2, 3), x[0] * kd.sqrt(x.shape[0])


def test_math_of_python_scalars_is_strong_like_numpy():
    x = np.array([1.5], np.float32)
    check(math_of_python_scalars, x)


@kd.kernel
def unsigned_parameters(x: kd.u32, y: kd.u8, z: kd.i16, b: kd.bool_):
    return x + y, z * 2, b


def test_annotated_narrow_parameters_from_numpy_scalars():
    r = check(unsigned_parameters, np.uint32(7), np.uint8(3), np.int16(2), np.bool_(True))
    assert isinstance(r[0], np.uint32) and isinstance(r[1], np.int16)


def test_annotated_unsigned_parameters_accept_python_ints():
    r = check(unsigned_parameters, 7, 3, 2, True)
    assert r[0] == 10 and isinstance(r[0], np.uint32)
    assert check(unsigned_parameters, 2**32 - 1, 255, -5, False)[0] == np.uint32(254)


@kd.kernel
def bool_sum(a, b, out):
    for i in kd.prange(a.shape[0]):
        out[i, 0] = (a[i] > 0) + (b[i] > 0)
        out[i, 1] = (a[i] > 0) * (b[i] > 0)


def test_bool_plus_bool_follows_numpy(rng):
    a, b = nonzero_floats(rng, 40, np.float64), nonzero_floats(rng, 40, np.float64)
    out = np.zeros((40, 2), np.int64)
    check(bool_sum, a, b, out)

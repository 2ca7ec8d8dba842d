"""Type inference of locals from all their assignments, loop-carried values, and
variables defined inside loops and branches and used after them."""

import numpy as np
import pytest
from kdsl_cpu_util import assert_same, check, nonzero_floats, nonzero_ints

import kdsl as kd


@kd.kernel
def total(x):
    s = 0
    for i in range(x.shape[0]):
        s += x[i]
    return s


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_int_literal_then_accumulate_takes_array_type(dtype, rng):
    x = (nonzero_floats(rng, 50, dtype) if np.dtype(dtype).kind == "f"
         else nonzero_ints(rng, 50, dtype, 1, 5))
    r = check(total, x, rtol=1e-6 if dtype == np.float32 else 1e-14)
    # NumPy: python int 0 + x[0] takes x's dtype
    assert np.asarray(r).dtype == (0 + x[0]).dtype


@kd.kernel
def float_literal_then_f32(x: kd.Array[kd.f32]):
    m = 0.0
    p = 1.0
    for i in range(x.shape[0]):
        m = max(m, x[i])
        p *= x[i]
    return m, p


def test_float_literal_then_f32_values_makes_f32(rng):
    x = rng.uniform(0.8, 1.25, 40).astype(np.float32)
    m, p = check(float_literal_then_f32, x, rtol=1e-5)
    assert isinstance(m, np.float32) and isinstance(p, np.float32)


@kd.kernel
def fib(n):
    a = 0
    b = 1
    for _ in range(n):
        a, b = b, a + b
    return a


def test_loop_carried_tuple_swap():
    for n in (0, 1, 2, 10, 50, 90):
        assert check(fib, n) == [0, 1, 1, 55, 12586269025, 2880067194370816120][
            (0, 1, 2, 10, 50, 90).index(n)]


@kd.kernel
def last_and_count(x, threshold):
    last = -1.0
    count = 0
    for i in range(x.shape[0]):
        v = x[i] * 2.0
        if v > threshold:
            last = v
            count = count + 1
    return last, count, v + 0.25  # v: defined in the loop, used after it


def test_values_defined_in_loop_used_after(rng):
    x = nonzero_floats(rng, 33, np.float64)
    check(last_and_count, x, 0.5)


@kd.kernel
def alias_of_loop_local(x):
    for i in range(x.shape[0]):
        v = x[i] * 2.0
    after = v
    return after


# Regression test (was a kdsl bug): a local assigned from a variable first defined inside a
# loop is typed i64 (the value is truncated: 1.5 -> 1)
def test_alias_of_variable_defined_in_loop(rng):
    x = np.array([1.5, -2.25, 3.0, 0.75])
    assert_same(alias_of_loop_local(x), alias_of_loop_local.python(x))
    assert alias_of_loop_local(x) == 1.5


@kd.kernel
def loop_variable_after_loop(x, threshold):
    for i in range(x.shape[0]):
        if x[i] > threshold:
            break
    j = 0
    for j in range(3, x.shape[0], 2):  # noqa: B007 - j is read after the loop
        pass
    return i, j


# Regression test (was a kdsl bug): a range() loop variable is not defined after the loop
# (CompileError: local 'i' may be used before it is assigned)
def test_loop_variable_used_after_loop(rng):
    x = nonzero_floats(rng, 33, np.float64)
    check(loop_variable_after_loop, x, 1.0)
    check(loop_variable_after_loop, x, 100.0)


@kd.kernel
def defined_in_both_branches(x, out):
    for i in kd.prange(x.shape[0]):
        if x[i] > 0:
            y = x[i] * 2
            z = 1
        else:
            y = -x[i]
            z = 2.5
        out[i] = y + z


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_defined_in_both_branches(dtype, rng):
    x = (nonzero_floats(rng, 60, dtype) if dtype == np.float32 else nonzero_ints(rng, 60, dtype))
    out = np.zeros(60, np.float64 if dtype == np.int32 else np.float32)
    check(defined_in_both_branches, x, out)


@kd.kernel
def running(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    acc = 0
    prev = x[0]
    for i in range(1, x.shape[0]):
        acc = acc * 0.5 + (x[i] - prev)
        prev = x[i]
        out[i] = acc


def test_recurrence_with_weak_start(rng):
    x = nonzero_floats(rng, 80)
    out = np.zeros(80, np.float32)
    check(running, x, out, rtol=1e-5, atol=1e-6)


@kd.kernel
def annotated_locals(x):
    s: kd.f64 = 0
    n: kd.i32 = 0
    for i in range(x.shape[0]):
        s += x[i]
        n += 1
    return s, n


def test_annotated_locals(rng):
    x = nonzero_floats(rng, 20)
    s, n = annotated_locals(x)
    assert isinstance(s, np.float64) and isinstance(n, np.int32)
    assert n == 20
    np.testing.assert_allclose(s, x.astype(np.float64).sum(), rtol=1e-12)


@kd.kernel
def while_carried(x: kd.Array[kd.f64]):
    i = 0
    s = 0
    while i < x.shape[0]:
        s = s + x[i] * i
        i += 2
    return s, i


def test_while_loop_carried_promotion(rng):
    x = nonzero_floats(rng, 41, np.float64)
    check(while_carried, x, rtol=1e-14)


@kd.kernel
def integer_accumulators(x: kd.Array[kd.i32]):
    s = 0
    big = 0
    for i in range(x.shape[0]):
        s += x[i]
        big += 1_000_000_000
    return s, big


def test_integer_accumulator_types(rng):
    x = nonzero_ints(rng, 10, np.int32, 1, 100)
    s, big = check(integer_accumulators, x)
    assert isinstance(s, np.int32)
    assert big == 10_000_000_000


@kd.kernel
def conditional_accumulate_int_start(x):
    s = 0
    for i in range(x.shape[0]):
        if x[i] > 0:
            s += x[i]
    return s


@kd.kernel
def conditional_accumulate_float_start(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            s += x[i]
    return s


# Regression test (was a kdsl bug): s = 0, then s += x[i] under an if in a loop keeps s an
# i64: the f32 values are truncated (returns 4, not 4.75)
def test_conditional_update_in_loop_infers_f32_from_int_start():
    x = np.array([1.5, 0.25, -1.0, 3.0], np.float32)
    assert_same(conditional_accumulate_int_start(x), np.float32(4.75))


# Regression test (was a kdsl bug): s = 0.0, then s += x[i] under an if in a loop makes s an
# f64 (a Python float), not an f32
def test_conditional_update_in_loop_infers_f32_from_float_start():
    x = np.array([1.5, 0.25, -1.0, 3.0], np.float32)
    assert_same(conditional_accumulate_float_start(x), np.float32(4.75))


def test_conditional_update_in_loop_with_int_arrays(rng):
    x = nonzero_ints(rng, 50, np.int64)
    assert check(conditional_accumulate_int_start, x) == x[x > 0].sum()


# --- array locals ---------------------------------------------------------------------------


@kd.kernel
def ping_pong(a: kd.Array[kd.f32], b: kd.Array[kd.f32], iters: kd.i32):
    src = a
    dst = b
    for _it in range(iters):
        for i in kd.prange(1, src.shape[0] - 1):
            dst[i] = 0.5 * (src[i - 1] + src[i + 1]) + 1.0
        src, dst = dst, src
    return src


def test_array_locals_swapped_in_a_loop(rng):
    a = rng.uniform(1.0, 2.0, 12).astype(np.float32)
    b = a.copy()
    ra, rb = a.copy(), b.copy()
    result = ping_pong(a, b, 5)
    expected = ping_pong.python(ra, rb, 5)
    np.testing.assert_allclose(a, ra, rtol=1e-6)
    np.testing.assert_allclose(b, rb, rtol=1e-6)
    assert result is b  # after 5 swaps the last result is in b
    np.testing.assert_allclose(result, expected, rtol=1e-6)


@kd.kernel
def pick_array(a, b, threshold):
    for it in range(4):
        dst = a if it % 2 == 0 else b
        dst[0] = dst[0] + 7.0
    if a[0] > threshold:
        c = a
    else:
        c = b
    c[1] = 5.0


def test_array_chosen_by_a_condition(rng):
    a, b = rng.uniform(1, 2, 3), rng.uniform(1, 2, 3)
    for threshold in (0.0, 100.0):
        x, y, px, py = a.copy(), b.copy(), a.copy(), b.copy()
        pick_array(x, y, threshold)
        pick_array.python(px, py, threshold)
        np.testing.assert_array_equal(x, px)
        np.testing.assert_array_equal(y, py)


@kd.kernel
def array_local_of_two_layouts(a, b):
    src = a
    for _it in range(3):
        src[0] += 1.0
        src = b


def test_array_local_takes_arrays_of_different_layouts(rng):
    a = rng.uniform(1, 2, 4)
    b = rng.uniform(1, 2, 8)[::2]
    pa, pb = a.copy(), b.copy()
    array_local_of_two_layouts(a, b)
    array_local_of_two_layouts.python(pa, pb)
    np.testing.assert_array_equal(a, pa)
    np.testing.assert_array_equal(b, pb)

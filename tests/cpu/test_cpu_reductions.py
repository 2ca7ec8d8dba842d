"""Scalar and vector reductions in parallel loops: +=, -=, *=, min, max, for f32, f64
and i64, with 1 and 2 threads."""

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats, nonzero_ints, with_threads

import kdsl as kd


@kd.kernel
def float_reductions(x):
    s = 0.0
    d = 10.0
    p = 1.0
    lo = x[0]
    hi = x[0]
    lo2 = 1e30
    for i in kd.prange(x.shape[0]):
        s += x[i]
        d -= x[i] * 2.0
        p *= 1.0 + x[i] * 0.001
        lo = min(lo, x[i])
        hi = max(x[i], hi)
        lo2 = kd.min(lo2, x[i] * 3.0)
    return s, d, p, lo, hi, lo2


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 2, 7, 1000, 10_001])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_float_reductions(dtype, n, threads, rng):
    x = nonzero_floats(rng, n, dtype)
    r = with_threads(threads, check, float_reductions, x,
                     rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-3 if dtype == np.float32 else 1e-9)
    assert all(isinstance(v, dtype) for v in r[:5])
    # min and max are exact whatever the order
    assert r[3] == x.min() and r[4] == x.max()


@kd.kernel
def int_reductions(x):
    s = 0
    d = 5
    p = 1
    lo = x[0]
    hi = x[0]
    for i in kd.prange(x.shape[0]):
        s += x[i]
        d -= x[i] * 3
        if i % 16 == 0:
            p *= 1 + x[i] % 2
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    return s, d, p, lo, hi


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_reductions_are_exact(dtype, threads, rng):
    x = nonzero_ints(rng, 777, dtype, -1000, 1000)
    r = with_threads(threads, check, int_reductions, x)
    assert r[0] == x.sum() and r[3] == x.min() and r[4] == x.max()


@kd.kernel
def sum_of_squares_2d(a):
    s = 0.0
    m = -1e300
    for i, j in kd.ndrange(a.shape[0], a.shape[1]):
        s += a[i, j] * a[i, j]
        m = max(m, a[i, j])
    return s, m


@pytest.mark.parametrize("threads", [1, 2])
def test_ndrange_reduction(threads, rng):
    a = nonzero_floats(rng, (63, 41), np.float64)[::-1, ::2]
    with_threads(threads, check, sum_of_squares_2d, a, rtol=1e-12)


@kd.kernel
def vector_reductions(pos: kd.Array[kd.vec3]):
    c = kd.vec3(0.0)
    lo = kd.vec3(1e30)
    hi = kd.vec3(-1e30)
    for i in kd.prange(pos.shape[0]):
        c += pos[i]
        lo = kd.min(lo, pos[i])
        hi = kd.max(hi, pos[i])
    return c / pos.shape[0], lo, hi


@pytest.mark.parametrize("threads", [1, 2])
def test_vector_reductions(threads, rng):
    pos = nonzero_floats(rng, (5000, 3))
    c, lo, hi = with_threads(threads, check, vector_reductions, pos, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(lo, pos.min(axis=0))
    np.testing.assert_array_equal(hi, pos.max(axis=0))


@kd.kernel
def vector_sub_reduction(pos: kd.Array[kd.vec3d], w: kd.Array[kd.f64]):
    acc = kd.vec3d(1.0, 2.0, 3.0)
    for i in kd.prange(pos.shape[0]):
        acc -= pos[i] * w[i]
    return acc


def test_vector_sub_reduction(rng):
    pos = nonzero_floats(rng, (3000, 3), np.float64)
    w = nonzero_floats(rng, 3000, np.float64)
    with_threads(2, check, vector_sub_reduction, pos, w, rtol=1e-10)


@kd.kernel
def norm_each_step(u: kd.Array[kd.f64], steps: kd.i64):
    history = 0.0
    for _step in range(steps):
        total = 0.0
        for i in kd.prange(u.shape[0]):
            total += u[i] * u[i]
        norm = kd.sqrt(total)
        for i in kd.prange(u.shape[0]):
            u[i] = u[i] / norm * 0.5 + 0.01
        history += norm
    return history


def test_reduction_reset_inside_serial_loop(rng):
    u = nonzero_floats(rng, 500, np.float64)
    with_threads(2, check, norm_each_step, u, 25, rtol=1e-10)


@kd.kernel
def reduction_with_inner_loops(a):
    count = 0
    total = 0.0
    for i in kd.prange(a.shape[0]):
        row = 0.0
        for j in range(a.shape[1]):
            if a[i, j] > 0.0:
                row += a[i, j]
                count += 1
        total += row * row
    return count, total


def test_reductions_updated_in_inner_serial_loops(rng):
    a = nonzero_floats(rng, (200, 33), np.float64)
    count, total = with_threads(2, check, reduction_with_inner_loops, a, rtol=1e-10)
    assert count == (a > 0).sum()


@kd.kernel
def conditional_reduction(x, threshold):
    n_above = 0
    s_above = 0.0
    for i in kd.prange(x.shape[0]):
        if x[i] > threshold:
            n_above += 1
            s_above += x[i]
    return n_above, s_above


# Regression test (was a kdsl bug): a local updated only under an if inside a loop keeps the
# type of its weak initial value (0.0 -> f64, 0 -> i64)
@pytest.mark.parametrize("threads", [1, 2])
def test_conditional_reduction(threads, rng):
    x = nonzero_floats(rng, 4096)
    n, s = with_threads(threads, check, conditional_reduction, x, 0.5, rtol=1e-4)
    assert n == (x > 0.5).sum()


@kd.kernel
def ndrange3_reduction(a):
    s = 0
    for i, j, k in kd.ndrange(a.shape[0], a.shape[1], a.shape[2]):
        s += a[i, j, k] * (i + 2 * j + 3 * k)
    return s


@kd.kernel
def negative_step_reduction(x):
    s = 0
    for i in kd.prange(x.shape[0] - 1, -1, -2):
        s += x[i] * i
    return s


@pytest.mark.parametrize("threads", [1, 2])
def test_reductions_over_3d_and_negative_step_domains(threads, rng):
    a = nonzero_ints(rng, (7, 9, 11), np.int64)
    with_threads(threads, check, ndrange3_reduction, a)
    x = nonzero_ints(rng, 1001, np.int64)
    with_threads(threads, check, negative_step_reduction, x)

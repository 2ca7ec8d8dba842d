"""Loop forms met porting Taichi and Numba programs: ``kd.ndrange`` axes given as
(start, stop) pairs, ``s /= x`` as a parallel product reduction, and loops over arrays
(``for v in a``, ``enumerate``, ``zip``, ``enumerate(zip(...))``)."""

import numpy as np
import pytest
from kdsl_cpu_util import check, positive_floats, with_threads

import kdsl as kd


@kd.kernel
def laplacian_interior(a, out):
    n, m = a.shape
    for i, j in kd.ndrange((1, n - 1), (1, m - 1)):
        out[i, j] = a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1] - 4.0 * a[i, j]


@kd.kernel
def mixed_axes(a, out):
    n, m, p = a.shape
    for i, j, k in kd.ndrange(n, (2, m), (p - 3, p)):
        out[i, j, k] = a[i, j, k] * 2.0 + i - j * k


@kd.kernel
def one_pair(a, lo: kd.i32, hi: kd.i64):
    s = 0.0
    for i in kd.ndrange((lo, hi)):
        a[i] += 1.0
        s += a[i]
    return s


@pytest.mark.parametrize("threads", [1, 2])
def test_ndrange_start_stop_pairs_cover_the_interior(threads, rng):
    a = positive_floats(rng, (7, 9))
    out = np.full_like(a, 5.0)
    with_threads(threads, check, laplacian_interior, a, out)
    expected = np.full_like(a, 5.0)
    expected[1:-1, 1:-1] = (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
                            - 4.0 * a[1:-1, 1:-1])
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_ndrange_pairs_mixed_with_extents(rng):
    a = positive_floats(rng, (3, 5, 6))
    out = np.zeros_like(a)
    check(mixed_axes, a, out)
    assert np.all(out[:, :2] == 0) and np.all(out[:, :, :3] == 0) and np.all(out[:, 2:, 3:] != 0)


@pytest.mark.parametrize("lo,hi", [(2, 7), (5, 5), (6, 3)])
def test_ndrange_pair_of_one_axis_and_empty_ranges(lo, hi, rng):
    a = positive_floats(rng, 10)
    check(one_pair, a, lo, hi, rtol=1e-6)


def test_ndrange_tuple_of_three_is_an_error():
    @kd.kernel
    def bad(a):
        for i in kd.ndrange((0, 2, 1)):
            a[i] = 1.0

    with pytest.raises(kd.CompileError, match=r"\(start, stop\) pair, got a tuple of 3"):
        bad(np.zeros(3))


@kd.kernel
def divide_reduction(x):
    p = 3.0
    q = 2.0
    for i in kd.prange(x.shape[0]):
        p /= x[i]
        if i % 3 == 0:
            q /= x[i] * 0.5 + 0.75
    return p, q


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 7, 1000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_divide_assignment_is_a_product_reduction(dtype, n, threads, rng):
    x = positive_floats(rng, n, dtype, lo=0.9, hi=1.1)
    rtol = 1e-4 if dtype == np.float32 else 1e-11
    p, q = with_threads(threads, check, divide_reduction, x, rtol=rtol)
    np.testing.assert_allclose(p, 3.0 / np.prod(x.astype(np.float64)), rtol=rtol)
    assert isinstance(p, dtype)


@kd.kernel
def divide_int_start(x):
    s = 1
    for i in kd.prange(x.shape[0]):
        s /= x[i]
    return s


def test_divide_reduction_of_an_int_start_is_a_float(rng):
    x = np.array([2, 4, 5, 8, 10, 16], dtype=np.int64)
    assert check(divide_int_start, x, rtol=1e-12) == pytest.approx(1 / (2 * 4 * 5 * 8 * 10 * 16))


def test_divide_reduction_read_inside_the_loop_is_an_error():
    @kd.kernel
    def bad(x):
        s = 1.0
        for i in kd.prange(x.shape[0]):
            s /= x[i]
            x[i] = s
        return s

    with pytest.raises(kd.CompileError, match="reduction variable 's' is read"):
        bad(np.ones(3))


@kd.kernel
def over_arrays(a, b, rows, pos, out):
    s = 0.0
    for v in a:
        if v > 0.9:
            break
        s += v
    for i, v in enumerate(b, 1):
        s += i * v
    for u, v in zip(a, b[1:]):
        s -= u * v
    for m, (u, p) in enumerate(zip(b, pos), 2):  # stops at the shorter
        s += m * u * p[1]
    for i in kd.prange(rows.shape[0]):
        t = 0.0
        for k, x in enumerate(rows[i]):
            t += k * x
        out[i] = t
    for p in pos:
        s += kd.dot(p, p)
    sums = kd.cumsum(a)
    for c in sums[::2]:
        s += c
    for row in rows:
        for x in row:
            s += x * 0.5
    return s


def test_loops_over_arrays_enumerate_and_zip(rng):
    a = positive_floats(rng, 9, np.float64)
    b = positive_floats(rng, 7, np.float64)
    rows = positive_floats(rng, (5, 4), np.float64)
    pos = positive_floats(rng, (3, 3), np.float32)
    out = np.zeros(5)
    check(over_arrays, a, b, rows, pos, out, rtol=1e-6)
    assert out[1] == pytest.approx(float(np.arange(4) @ rows[1]))

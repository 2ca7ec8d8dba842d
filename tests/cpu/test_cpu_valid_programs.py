"""Valid programs that the compiler once rejected or crashed on: chains of reductions
whose results feed a later parallel loop, returns of a vector from inside a loop, locals
of nested parallel loops (which run serially), locals assigned after a ``break`` in two
loops, and array-valued reductions (``y += x[i]`` in a ``kd.prange``)."""

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source, nonzero_floats, with_threads

import kdsl as kd


@kd.kernel
def chained_reductions(b, n: kd.i64):
    m1 = 60
    for _i in kd.prange(b.shape[0]):
        m1 = min(m1, n)
    m2 = -90
    for _i in kd.prange(b.shape[0]):
        m2 = max(m2, n)
    m3 = 78
    for i in kd.prange(b.shape[0]):
        if b[(m2 if b[n] < (n if min(m2, b[m1 % 37]) % 3 == 0 else i) else i) % 37] < 0:
            continue
        m3 = max(m3, i)
    return m3


def test_loop_reading_reductions_of_two_fused_loops_is_not_fused_with_them():
    b = np.arange(37, dtype=np.int32)
    assert check(chained_reductions, b, 3) == 78
    b[5] = -4
    check(chained_reductions, b, 5)


@kd.kernel
def three_loops_each_reading_the_last(x, out):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i]
    t = 0.0
    for i in kd.prange(x.shape[0]):
        t += x[i] * x[i]
    for i in kd.prange(x.shape[0]):
        out[i] = x[i] * s - t
    return s, t


def test_fused_reductions_feeding_a_third_loop(rng):
    x = nonzero_floats(rng, 100, np.float64)
    check(three_loops_each_reading_the_last, x, np.zeros(100), rtol=1e-12)


# --- returns of vectors from loops -----------------------------------------------------


@kd.kernel
def first_vector_over(a: kd.Array[kd.vec3], h: kd.f32):
    v = kd.vec3(0.0)
    for j in range(a.shape[0]):
        v = a[j]
        if v[0] > h:
            return kd.i64(j), v
    return kd.i64(0), v


def test_tuple_with_a_vector_returned_from_a_loop_and_after_it():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    j, v = check(first_vector_over, a, 2.0)
    assert j == 1 and list(v) == [3.0, 4.0, 5.0]
    j, v = check(first_vector_over, a, 100.0)
    assert j == 0 and list(v) == [9.0, 10.0, 11.0]


def test_conflicting_returns_name_the_return_value_not_an_internal_local():
    k = kernel_from_source("""
        @kd.kernel
        def k(a: kd.Array[kd.vec3]):
            for j in range(a.shape[0]):
                if a[j][0] > 2.0:
                    return a[j]
            return kd.i64(0)
    """)
    with pytest.raises(kd.CompileError, match="return value 1: vec3 and i64") as error:
        k(np.zeros((3, 3), np.float32))
    assert "$" not in str(error.value)


# --- locals of loops -------------------------------------------------------------------


@kd.kernel
def count_in_nested_ndrange(out, m: kd.i64):
    for i in kd.prange(out.shape[0]):
        n = 0
        for j, k in kd.ndrange(m, (1, 3)):
            if j + k > i:
                n += 1
                out[i, n] = j * 10 + k
        out[i, 0] = n


def test_local_of_an_outer_iteration_counted_in_a_nested_ndrange():
    out = np.zeros((6, 8), np.int64)
    check(count_in_nested_ndrange, out, 3)
    assert list(out[:, 0]) == [6, 5, 3, 1, 0, 0]


@kd.kernel
def nested_prange_running_sum(x, out):
    for i in kd.prange(out.shape[0]):
        s = 0.0
        for j in kd.prange(x.shape[0]):
            s += x[j]
            out[i, j] = s * i
        out[i, x.shape[0]] = s


def test_local_read_inside_a_nested_prange_is_its_running_value(rng):
    x = nonzero_floats(rng, 7, np.float64)
    check(nested_prange_running_sum, x, np.zeros((5, 8)), rtol=1e-12)


@kd.kernel
def neighbours_in_two_loops(pos: kd.Array[kd.vec2], nbr: kd.Array[kd.i64], out: kd.Array[kd.vec2]):
    for j in range(nbr.shape[0]):
        if nbr[j] < 0:
            break
        d = pos[nbr[j]]
        out[0] += d
    for j in range(nbr.shape[0]):
        if nbr[j] < 0:
            break
        d = pos[nbr[j]]
        out[1] += d * 2.0


def test_local_assigned_after_a_break_in_two_loops():
    pos = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = np.zeros((2, 2), np.float32)
    check(neighbours_in_two_loops, pos, np.array([1, 2, -1, 3]), out)
    np.testing.assert_array_equal(out, [[6, 8], [12, 16]])


# --- array-valued reductions -----------------------------------------------------------


@kd.kernel
def row_sum(x):
    y = np.zeros(4)
    for i in kd.prange(x.shape[0]):
        y += x[i]
    return y


@kd.kernel
def histogram_like(x, y):
    for i in kd.prange(x.shape[0]):
        y -= x[i] * 0.5
        y[1:] += 1.0


@kd.kernel
def into_int_array(x, y):
    for i in kd.prange(x.shape[0]):
        y += x[i]


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("rows", [5, 3000])
def test_numba_array_reduction_in_prange(threads, rows, rng):
    x = nonzero_floats(rng, (rows, 4), np.float64)
    y = with_threads(threads, check, row_sum, x, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(y, x.sum(axis=0), rtol=1e-9)


@pytest.mark.parametrize("threads", [1, 3])
def test_in_place_array_updates_accumulate_across_iterations(threads, rng):
    x = nonzero_floats(rng, (2000, 3), np.float32)
    y = np.ones(3, np.float32)
    with_threads(threads, check, histogram_like, x, y, rtol=1e-4, atol=1e-2)
    xi = rng.integers(-5, 5, (500, 6))
    with_threads(threads, check, into_int_array, xi, np.zeros(6, np.int64))


def test_in_place_array_update_keeps_numpy_casting_rules():
    k = kernel_from_source("""
        @kd.kernel
        def k(x, y):
            for i in kd.prange(x.shape[0]):
                y += x[i]
    """)
    with pytest.raises(kd.CompileError, match="in place"):
        k(np.ones((3, 2)), np.zeros(2, np.int64))
    k2 = kernel_from_source("""
        @kd.kernel
        def k(x, y):
            for i in kd.prange(x.shape[0]):
                y *= x[i]
    """)
    with pytest.raises(kd.CompileError, match=r"only y \+= e and y -= e"):
        k2(np.ones((3, 2)), np.zeros(2))

"""``kd.argmin``/``kd.argmax`` (and NumPy's) in kernels, over the whole array (a flat
index, as NumPy) and along an axis; boolean-mask assignment (``a[a < 0] = 0``,
``a[mask] = b[mask]``, ``a[mask] += v``) as in NumPy."""

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats, nonzero_ints, with_threads

import kdsl as kd


@kd.kernel
def extremes(v, m, t):
    return (kd.argmin(v), kd.argmax(v), np.argmin(m), np.argmax(m), kd.argmin(m, axis=0),
            kd.argmax(m, axis=1), kd.argmin(t, axis=-1), kd.argmax(t, axis=1), kd.argmax(t),
            kd.argmin(v * v - 1.0))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_argmin_argmax_against_numpy(dtype, threads, rng):
    if np.dtype(dtype).kind == "f":
        v, m, t = (nonzero_floats(rng, s, dtype) for s in (13, (5, 7), (3, 4, 6)))
    else:  # few distinct values: ties, where the first index wins
        v, m, t = (rng.integers(0, 4, s).astype(dtype) for s in (13, (5, 7), (3, 4, 6)))
    got = with_threads(threads, check, extremes, v, m, t)
    expected = (np.argmin(v), np.argmax(v), np.argmin(m), np.argmax(m), np.argmin(m, axis=0),
                np.argmax(m, axis=1), np.argmin(t, axis=-1), np.argmax(t, axis=1), np.argmax(t),
                np.argmin(v * v - 1.0))
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
        assert np.asarray(g).dtype == np.int64


def test_nan_is_the_extreme_as_in_numpy():
    v = np.array([3.0, 1.0, np.nan, 0.5, np.nan])
    m = np.array([[1.0, np.nan, 2.0], [0.0, 5.0, -1.0]])
    got = check(extremes, v, m, np.zeros((2, 2, 2)))
    assert got[0] == 2 and got[1] == 2 and got[2] == 1 and got[3] == 1
    np.testing.assert_array_equal(got[4], [1, 0, 1])
    np.testing.assert_array_equal(got[5], [1, 1])


@kd.kernel
def first_extremes_of_rows(m, out):
    for i in kd.prange(m.shape[0]):
        out[i] = kd.argmax(m[i]) * 100 + kd.argmin(m[i, :])


def test_argmax_of_a_row_inside_a_parallel_loop(rng):
    m = nonzero_floats(rng, (9, 8))
    out = np.zeros(9, dtype=np.int64)
    check(first_extremes_of_rows, m, out)
    np.testing.assert_array_equal(out, m.argmax(axis=1) * 100 + m.argmin(axis=1))


@kd.kernel
def argmin_only(a):
    return kd.argmin(a)


def test_argmin_of_an_empty_array_is_minus_one_compiled():
    assert argmin_only(np.zeros(0)) == -1
    with pytest.raises(ValueError):
        argmin_only.python(np.zeros(0))


@pytest.mark.parametrize("source,message", [
    ("kd.argmin(a, axis=2)", "axis 2 is out of range"),
    ("kd.argmin(a[0, 0])", "needs an array"),
    ("kd.argmax(a, keepdims=True)", "unsupported keyword argument 'keepdims'"),
])
def test_argmin_errors(source, message):
    from kdsl_cpu_util import kernel_from_source

    kernel = kernel_from_source(f"@kd.kernel\ndef k(a):\n    return {source}\n")
    with pytest.raises(kd.CompileError, match=message):
        kernel(np.ones((2, 2)))


@kd.kernel
def clip_and_copy(a, b, mask, limit: kd.f64):
    a[a < 0] = 0
    a[a > limit] = limit
    b[mask] = a[mask]
    b[~mask] += 1.5
    a[(a > 0.5) & mask] *= 2


@pytest.mark.parametrize("shape", [(17,), (4, 6), (2, 3, 5)])
def test_mask_assignment_against_numpy(shape, rng):
    a = nonzero_floats(rng, shape, np.float64, lo=0.1, hi=1.5)
    b = nonzero_floats(rng, shape, np.float64)
    mask = rng.random(shape) < 0.5
    expected_a, expected_b = a.copy(), b.copy()
    expected_a[expected_a < 0] = 0
    expected_a[expected_a > 1.2] = 1.2
    expected_b[mask] = expected_a[mask]
    expected_b[~mask] += 1.5
    expected_a[(expected_a > 0.5) & mask] *= 2
    check(clip_and_copy, a, b, mask, 1.2)
    np.testing.assert_array_equal(a, expected_a)
    np.testing.assert_array_equal(b, expected_b)


@kd.kernel
def masked_int(a):
    a[a % 3 == 0] = -1
    a[a > 10] -= 10


def test_mask_assignment_of_integers(rng):
    a = nonzero_ints(rng, (5, 5), np.int32, 0, 30)
    expected = a.copy()
    expected[expected % 3 == 0] = -1
    expected[expected > 10] -= 10
    check(masked_int, a)
    np.testing.assert_array_equal(a, expected)


@kd.kernel
def masked_vectors(pos: kd.Array[kd.vec3], inside):
    pos[inside] = kd.vec3(0.0, 1.0, 2.0)


def test_mask_assignment_of_an_array_of_vectors(rng):
    pos = nonzero_floats(rng, (6, 3))
    inside = np.array([True, False, True, True, False, False])
    check(masked_vectors, pos, inside)
    assert pos[0].tolist() == [0.0, 1.0, 2.0] and pos[1].tolist() != [0.0, 1.0, 2.0]


@pytest.mark.parametrize("statement,message", [
    ("a[a > 0] = b", "takes a scalar, or b\\[mask\\] with the same mask"),
    ("a[b > 0] = b[a > 0]", "reading a\\[mask\\] \\(a compressed copy\\) is not supported"),
    ("a[a[0] > 0] = 1.0", "as many axes as the array"),
    ("a[a > 0] += b", "a\\[mask\\] op= b takes a scalar"),
])
def test_mask_assignment_errors(statement, message):
    from kdsl_cpu_util import kernel_from_source

    kernel = kernel_from_source(f"@kd.kernel\ndef k(a, b):\n    {statement}\n")
    with pytest.raises(kd.CompileError, match=message):
        kernel(np.ones((2, 2)), np.ones((2, 2)))

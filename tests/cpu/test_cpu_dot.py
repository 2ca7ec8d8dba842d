"""``np.dot`` and ``@`` on arrays in kernels, as in NumPy: 1-D.1-D is a scalar, 2-D.1-D
and 1-D.2-D are vectors, 2-D.2-D a matrix; ``np.dot`` with a scalar multiplies."""

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats, nonzero_ints

import kdsl as kd


@kd.kernel
def products(v, w, m, n):
    return np.dot(v, w), v @ w, np.dot(m, v), v @ m, np.dot(v, m), np.dot(m, n), kd.dot(m, v)


@kd.kernel
def scaled(v, s):
    return np.dot(s, v), np.dot(v, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("size", [1, 5, 64])
def test_dot_and_matmul_forms_against_numpy(dtype, size, rng):
    v, w = nonzero_floats(rng, size, dtype), nonzero_floats(rng, size, dtype)
    m, n = nonzero_floats(rng, (size, size), dtype), nonzero_floats(rng, (size, 3), dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    got = check(products, v, w, m, n, rtol=rtol, atol=rtol)
    expected = (np.dot(v, w), v @ w, m @ v, v @ m, v @ m, m @ n, m @ v)
    for g, e in zip(got, expected):
        assert np.asarray(g).dtype == np.asarray(e).dtype and np.shape(g) == np.shape(e)
        np.testing.assert_allclose(g, e, rtol=rtol * 10, atol=rtol * 10)


def test_dot_of_integer_arrays_keeps_their_type(rng):
    v = nonzero_ints(rng, 9, np.int32)
    m, n = nonzero_ints(rng, (9, 9), np.int32), nonzero_ints(rng, (9, 4), np.int32)
    got = check(products, v, v, m, n)
    assert got[0] == np.dot(v, v) and got[0].dtype == np.int32
    np.testing.assert_array_equal(got[3], v @ m)
    np.testing.assert_array_equal(got[5], m @ n)


def test_dot_with_a_scalar_multiplies(rng):
    v = nonzero_floats(rng, 6, np.float64)
    got = check(scaled, v, 1.5)
    np.testing.assert_array_equal(got[0], 1.5 * v)
    np.testing.assert_array_equal(got[1], 2 * v)


@kd.kernel
def vector_matrix_rows(x, w, out):
    for i in range(x.shape[0]):
        out[i, :] = x[i, :] @ w  # each row through a weight matrix


def test_row_vector_times_matrix_in_a_loop(rng):
    x, w = nonzero_floats(rng, (5, 4)), nonzero_floats(rng, (4, 3))
    out = np.zeros((5, 3), dtype=np.float32)
    check(vector_matrix_rows, x, w, out, rtol=1e-5)
    np.testing.assert_allclose(out, x @ w, rtol=1e-5)


@pytest.mark.parametrize("shapes,message", [
    (((3,), (4,)), "dot of 1-D arrays: the sizes"),
    (((3,), (4, 2)), "matmul: the inner sizes"),
])
def test_mismatched_sizes_are_value_errors(shapes, message):
    @kd.kernel
    def product(a, b):
        return np.dot(a, b)

    a, b = (np.ones(s) for s in shapes)
    with pytest.raises(ValueError, match=message):
        product(a, b)


def test_three_dimensional_matmul_is_a_compile_error():
    @kd.kernel
    def product(a, b):
        return a @ b

    with pytest.raises(kd.CompileError, match="1-D and 2-D arrays, got 3-D @ 1-D"):
        product(np.ones((2, 2, 2)), np.ones(2))

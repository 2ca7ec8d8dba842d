"""Tensor expressions (API.md section 7), reductions and ``@``: kd.sum/mean/min/max and
np.sum/... over all axes or one (0, 1, -1, ...), with keepdims, on float, int, uint8 and
bool arrays of any layout (NumPy's result dtypes: sum of int32 is int64, mean of ints is
float64), reductions of expressions, empty arrays; 2-D @ 2-D and 2-D @ 1-D of any layout
and dtype, shape errors."""

import numpy as np
import pytest
from kdsl_cpu_util import nonzero_floats, nonzero_ints, positive_floats
from kdsl_tensor_util import ExprKernel, against_numpy, in_layout

import kdsl as kd

RED_2D = [
    "kd.sum(a)", "kd.sum(a, axis=0)", "kd.sum(a, axis=1, keepdims=True)", "kd.mean(a)",
    "kd.mean(a, axis=-1)", "kd.min(a, axis=0, keepdims=True)", "kd.max(a)", "np.max(a, axis=1)",
    "np.sum(a, keepdims=True)", "np.mean(a, axis=0, keepdims=True)", "kd.min(a)",
]
red_2d = ExprKernel("a", RED_2D)


def test_reductions_2d_f32(rng):
    a = positive_floats(rng, (13, 9))  # positive: no cancellation, rtol holds
    red_2d.check(a, rtol=1e-5)


def test_reductions_2d_int32_any_layout(rng):
    for layout in ("transposed", "reversed", "strided"):
        a = in_layout(lambda s: nonzero_ints(rng, s, np.int32, -1000, 1000), (13, 9), layout)
        expected = red_2d.check(a, rtol=1e-14)
        assert expected[0].dtype == np.int64 and expected[3].dtype == np.float64
        assert expected[6].dtype == np.int32


METHODS_2D = ["a.sum()", "a.sum(0)", "a.mean(axis=1, keepdims=True)", "(a * a).max(axis=-1)",
              "a.T.min(1)", "a[1:, ::2].sum(axis=0)", "a.max(axis=0).sum()", "a.argmax()"]
methods_2d = ExprKernel("a", METHODS_2D)


def test_reduction_methods_of_arrays_as_numpy(rng):
    methods_2d.check(positive_floats(rng, (7, 6)), rtol=1e-12)


RED_3D = ["kd.sum(a, axis=0)", "kd.mean(a, axis=1)", "kd.max(a, axis=2, keepdims=True)",
          "kd.min(a, axis=-2)", "kd.sum(a, axis=-1, keepdims=True)", "kd.mean(a)"]
red_3d = ExprKernel("a", RED_3D)


def test_reductions_3d_every_axis(rng):
    a = nonzero_floats(rng, (4, 5, 6), np.float64)
    red_3d.check(a, rtol=1e-13, atol=1e-13)


RED_1D = ["kd.sum(a)", "kd.mean(a)", "kd.min(a)", "kd.max(a)"]
red_1d = ExprKernel("a", RED_1D)


@pytest.mark.parametrize("values", [
    np.array([200, 255, 3, 0, 17], np.uint8),
    np.array([True, False, True, True]),
    np.array([2**31 - 1, -2**31, 5, 2**31 - 1, -7], np.int32),
    np.array([-2**31, -2**31], np.int32),
    np.array([2**31 - 1], np.int32),
], ids=["uint8", "bool", "int32_extremes", "int32_all_min", "int32_one_max"])
def test_reduction_dtypes_and_extremes(values):
    red_1d.check(values, rtol=1e-15)


def test_mean_of_ints_is_float64_exactly(rng):
    a = nonzero_ints(rng, 1001, np.int64, -10**6, 10**6)
    expected = red_1d.check(a)
    assert expected[1].dtype == np.float64


RED_EXPR = [
    "kd.sum(a * b)", "kd.max(abs(a - b))", "kd.mean((a - kd.mean(a)) ** 2)",
    "kd.sum(a[1:] * a[:-1])", "a - kd.mean(a, axis=0)", "a / kd.sum(abs(a), axis=1, keepdims=True)",
    "kd.min(kd.where(a > b, a, b), axis=1)", "kd.sum(a[:, None, :] * b[None, :, :], axis=-1)",
]
red_expr = ExprKernel("a, b", RED_EXPR)


def test_reductions_of_expressions(rng):
    for layout in ("transposed", "reversed"):  # one specialisation
        def make(s):
            return nonzero_floats(rng, s, np.float64)
        a, b = in_layout(make, (7, 5), layout), in_layout(make, (7, 5), layout)
        red_expr.check(a, b, rtol=1e-12, atol=1e-12)


@kd.kernel
def normalise_rows(a, out):
    out[:] = a / kd.sum(a, axis=1, keepdims=True)
    s = kd.sum(out)
    for i in kd.prange(out.shape[0]):
        out[i, 0] += s


def test_reduction_result_feeds_loops_and_expressions(rng):
    a = positive_floats(rng, (6, 8), np.float64)

    def reference(a, out):
        out[:] = a / np.sum(a, axis=1, keepdims=True)
        out[:, 0] += np.sum(out)

    against_numpy(normalise_rows, (a, np.zeros((6, 8))), reference, rtol=1e-13)


RED_EMPTY = ["kd.sum(a)", "kd.sum(a, axis=0)", "kd.sum(a, axis=1)", "kd.mean(a, axis=1)"]
red_empty = ExprKernel("a", RED_EMPTY)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)], ids=str)
def test_reductions_of_empty_arrays(shape):
    a = np.zeros(shape, np.float32)
    red_empty.check(a)


@kd.kernel
def min_of(a):
    return kd.min(a)


def test_min_of_empty_array_is_a_value_error():
    with pytest.raises(ValueError):
        min_of(np.zeros(0, np.float32))


# --- @ ---------------------------------------------------------------------------------

MATMUL = ["a @ b", "a @ v", "(a * 2) @ (b - 1)", "a @ b @ b.T", "a.T[:, :2] @ v[:2]",
          "a[::-1, 1:] @ b[1:, ::2]"]
matmul = ExprKernel("a, b, v", MATMUL)


@pytest.mark.parametrize("dtype, layouts", [
    (np.float64, ["C"]), (np.int32, ["C"]), (np.float32, ["transposed", "reversed", "strided"]),
])
def test_matmul_shapes_dtypes_layouts(dtype, layouts, rng):
    for layout in layouts:
        def make(s):
            return (nonzero_ints(rng, s, dtype, -9, 9) if np.dtype(dtype).kind == "i"
                    else nonzero_floats(rng, s, dtype))
        a, b, v = in_layout(make, (6, 5), layout), in_layout(make, (5, 4), layout), make((5,))
        tol = dict(rtol=2e-6, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-12)
        matmul.check(a, b, v, **tol)


@kd.kernel
def matmul_only(a, b):
    return a @ b


@pytest.mark.parametrize("sa, sb", [
    ((1, 1), (1, 1)), ((7, 1), (1, 3)), ((0, 3), (3, 2)), ((3, 0), (0, 2)), ((5, 8), (8, 1)),
    ((2, 3), (3, 0)), ((17, 33), (33, 9)), ((4, 6), (6,)), ((0, 6), (6,)), ((3, 0), (0,)),
], ids=str)
def test_matmul_sizes(sa, sb, rng):
    a, b = nonzero_floats(rng, sa, np.float64), nonzero_floats(rng, sb, np.float64)
    against_numpy(matmul_only, (a, b), np.matmul, rtol=1e-13, atol=1e-13)


def test_matmul_mixed_dtypes(rng):
    a, b = nonzero_floats(rng, (3, 4)), nonzero_ints(rng, (4, 2), np.int32)
    assert (a @ b).dtype == np.float64
    against_numpy(matmul_only, (a, b), np.matmul, rtol=1e-13)


@pytest.mark.parametrize("sa, sb", [((2, 3), (4, 2)), ((2, 3), (2,)), ((2, 0), (1, 3))], ids=str)
def test_matmul_inner_size_mismatch_is_a_value_error(sa, sb):
    with pytest.raises(ValueError) as info:
        matmul_only(np.ones(sa), np.ones(sb))
    assert str(sa[1]) in str(info.value) and str(sb[0]) in str(info.value)


@kd.kernel
def vector_at_matrix(v, m):
    return v @ m


def test_1d_at_2d_is_a_vector_as_in_numpy(rng):
    v, m = rng.random(3), rng.random((3, 2))
    np.testing.assert_allclose(vector_at_matrix(v, m), v @ m, rtol=1e-13)

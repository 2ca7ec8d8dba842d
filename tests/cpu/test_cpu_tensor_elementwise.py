"""Tensor expressions (API.md section 7), elementwise: arithmetic and math on whole arrays,
NumPy 2's dtype rules (weak Python literals, int / int -> f64, bool arrays from
comparisons), broadcasting, layouts, and arrays of vectors. Compared with NumPy and with
``kernel.python``."""

import numpy as np
import pytest
from kdsl_cpu_util import assert_same, nonzero_floats, nonzero_ints, positive_floats
from kdsl_tensor_util import ExprKernel, against_numpy, in_layout

import kdsl as kd

F32_MATH = dict(rtol=2e-6, atol=1e-7)
F64_MATH = dict(rtol=1e-13, atol=1e-15)

# --- float arithmetic and math ---------------------------------------------------------

# Exact in NumPy and in kdsl without fast-math (with it, `x / 3.0` becomes a multiplication
# by a shared reciprocal and `a * b + c` may fuse: last-bit differences).
FLOAT_EXACT = [
    "a + b", "a - b", "a * b", "a / b", "-abs(a)", "np.abs(a) * 0.1", "0.3 - b / 3.0",
    "2.5 / a", "a ** 2", "a // b", "a % b", "kd.sqrt(abs(a))", "kd.min(a, b)",
    "np.maximum(a, b)", "kd.floor(a) + kd.ceil(b)", "kd.clamp(a, -1.0, 1.0)",
    "kd.where(a < 0.0, -1.0, a)", "(a > b) * a",
]
FLOAT_APPROX = [
    "kd.exp(a)", "np.log(abs(a))", "kd.sin(a) + kd.cos(b)", "kd.tanh(a)",
    "kd.pow(abs(a), b)", "a ** 3", "a * b + 1.0 / b",
    "kd.exp(b * 0.5) * a - kd.sqrt(a * a + b * b)",
]

float_exact = ExprKernel("a, b", FLOAT_EXACT, fastmath=False)
float_approx = ExprKernel("a, b", FLOAT_APPROX)


def _float_inputs(rng, dtype, shape, layout):
    def make(s):
        return nonzero_floats(rng, s, dtype)
    return in_layout(make, shape, layout), in_layout(make, shape, layout)


def test_float_elementwise_exact(rng):
    a, b = _float_inputs(rng, np.float32, (37,), "C")
    float_exact.check(a, b)


@pytest.mark.parametrize("dtype, shape, layout", [
    (np.float32, (40,), "C"), (np.float64, (4, 9), "transposed"),
])
def test_float_elementwise_math(dtype, shape, layout, rng):
    a, b = _float_inputs(rng, dtype, shape, layout)
    tol = F32_MATH if dtype == np.float32 else F64_MATH
    float_approx.check(a, b, **tol)


ND_EXPRS = ["kd.where(a > b, kd.sqrt(abs(a)), -b) * 0.5", "kd.max(a, b) / (abs(a) + 1.0)"]
nd_exprs = ExprKernel("a, b", ND_EXPRS, fastmath=False)


@pytest.mark.parametrize("shape, layouts", [
    ((37,), ["reversed", "strided"]), ((5, 7), ["transposed", "reversed", "strided"]),
    ((2, 3, 4), ["transposed", "strided"]),
], ids=str)
def test_float_elementwise_2d_3d_layouts(shape, layouts, rng):
    for layout in layouts:
        a, b = _float_inputs(rng, np.float64 if len(shape) == 1 else np.float32, shape, layout)
        nd_exprs.check(a, b)


@kd.kernel
def atan2_arrays(a, b):
    return kd.atan2(a, b)


def test_atan2_of_arrays(rng):
    a, b = _float_inputs(rng, np.float64, (11,), "C")
    against_numpy(atan2_arrays, (a, b), np.arctan2, **F64_MATH)


# --- weak literals: f32 bit for bit -----------------------------------------------------

WEAK_F32 = ["a * 0.1", "a * 0.1 + b * 0.3 - 1.5", "(a - 0.7) / 3.0", "1e10 * a", "a * 1e-3 + 7",
            "kd.sqrt(abs(a)) * 0.3", "kd.where(a > 0.25, a * 0.2, b - 0.1)", "-(a + 1 / 3)",
            "(a + b) * (a - b) * 0.5"]
weak_f32 = ExprKernel("a, b", WEAK_F32, fastmath=False)


def test_f32_with_weak_literals_is_bit_for_bit(rng):
    a, b = _float_inputs(rng, np.float32, (64,), "C")
    expected = weak_f32.check(a, b)
    assert all(e.dtype == np.float32 for e in expected)


# --- integers ---------------------------------------------------------------------------

INT_EXPRS = [
    "a + b - 3", "a * b", "a / b", "a // b", "a % b", "-abs(a)", "a + 1.5", "7 // b",
    "a ** 2", "kd.min(a, b)", "kd.where(a > 0, a, 0.5)", "kd.sqrt(abs(a))", "a < b",
    "(a > 0) & ~(b == 3)",
]
int_exprs = ExprKernel("a, b", INT_EXPRS)
INT_EXPRS_SMALL = ["a // b - a % b", "a / b", "kd.where(a > b, a * b, 3)"]
int_exprs_small = ExprKernel("a, b", INT_EXPRS_SMALL)


@pytest.mark.parametrize("dtype, layouts", [
    (np.int32, ["C"]), (np.int64, ["reversed", "strided"]),
])
def test_int_elementwise_dtypes_and_floor_semantics(dtype, layouts, rng):
    small = dtype == np.int64
    kernel = int_exprs_small if small else int_exprs
    for layout in layouts:
        def make(s):
            return nonzero_ints(rng, s, dtype, -20, 20)
        a, b = in_layout(make, (41,), layout), in_layout(make, (41,), layout)
        expected = kernel.check(a, b)
        assert expected[0].dtype == dtype  # int literals are weak
        assert expected[1 if small else 2].dtype == np.float64  # int / int


UINT8_EXPRS = ["a + b", "a - b", "a * 3", "a // b", "a / b"]
uint8_exprs = ExprKernel("a, b", UINT8_EXPRS)


def test_uint8_wraps_like_numpy(rng):
    a = rng.integers(1, 256, 50).astype(np.uint8)
    b = rng.integers(1, 256, 50).astype(np.uint8)
    uint8_exprs.check(a, b)


BOOL_EXPRS = ["a & b", "a | b", "a ^ b", "~a", "a + b", "a * b", "kd.where(a, 1, 2)",
              "a * 1.5"]
bool_exprs = ExprKernel("a, b", BOOL_EXPRS)


def test_bool_arrays(rng):
    a, b = rng.random(30) < 0.5, rng.random(30) < 0.5
    bool_exprs.check(a, b)


DIVISIONS = ["a // b", "a % b", "a / b"]
divisions = ExprKernel("a, b", DIVISIONS, fastmath=False)


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_division_by_zero_as_numpy(dtype):
    a = np.array([7, -7, 0, 5, -3, 0, 9], dtype)
    b = np.array([0, 0, 0, 2, -2, 3, -4], dtype)
    divisions.check(a, b)  # ints: 0; floats: inf / nan, as NumPy (which only warns)


@kd.kernel
def floor_of_ints(a):
    return kd.floor(a), kd.ceil(a)


def test_floor_of_int_array_keeps_dtype(rng):
    a = nonzero_ints(rng, 9, np.int32)
    against_numpy(floor_of_ints, (a,), lambda a: (np.floor(a), np.ceil(a)))


# --- promotion between arrays and with strong scalars -----------------------------------

PROMOTE = ["kd.where(a > b, a * b, b - a)"]
promote = ExprKernel("a, b", PROMOTE, fastmath=False)


@pytest.mark.parametrize("da, db", [
    (np.float32, np.float64), (np.int32, np.int64), (np.int32, np.float32),
    (np.int64, np.float32), (np.uint8, np.int32), (np.bool_, np.float32), (np.uint8, np.float32),
])
def test_promotion_between_arrays(da, db, rng):
    def values(dtype):
        if dtype == np.bool_:
            return rng.random(23) < 0.5
        if np.dtype(dtype).kind == "f":
            return nonzero_floats(rng, 23, dtype)
        return nonzero_ints(rng, 23, dtype, 1 if dtype == np.uint8 else -40, 40)
    a, b = values(da), values(db)
    promote.check(a, b)


@kd.kernel(fastmath=False)
def times_scalar(a, s):
    return s - a * s


@pytest.mark.parametrize("dtype, scalar", [
    (np.float32, 0.1), (np.float32, np.float64(0.1)), (np.int32, 3), (np.int32, np.int64(3)),
    (np.int32, 2.5), (np.float64, np.float32(0.1)),
], ids=lambda v: type(v).__name__ if not isinstance(v, type) else v.__name__)
def test_strong_and_weak_scalar_arguments(dtype, scalar, rng):
    a = (nonzero_floats(rng, 17, dtype) if np.dtype(dtype).kind == "f"
         else nonzero_ints(rng, 17, dtype))
    against_numpy(times_scalar, (a, scalar), lambda a, s: s - a * s)


@kd.kernel
def annotated_scalar(a: kd.Array[kd.f32], s: kd.f64, t: kd.f32):
    return a * s, a * t + 1.0


def test_annotated_scalar_parameters(rng):
    a = nonzero_floats(rng, 13)
    against_numpy(annotated_scalar, (a, 0.1, 0.3),
                  lambda a, s, t: (a * np.float64(s), a * np.float32(t) + 1.0), rtol=1e-6)


# --- broadcasting ----------------------------------------------------------------------

BROADCAST = ["kd.where(a > b, a * b, b - 1.0)"]
broadcast = ExprKernel("a, b", BROADCAST, fastmath=False)

SHAPE_PAIRS = [
    ((5,), (5,)), ((1,), (5,)), ((5,), (1,)), ((0,), (1,)),
    ((3, 1), (4,)), ((3, 4), (3, 1)), ((1, 4), (3, 1)), ((3, 4), (1, 1)), ((0, 4), (4,)),
    ((2, 1, 3), (4, 1)), ((2, 3, 4), (1, 3, 1)), ((1, 3, 1), (2, 1, 4)),
]


@pytest.mark.parametrize("sa, sb", SHAPE_PAIRS, ids=str)
def test_broadcasting(sa, sb, rng):
    a, b = nonzero_floats(rng, sa, np.float64), nonzero_floats(rng, sb, np.float64)
    broadcast.check(a, b)


@pytest.mark.parametrize("sa, sb", [((3, 4), (3, 1)), ((1, 4), (3, 1))], ids=str)
def test_broadcasting_non_contiguous(sa, sb, rng):
    def make(s):
        return nonzero_floats(rng, s, np.float64)
    a, b = in_layout(make, sa, "transposed"), in_layout(make, sb, "reversed")
    broadcast.check(a, b)


@kd.kernel
def outer_products(x, y):
    return x[:, None] * y[None, :], x[:, None] - x, y[None] + x[:, None, None]


def test_new_axes_broadcast(rng):
    x, y = nonzero_floats(rng, 6, np.float64), nonzero_floats(rng, 4, np.float64)
    against_numpy(outer_products, (x, y), lambda x, y: (
        x[:, None] * y[None, :], x[:, None] - x, y[None] + x[:, None, None]))


@kd.kernel
def broadcast_into(out2, out3, row, col, s: kd.f32):
    out2[:] = row
    out2[1:] += col[1:, None] * s
    out3[:] = out2 - col[:, None]
    out3[0] = 7


def test_broadcast_into_destinations(rng):
    row, col = nonzero_floats(rng, 5), nonzero_floats(rng, 4)
    out2, out3 = np.zeros((4, 5), np.float32), np.zeros((3, 4, 5), np.float32)

    def reference(out2, out3, row, col, s):
        out2[:] = row
        out2[1:] += col[1:, None] * np.float32(s)
        out3[:] = out2 - col[:, None]
        out3[0] = 7

    against_numpy(broadcast_into, (out2, out3, row, col, 0.5), reference, rtol=1e-6)


# --- arrays of vectors -----------------------------------------------------------------


@kd.kernel
def vec3_step(pos: kd.Array[kd.vec3], vel: kd.Array[kd.vec3], dt: kd.f32):
    pos += dt * vel
    vel[1:] -= 0.5 * vel[:-1]


def _vec3_step_reference(pos, vel, dt):
    pos += np.float32(dt) * vel
    vel[1:] -= np.float32(0.5) * vel[:-1]


def test_vec3_augmented_assignment(rng):
    pos, vel = nonzero_floats(rng, (33, 3)), nonzero_floats(rng, (33, 3))
    against_numpy(vec3_step, (pos, vel, 0.25), _vec3_step_reference, rtol=1e-6)


def test_vec3_augmented_assignment_strided(rng):
    pos = nonzero_floats(rng, (66, 3))[::2]
    vel = nonzero_floats(rng, (33, 3))[::-1]
    against_numpy(vec3_step, (pos, vel, 0.25), _vec3_step_reference, rtol=1e-6)


@kd.kernel
def vec3_exprs(pos: kd.Array[kd.vec3], vel: kd.Array[kd.vec3], c: kd.vec3):
    return pos * 2.0 - c, pos * vel + 1.0, kd.sum(pos, axis=0), pos[::-1] - vel


def _vec3_exprs_reference(pos, vel, c):
    c = np.asarray(c, np.float32)
    return (pos * np.float32(2) - c, pos * vel + np.float32(1), np.sum(pos, axis=0),
            pos[::-1] - vel)


def test_vec3_array_expressions(rng):
    pos, vel = nonzero_floats(rng, (21, 3)), nonzero_floats(rng, (21, 3))
    # the float32 sum of 21 vectors cancels to about 1.5 in one component: its rounding
    # depends on the order of the additions (one thread's, or NumPy's pairwise) by ~2e-6
    against_numpy(vec3_exprs, (pos, vel, (1.0, 2.0, 3.0)), _vec3_exprs_reference, rtol=1e-6,
                  atol=1e-5)


@kd.kernel
def vec3_total(pos: kd.Array[kd.vec3]):
    return kd.sum(pos)


def test_vec3_total_sum_agrees_with_python(rng):
    pos = positive_floats(rng, (12, 3))
    compiled = vec3_total(pos)
    np.testing.assert_allclose(compiled, pos.sum(axis=0), rtol=1e-5)
    assert_same(compiled, vec3_total.python(pos), rtol=1e-5)


# --- large arrays and threads ----------------------------------------------------------


@kd.kernel
def saxpy_like(x, y, out):
    out[:] = 2.5 * x + y * y - kd.sqrt(abs(x))
    return kd.sum(out, axis=0), kd.max(y), kd.sum(x * y)


def _saxpy_like(x, y, out):
    out[:] = 2.5 * x + y * y - np.sqrt(abs(x))
    return np.sum(out, axis=0), np.max(y), np.sum(x * y)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_large_arrays_any_thread_count(threads, rng):
    x, y = positive_floats(rng, (301, 257)), nonzero_floats(rng, (301, 257))
    kd.set_num_threads(threads)  # restored by the conftest fixture
    against_numpy(saxpy_like, (x, y, np.zeros_like(x)), _saxpy_like, rtol=2e-5, atol=1e-3)

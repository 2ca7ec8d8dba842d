"""Property tests of tensor expressions (API.md section 7): random elementwise expression
trees over 2-3 arrays of broadcasting shapes, dtypes and layouts, written as Python source
to a module file and compiled (without fast-math, so NumPy's results are exact); random
run-time shapes (a ValueError exactly when NumPy raises one) and random slices.

``KDSL_FUZZ_EXAMPLES=500`` runs more examples with fresh seeds (see kdsl_cpu_util)."""

import warnings

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from kdsl_cpu_util import assert_same, check, fuzz_settings, kernel_from_source
from kdsl_tensor_util import numpy_eval

import kdsl as kd

DTYPES = [np.float32, np.float64, np.int32, np.int64]
LITERALS = ["0.5", "1.5", "-2.0", "3", "-1", "0.25", "2"]
BINARY = [
    "({l} + {r})", "({l} - {r})", "({l} * {r})", "({l} / (abs({r}) + 1))",
    "({l} // (abs({r}) + 1))", "({l} % (abs({r}) + 1))", "kd.min({l}, {r})", "kd.max({l}, {r})",
    "kd.where({l} < {r}, {l}, {r})", "kd.where({l} >= {r}, {r}, 0.5)",
]
UNARY = ["(-{x})", "abs({x})", "kd.sqrt(abs({x}) + 1.0)", "({x} ** 2)", "({x} * {c})",
         "({c} - {x})", "({x} + {c})", "np.maximum({x}, {c})"]


@st.composite
def expressions(draw, names, depth):
    """Source text of a random elementwise expression of arrays ``names``."""
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        name = draw(st.sampled_from(names))
        return draw(st.sampled_from([name, name, f"{name}[::-1]"]))
    if draw(st.booleans()):
        x = draw(expressions(names, depth - 1))
        return draw(st.sampled_from(UNARY)).format(x=x, c=draw(st.sampled_from(LITERALS)))
    left, right = draw(expressions(names, depth - 1)), draw(expressions(names, depth - 1))
    return draw(st.sampled_from(BINARY)).format(l=left, r=right)


@st.composite
def inputs(draw, count):
    """``count`` arrays whose shapes broadcast together, of random dtypes and layouts."""
    ndim = draw(st.integers(1, 3))
    shape = [draw(st.sampled_from([1, 2, 3, 4, 5, 0] if k == 0 else [1, 2, 3, 4]))
             for k in range(ndim)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    arrays = []
    for _ in range(count):
        own = draw(st.integers(1, ndim))
        own_shape = tuple(1 if draw(st.integers(0, 2)) == 0 else s for s in shape[ndim - own:])
        dtype = draw(st.sampled_from(DTYPES))
        layout = draw(st.sampled_from(["C", "reversed", "strided"]))
        big = tuple(2 * s for s in own_shape) if layout == "strided" else own_shape
        if np.dtype(dtype).kind == "f":
            values = rng.uniform(0.25, 3.0, big) * rng.choice([-1.0, 1.0], big)
        else:
            values = rng.integers(1, 4, big) * rng.choice([-1, 1], big)
        a = values.astype(dtype)
        if layout == "reversed":
            a = a[(slice(None, None, -1),) * own]
        elif layout == "strided":
            a = a[(slice(None, None, 2),) * own]
        arrays.append(a)
    return arrays


@st.composite
def programs(draw):
    count = draw(st.integers(2, 3))
    names = [f"x{k}" for k in range(count)]
    expr = draw(expressions(names, 3))
    for name in names:  # every input is used (broadcasting covers them all)
        if name not in expr:
            expr = f"({expr} + {name})" if draw(st.booleans()) else f"kd.max({expr}, {name})"
    mode = draw(st.sampled_from(["return", "out", "reduce"]))
    reduction = (draw(st.sampled_from(["sum", "min", "max", "mean"])), draw(st.integers(-1, 3)),
                 draw(st.booleans()))
    return names, expr, draw(inputs(count)), mode, reduction


def _reduction_text(expr, inner, reduction):
    """``kd.<fn>(expr, axis=..., keepdims=...)`` for an inner value ``inner``."""
    fn, axis, keepdims = reduction
    if inner.size == 0 and fn in ("min", "max"):
        fn = "sum"  # NumPy raises for min/max of nothing (see test_cpu_tensor_reductions)
    axis_text = "None" if axis == 3 else str(axis % inner.ndim - (inner.ndim if axis < 0 else 0))
    return f"kd.{fn}({expr}, axis={axis_text}, keepdims={keepdims})", fn


@fuzz_settings(16)
@given(programs())
def test_random_elementwise_expressions_match_numpy(program):
    names, expr, arrays, mode, reduction = program
    env = dict(zip(names, arrays))
    expected = numpy_eval([expr], **env)
    params = ", ".join(names)
    if mode == "out":
        out = np.zeros(expected.shape, expected.dtype)
        kernel = kernel_from_source(f"@kd.kernel(fastmath=False)\ndef k({params}, out):\n"
                                    f"    out[:] = {expr}\n", prefix="tensor_expr")
        check(kernel, *arrays, out)
        assert_same(out, expected, what=f"out[:] = {expr}")
        return
    tol = {}
    if mode == "reduce":
        inner = expected
        expr, fn = _reduction_text(expr, inner, reduction)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # mean of nothing
            expected = numpy_eval([expr], **env)
        if fn in ("sum", "mean") and inner.dtype.kind == "f":  # summation order differs
            eps = 1e-5 if inner.dtype == np.float32 else 1e-13
            tol = dict(rtol=eps, atol=eps * float(np.sum(np.abs(inner))))
    kernel = kernel_from_source(f"@kd.kernel(fastmath=False)\ndef k({params}):\n"
                                f"    return {expr}\n", prefix="tensor_expr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_same(check(kernel, *arrays, **tol), expected, what=expr, **tol)


# --- run-time shapes: ValueError exactly when NumPy raises -------------------------------


@kd.kernel
def broadcast_and_assign(a, b, out):
    out[:] = a * b + a


SIZES = st.integers(0, 3)


@fuzz_settings(60)
@given(st.tuples(*[SIZES] * 6))
def test_random_runtime_shapes_broadcast_or_raise(sizes):
    ra, ca, rb, cb, ro, co = sizes
    a = np.arange(1, ra * ca + 1, dtype=np.float64).reshape(ra, ca)
    b = np.arange(1, rb * cb + 1, dtype=np.float64).reshape(rb, cb) * 0.5
    out = np.full((ro, co), -1.0)
    try:
        expected = out.copy()
        expected[:] = a * b + a
    except ValueError:
        before = out.copy()
        try:
            broadcast_and_assign(a, b, out)
        except ValueError:
            np.testing.assert_array_equal(out, before)
            return
        raise AssertionError(f"no ValueError for shapes {a.shape}, {b.shape} into {out.shape}") from None
    broadcast_and_assign(a, b, out)
    np.testing.assert_array_equal(out, expected)


# --- random slices -------------------------------------------------------------------------


@kd.kernel
def sliced(a, c, lo0: kd.i64, hi0: kd.i64, st0: kd.i64, lo1: kd.i64, hi1: kd.i64, st1: kd.i64):
    c[lo0:hi0:st0, lo1:hi1:st1] += 1
    return a[lo0:hi0:st0, lo1:hi1:st1] * 2, kd.sum(a[lo0:hi0:st0, lo1:hi1:st1], axis=0)


BOUNDS = st.integers(-9, 9)
STEPS = st.integers(-3, 3).filter(lambda s: s != 0)


@fuzz_settings(40)
@given(st.tuples(BOUNDS, BOUNDS, STEPS, BOUNDS, BOUNDS, STEPS), st.booleans())
def test_random_slices(bounds, transposed):
    lo0, hi0, st0, lo1, hi1, st1 = bounds
    a = np.arange(42, dtype=np.int32).reshape(6, 7) * 3 - 50
    c = np.zeros((7, 6), np.int64).T if transposed else np.zeros((6, 7), np.int64)
    s = (slice(lo0, hi0, st0), slice(lo1, hi1, st1))
    expected_c = c.copy()
    expected_c[s] += 1
    expected = (a[s] * 2, np.sum(a[s], axis=0))
    if a[s].shape[1] == 0:  # empty results: see test_empty_returned_arrays_keep_their_dtype
        result = sliced(a, c, *bounds)
        assert [r.shape for r in result] == [e.shape for e in expected]
    else:
        assert_same(check(sliced, a, c, *bounds), expected)
    np.testing.assert_array_equal(c, expected_c)

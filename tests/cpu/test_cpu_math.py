"""Math functions on scalars: kd.*, math.* and np.* spellings, against plain Python."""

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source, nonzero_floats, positive_floats

import kdsl as kd

N = 101

UNARY_SOURCE = """
@kd.kernel
def k(x, out):
    for i in kd.prange(x.shape[0]):
        out[i] = {fn}(x[i])
    return {fn}(x[0])
"""

# (function, input range); inputs stay away from poles and branch cuts
_UNARY = {
    "sqrt": (0.1, 50.0), "sin": (-3.0, 3.0), "cos": (-3.0, 3.0), "tan": (-1.2, 1.2),
    "exp": (-5.0, 5.0), "log": (0.05, 50.0), "tanh": (-3.0, 3.0), "floor": (-9.0, 9.0),
    "ceil": (-9.0, 9.0), "abs": (-9.0, 9.0),
}
_TOLERANCE = {np.float32: dict(rtol=3e-6, atol=1e-6), np.float64: dict(rtol=1e-13, atol=1e-15)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(_UNARY))
def test_unary_math(name, dtype, rng):
    lo, hi = _UNARY[name]
    x = rng.uniform(lo, hi, N).astype(dtype)
    x[x == 0] = 0.5
    out = np.zeros(N, dtype)
    k = kernel_from_source(UNARY_SOURCE.format(fn=f"kd.{name}"), prefix=f"math_{name}")
    exact = name in ("floor", "ceil", "abs", "sqrt")
    result = check(k, x, out, **({} if exact else _TOLERANCE[dtype]))
    assert isinstance(result, dtype)
    reference = getattr(np, name)(x)
    if exact:
        np.testing.assert_array_equal(out, reference)
    else:
        np.testing.assert_allclose(out, reference, **_TOLERANCE[dtype])


@pytest.mark.parametrize("spelling", ["math", "np"])
def test_math_and_numpy_spellings(spelling, rng):
    src = """
    @kd.kernel
    def k(x, out):
        for i in kd.prange(x.shape[0]):
            out[i, 0] = M.sqrt(x[i])
            out[i, 1] = M.sin(x[i])
            out[i, 2] = M.exp(x[i] * 0.1)
            out[i, 3] = M.log(x[i])
            out[i, 4] = M.floor(x[i])
            out[i, 5] = M.ceil(x[i])
            out[i, 6] = M.tanh(x[i])
            out[i, 7] = M.ATAN2(x[i], 2.0)
    """.replace("M.", f"{spelling}.").replace("ATAN2", "atan2" if spelling == "math" else "arctan2")
    k = kernel_from_source(src, prefix="spell")
    x = positive_floats(rng, N, np.float32, 0.2, 9.0)
    # math.* computes in double precision (Python floats); np.* keeps f32
    out = np.zeros((N, 8), np.float64 if spelling == "math" else np.float32)
    check(k, x, out, rtol=3e-6, atol=1e-6)


@kd.kernel
def binary_math(y, x, lo, hi, out):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = kd.atan2(y[i], x[i])
        out[i, 1] = kd.pow(kd.abs(x[i]), y[i])
        out[i, 2] = kd.clamp(y[i], lo, hi)
        out[i, 3] = kd.where(x[i] > y[i], x[i], y[i])
        out[i, 4] = kd.where(x[i] > 0.0, 1.0, -1.0)
        out[i, 5] = kd.clamp(x[i] * 2.0, -1.0, 1.0)
        out[i, 6] = kd.where(y[i] < x[i], y[i] - x[i], 0.5)
        out[i, 7] = kd.atan2(y[i], -1.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_binary_math(dtype, rng):
    x = nonzero_floats(rng, N, dtype, 0.2, 3.0)
    y = nonzero_floats(rng, N, dtype, 0.2, 3.0)
    out = np.zeros((N, 8), dtype)
    check(binary_math, y, x, -0.5, 0.75, out, **_TOLERANCE[dtype])
    np.testing.assert_array_equal(out[:, 2], np.clip(y, dtype(-0.5), dtype(0.75)))
    np.testing.assert_array_equal(out[:, 3], np.maximum(x, y))


@kd.kernel
def int_math(n, out):
    for i in kd.prange(n.shape[0]):
        out[i, 0] = kd.sqrt(n[i])
        out[i, 1] = kd.exp(n[i] * 0.01)
        out[i, 2] = kd.clamp(n[i], -5, 5)
        out[i, 3] = kd.where(n[i] > 0, n[i], 0)
        out[i, 4] = kd.atan2(n[i], 3)


def test_math_on_integers_promotes_to_f64(rng):
    n = rng.integers(1, 100, N).astype(np.int32)
    out = np.zeros((N, 5), np.float64)
    check(int_math, n, out, rtol=1e-13)


@kd.kernel
def clamp_int(n, lo, hi, out):
    for i in kd.prange(n.shape[0]):
        out[i] = kd.clamp(n[i], lo, hi)


def test_clamp_integers(rng):
    n = rng.integers(-100, 100, N)
    out = np.zeros(N, np.int64)
    check(clamp_int, n, -20, 30, out)
    np.testing.assert_array_equal(out, np.clip(n, -20, 30))


@kd.func
def softplus(x):
    return kd.log(1.0 + kd.exp(x))


@kd.kernel
def composed(x: kd.Array[kd.f64], out: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        s = kd.sin(x[i])
        c = kd.cos(x[i])
        out[i] = s * s + c * c + softplus(x[i]) - kd.sqrt(kd.exp(2.0 * x[i]))


def test_composed_math(rng):
    x = nonzero_floats(rng, N, np.float64, 0.1, 3.0)
    out = np.zeros(N)
    check(composed, x, out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out, 1.0 + np.log1p(np.exp(x)) - np.exp(x), rtol=1e-9)

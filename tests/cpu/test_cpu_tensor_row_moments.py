"""A row's mean and variance in one shifted pass (kdsl/ir/passes/tensor_row_moments.py):
layer norm's ``mean(x)`` and ``mean((x - mean(x)) ** 2)`` as one loop with two sums,
accurate against float64 NumPy on data far from zero, with an outlier, constant rows,
short rows, NaN and inf; the forms it recognises and the ones it leaves alone."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kdsl_cpu_util import nonzero_floats
from kdsl_tensor_util import against_numpy

import kdsl as kd

EPS = 1e-5


@kd.kernel
def layer_norm(x, gamma, beta, out):
    mu = kd.mean(x, axis=-1, keepdims=True)
    d = x - mu
    out[:] = d / kd.sqrt(kd.mean(d * d, axis=-1, keepdims=True) + 1e-5) * gamma + beta


@kd.kernel
def layer_norm_returned(x):
    m = kd.mean(x, axis=1, keepdims=True)
    var = kd.mean((x - m) ** 2, axis=1, keepdims=True)
    return (x - m) / kd.sqrt(var + 1e-5)


@kd.kernel
def scaled_by_sum_of_squares(x, out):
    m = kd.mean(x, axis=-1, keepdims=True)
    squares = kd.sum((x - m) * (x - m), axis=-1, keepdims=True)
    out[:] = (x - m) * squares + m


@kd.kernel(fastmath=False)
def layer_norm_exact(x, gamma, beta, out):
    mu = kd.mean(x, axis=-1, keepdims=True)
    d = x - mu
    out[:] = d / kd.sqrt(kd.mean(d * d, axis=-1, keepdims=True) + 1e-5) * gamma + beta


def np_layer_norm(x, gamma, beta, out):
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(axis=-1, keepdims=True)
    out[:] = d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + EPS) * gamma + beta


def np_layer_norm_returned(x):
    want = np.zeros_like(x)
    np_layer_norm(x, np.float64(1), np.float64(0), want)
    return want


def _data(kind: str, rng: np.random.Generator, shape: tuple) -> np.ndarray:
    normal = rng.standard_normal(shape)
    if kind == "far from zero":
        return 1e4 + normal
    if kind == "outlier first":
        return np.where(np.arange(shape[-1]) == 0, 1e4, normal)
    if kind == "constant rows":
        return np.broadcast_to(rng.uniform(-8, 8, (shape[0], 1)), shape).copy()
    if kind == "tiny spread":
        return 1e3 + 1e-2 * normal
    return normal * 3 + 1


@pytest.mark.parametrize("kind", ["ordinary", "far from zero", "outlier first", "constant rows",
                                  "tiny spread"])
@pytest.mark.parametrize("cols", [1, 3, 8, 257], ids=lambda c: f"cols{c}")
def test_f32_against_float64(kind, cols, rng):
    x = _data(kind, rng, (19, cols)).astype(np.float32)
    gamma, beta = nonzero_floats(rng, cols), nonzero_floats(rng, cols)
    # the limit: the mean itself rounded to f32 (half an ulp of 1e4 is 4.9e-4), times
    # |gamma| / sigma; NumPy's own f32 two passes are 2.5 times that far from float64
    spreads = np.std(x.astype(np.float64), axis=-1)
    spread = float(spreads[spreads > 0].min()) if (spreads > 0).any() else 1.0
    atol = 3e-6 * 4 + 2 * float(np.spacing(np.float32(np.abs(x).max()))) * 4 / min(spread, 1.0)
    against_numpy(layer_norm, (x, gamma, beta, np.zeros_like(x)), np_layer_norm,
                  rtol=1e-5, atol=atol, python=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_forms_against_numpy_and_python(dtype, rng):
    tol = dict(rtol=4e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)
    x = (rng.standard_normal((13, 40)) * 2 + 5).astype(dtype)
    gamma, beta = nonzero_floats(rng, 40, dtype), nonzero_floats(rng, 40, dtype)
    against_numpy(layer_norm, (x, gamma, beta, np.zeros_like(x)), np_layer_norm, **tol)
    np.testing.assert_allclose(layer_norm_returned(x), np_layer_norm_returned(x), **tol)
    np.testing.assert_allclose(layer_norm_returned(x), layer_norm_returned.python(x), **tol)

    def np_scaled(x, out):
        d = x - x.mean(axis=-1, keepdims=True)
        out[:] = d * (d * d).sum(axis=-1, keepdims=True) + x.mean(axis=-1, keepdims=True)

    against_numpy(scaled_by_sum_of_squares, (x, np.zeros_like(x)), np_scaled,
                  rtol=tol["rtol"] * 10, atol=tol["atol"] * 1000)


def _two_sum_loops(text: str) -> int:
    return len(re.findall(r"= for .*: (f32|f64), (f32|f64) \(", text))


def test_one_pass_under_fastmath_only(rng):
    x = rng.standard_normal((5, 16)).astype(np.float32)
    gamma, beta = x[0].copy(), x[1].copy()
    for kernel, args in ((layer_norm, (x, gamma, beta, x.copy())), (layer_norm_returned, (x,)),
                         (scaled_by_sum_of_squares, (x, x.copy()))):
        text = kernel.ir(*args)
        assert _two_sum_loops(text) == 2  # the equal-shapes version and the broadcasting one
        assert text.count("array_new") == (1 if kernel is layer_norm_returned else 0)
    assert _two_sum_loops(layer_norm_exact.ir(x, gamma, beta, x.copy())) == 0
    want = np.zeros((5, 16))
    x64 = x.astype(np.float64)
    np_layer_norm(x64, gamma, beta, want)
    got = np.zeros_like(x64)
    layer_norm_exact(x64, gamma.astype(np.float64), beta.astype(np.float64), got)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


def test_nan_inf_and_empty_rows(rng):
    x = rng.standard_normal((4, 12)).astype(np.float32)
    x[1, 9] = np.nan
    x[2, 0] = np.inf
    x[3, 10] = -np.inf
    got = layer_norm_returned(x)
    assert np.isnan(got[1:]).all()
    np.testing.assert_allclose(got[0], np_layer_norm_returned(x[:1])[0], rtol=4e-4, atol=2e-5)
    assert layer_norm_returned(np.zeros((3, 0), np.float32)).shape == (3, 0)
    assert layer_norm_returned(np.zeros((0, 5), np.float32)).shape == (0, 5)

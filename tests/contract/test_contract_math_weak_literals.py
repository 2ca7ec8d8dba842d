"""Python numbers are weak in every math function (API.md section 3), the functions NumPy
lacks (``kd.fma``, ``kd.erf``, ``kd.erfc``) included: with ``x`` float32,
``kd.fma(x, x, 0.5)`` is float32, compiled and in plain Python alike."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel(fastmath=False)
def weak_arguments(x: kd.Array[kd.f32], out: kd.Array[kd.f32, 2]):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = kd.fma(x[i], x[i], 0.5)
        out[i, 1] = kd.fma(2.0, x[i], -1.0)
        out[i, 2] = kd.erf(x[i]) + kd.erfc(x[i])
        out[i, 3] = kd.hypot(x[i], 3.0)


@kd.kernel
def returned_types(x: kd.f32, n: kd.i32):
    return kd.fma(x, x, 0.5), kd.fma(n, 2, 3), kd.erf(x), kd.erf(n), kd.fma(x, 2, 1)


def test_weak_numbers_keep_float32_in_every_math_function(rng):
    x = rng.normal(size=64).astype(np.float32)
    out = np.zeros((64, 4), np.float32)
    check(weak_arguments, x, out, rtol=2e-7)  # erf, erfc: the C library, within an ulp
    np.testing.assert_allclose(out[:, 0], x.astype(np.float64) ** 2 + 0.5, rtol=1e-6)


def test_result_types_of_math_functions_match_in_both_modes():
    compiled = returned_types(np.float32(0.45), np.int32(3))
    python = returned_types.python(np.float32(0.45), np.int32(3))
    assert [type(r) for r in compiled] == [type(r) for r in python]
    assert [type(r) for r in python] == [np.float32, np.float64, np.float32, np.float64,
                                         np.float32]
    assert python[0] == compiled[0] and python[4] == compiled[4]
    assert kd.fma(np.float32(0.45), np.float32(0.45), 0.5).dtype == np.float32  # from Python

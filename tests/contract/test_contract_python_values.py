"""Python's own ways of writing values and loops in kernels: ``float("inf")``,
``math.inf``, ``np.nan``, and ``for`` over the array an expression gives."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def smallest_and_largest(a: kd.Array[kd.f32]):
    lo = float("inf")
    hi = float("-inf")
    for i in kd.prange(a.shape[0]):
        lo = min(lo, a[i])
        hi = max(hi, a[i])
    return lo, hi


def test_float_of_inf_string_starts_a_min_and_max_reduction(rng):
    a = rng.normal(size=1000).astype(np.float32)
    lo, hi = check(smallest_and_largest, a)
    assert (lo, hi) == (a.min(), a.max())
    assert isinstance(lo, np.float32)  # the weak infinities take the array's type


@kd.kernel
def special_values(x: kd.f64):
    return (float("nan"), float("Infinity"), float(" -inf "), float("1e3"), math.inf,
            -np.inf, kd.f32("nan"), np.float32("-inf"), int("12"), x < float("inf"))


def test_special_float_values_as_python_gives_them():
    got = special_values(1.0)
    assert math.isnan(got[0]) and math.isnan(got[6])
    assert got[1:6] == (math.inf, -math.inf, 1000.0, math.inf, -math.inf)
    assert got[7] == -np.inf and got[7].dtype == np.float32 and got[6].dtype == np.float32
    assert got[8] == 12 and got[9]


def test_a_string_python_cannot_convert_is_a_located_error():
    @kd.kernel
    def bad(x: kd.f64):
        return x + float("infinite")

    with pytest.raises(kd.CompileError, match="could not convert string to float") as info:
        bad(1.0)
    assert "x + float(\"infinite\")" in str(info.value)


@kd.kernel
def running_totals(a: kd.Array[kd.f64], b: kd.Array[kd.f32, 2], out: kd.Array[kd.f32]):
    t = 0.0
    for c in kd.cumsum(a):
        t += c
    for i, c in enumerate(kd.cumsum(a)):
        t += i * c
    for v in a * 2.0:
        t -= v
    for j in kd.prange(b.shape[0]):
        s = 0.0
        for x in b[j] * b[j]:
            s += x
        for k in kd.argsort(b[j]):
            s += k
        out[j] = s
    return t


def test_a_loop_over_a_call_s_result_walks_the_array_it_returns(rng):
    a = rng.normal(size=20)
    b = rng.normal(size=(6, 5)).astype(np.float32)
    out = np.zeros(6, np.float32)
    t = check(running_totals, a, b, out, rtol=1e-6)
    cums = np.cumsum(a)
    assert t == pytest.approx(cums.sum() + (np.arange(20) * cums).sum() - 2 * a.sum())
    assert np.allclose(out, (b * b).sum(axis=1) + 10)


def test_a_loop_over_a_non_array_names_the_expression():
    @kd.func
    def twice(x: kd.f32) -> kd.f32:
        return 2 * x

    @kd.kernel
    def bad(a: kd.Array[kd.f32]):
        for v in twice(a[0]):
            a[0] = v

    with pytest.raises(kd.CompileError, match="can only loop over") as info:
        bad(np.ones(3, np.float32))
    assert info.value.offset == 18  # the caret under twice(...)


@kd.kernel
def numba_style_casts(a: kd.Array[kd.f64], out: kd.Array[kd.f32], counts: kd.Array[kd.i32]):
    for i in kd.prange(a.shape[0]):
        out[i] = np.float32(a[i]) * np.float32(0.1)
        counts[i] = np.int32(a[i] * 10.0) + np.int64(1)


def test_numpy_scalar_types_cast_as_in_numba(rng):
    a = rng.normal(size=50)
    out = np.zeros(50, np.float32)
    counts = np.zeros(50, np.int32)
    check(numba_style_casts, a, out, counts)
    assert np.array_equal(out, a.astype(np.float32) * np.float32(0.1))
    assert np.array_equal(counts, (a * 10.0).astype(np.int32) + 1)


def test_a_numpy_scalar_type_kdsl_lacks_is_a_located_error():
    @kd.kernel
    def bad(x: kd.f64):
        return np.complex64(x)

    with pytest.raises(kd.CompileError, match="no scalar type for NumPy dtype complex64"):
        bad(1.0)

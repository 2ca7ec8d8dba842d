"""The math builtins of kdsl/ir/math_builtins.py on scalars, vectors and whole arrays,
by their kd.*, np.* and math.* names, against plain Python and the math module (within
4 ulp, as API.md promises), compiled for the CPU and (where the suite runs CUDA) the
device."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source
from kdsl_tensor_util import against_numpy

import kdsl as kd
from kdsl.ir.math_builtins import MATH_FUNCTIONS, Result

N = 64

# operand ranges, away from poles and branch cuts (every operand of a function alike)
_DOMAIN = {
    "sqrt": (0.1, 50.0), "sin": (-3.0, 3.0), "cos": (-3.0, 3.0), "tan": (-1.2, 1.2),
    "asin": (-0.95, 0.95), "acos": (-0.95, 0.95), "atan": (-6.0, 6.0), "atan2": (-4.0, 4.0),
    "sinh": (-5.0, 5.0), "cosh": (-5.0, 5.0), "tanh": (-3.0, 3.0), "exp": (-5.0, 5.0),
    "exp2": (-10.0, 10.0), "expm1": (-3.0, 3.0), "log": (0.05, 50.0), "log2": (0.05, 50.0),
    "log10": (0.05, 50.0), "log1p": (-0.9, 50.0), "erf": (-3.0, 3.0), "erfc": (-2.0, 4.0),
    "hypot": (-10.0, 10.0), "copysign": (-5.0, 5.0), "fma": (-4.0, 4.0),
    "sign": (-3.0, 3.0), "rint": (-6.0, 6.0), "isnan": (-3.0, 3.0), "isinf": (-3.0, 3.0),
    "isfinite": (-3.0, 3.0),
}
_DTYPES = [np.float32, np.float64]
_RTOL = {np.float32: 5e-7, np.float64: 1e-15}


def _operands(name: str, dtype: type, rng: np.random.Generator) -> list[np.ndarray]:
    lo, hi = _DOMAIN[name]
    arity = MATH_FUNCTIONS[name].arity
    operands = [rng.uniform(lo, hi, N).astype(dtype) for _ in range(arity)]
    if MATH_FUNCTIONS[name].result is not Result.FLOAT:
        operands[0][:4] = [np.nan, np.inf, -np.inf, -0.0]
        operands[0][4:8] = [0.0, -2.0, 3.0, 1e-30]
    return operands


def _within_4_ulp(actual: np.ndarray, exact: np.ndarray, dtype: type) -> None:
    """``actual`` within 4 units in the last place of ``exact`` (computed in double)."""
    rounded = exact.astype(dtype)
    spacing = np.spacing(np.abs(rounded)).astype(np.float64)
    error = np.abs(actual.astype(np.float64) - exact)
    assert np.all(error <= 4 * spacing), f"{np.max(error / spacing):.1f} ulp"


def _exact(name: str, operands: list[np.ndarray]) -> np.ndarray:
    """The function in double precision, from Python's math module where it has one."""
    double = [o.astype(np.float64) for o in operands]
    fn = getattr(math, name, None)
    if fn is None or name == "fma":
        return np.asarray(MATH_FUNCTIONS[name].reference(*double), dtype=np.float64)
    return np.array([fn(*map(float, xs)) for xs in zip(*double)], dtype=np.float64)


SCALAR_SOURCE = """
@kd.kernel
def k({params}, out):
    for i in kd.prange(out.shape[0]):
        out[i] = {call}
    return {first}
"""


def _scalar_kernel(spelling: str, arity: int, name: str) -> kd.Kernel:
    params = ", ".join(f"x{k}" for k in range(arity))
    call = f"{spelling}({', '.join(f'x{k}[i]' for k in range(arity))})"
    first = f"{spelling}({', '.join(f'x{k}[0]' for k in range(arity))})"
    return kernel_from_source(SCALAR_SOURCE.format(params=params, call=call, first=first),
                              prefix=f"math_{name}")


@pytest.mark.parametrize("dtype", _DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(MATH_FUNCTIONS))
def test_scalar_math_builtin(name: str, dtype: type, rng: np.random.Generator) -> None:
    fn = MATH_FUNCTIONS[name]
    operands = _operands(name, dtype, rng)
    result_dtype = np.bool_ if fn.result is Result.BOOL else dtype
    out = np.zeros(N, result_dtype)
    k = _scalar_kernel(f"kd.{name}", fn.arity, name)
    first = check(k, *operands, out, rtol=_RTOL[dtype], atol=0.0)
    assert isinstance(first, result_dtype)
    if fn.result is Result.FLOAT:
        _within_4_ulp(out, _exact(name, operands), dtype)
    else:
        np.testing.assert_array_equal(out, fn.reference(*operands))


@pytest.mark.parametrize("name", sorted(n for n, f in MATH_FUNCTIONS.items() if f.in_math_module))
def test_math_module_spelling_computes_in_double(name: str, rng: np.random.Generator) -> None:
    fn = MATH_FUNCTIONS[name]
    operands = _operands(name, np.float32, rng)
    if fn.result is not Result.FLOAT:
        out = np.zeros(N, np.bool_)
    else:
        out = np.zeros(N, np.float64)
    k = _scalar_kernel(f"math.{name}", fn.arity, name)
    check(k, *operands, out, rtol=1e-15)
    if fn.result is Result.FLOAT:
        _within_4_ulp(out, _exact(name, operands), np.float64)


def test_numpy_spellings_in_kernels(rng: np.random.Generator) -> None:
    k = kernel_from_source("""
    @kd.kernel
    def k(x, out):
        for i in kd.prange(x.shape[0]):
            out[i, 0] = np.arcsin(x[i] * 0.5) + np.asin(x[i] * 0.25)
            out[i, 1] = np.arccos(x[i] * 0.5) + np.arctan(x[i])
            out[i, 2] = np.sinh(x[i]) + np.cosh(x[i]) + np.exp2(x[i])
            out[i, 3] = np.expm1(x[i]) + np.log1p(x[i] + 1.0) + np.log2(x[i] + 2.0)
            out[i, 4] = np.log10(x[i] + 2.0) + np.hypot(x[i], 3.0)
            out[i, 5] = np.copysign(2.0, x[i]) + np.sign(x[i])
            out[i, 6] = kd.where(np.isfinite(x[i]) and not np.isnan(x[i]), 1.0, 0.0)
            out[i, 7] = kd.where(np.isinf(1.0 / x[i]), 1.0, 0.0)
    """, prefix="numpy_names")
    x = rng.uniform(-0.9, 0.9, N).astype(np.float32)
    x[:3] = [0.0, -0.5, 0.5]
    out = np.zeros((N, 8), np.float32)
    check(k, x, out, rtol=1e-6, atol=1e-6)
    assert out[0, 7] == 1.0 and out[1, 7] == 0.0


def test_vectors_are_elementwise(rng: np.random.Generator) -> None:
    k = kernel_from_source("""
    @kd.kernel
    def k(p: kd.Array[kd.vec3], q: kd.Array[kd.vec3], out: kd.Array[kd.vec3, 2]):
        for i in kd.prange(p.shape[0]):
            out[i, 0] = kd.erf(p[i]) + kd.log1p(kd.abs(q[i]))
            out[i, 1] = kd.hypot(p[i], q[i]) + kd.copysign(kd.vec3(1.0), q[i])
            out[i, 2] = kd.fma(p[i], q[i], 0.5) + kd.sign(p[i]) * kd.atan(q[i])
            out[i, 3] = kd.where(kd.isfinite(p[i]).x, kd.exp2(p[i]), kd.sinh(q[i]))
        return kd.isnan(p[0])
    """, prefix="vector_math")
    p = rng.uniform(-2.0, 2.0, (N, 3)).astype(np.float32)
    q = rng.uniform(-2.0, 2.0, (N, 3)).astype(np.float32)
    p[0, 1] = np.nan
    out = np.zeros((N, 4, 3), np.float32)
    flags = check(k, p, q, out, rtol=1e-6, atol=1e-6)
    assert list(flags) == [False, True, False]
    x = p[1:].astype(np.float64)
    y = q[1:].astype(np.float64)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(out[1:, 0], erf(x) + np.log1p(np.abs(y)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1:, 1], np.hypot(x, y) + np.copysign(1.0, y), rtol=1e-5)


@pytest.mark.parametrize("dtype", _DTYPES, ids=["f32", "f64"])
def test_whole_arrays_follow_numpy(dtype: type, rng: np.random.Generator) -> None:
    k = kernel_from_source("""
    @kd.kernel
    def k(x, y, out):
        out[0] = kd.erf(x) - kd.erfc(y)
        out[1] = np.hypot(x, y) + np.copysign(x, y)
        out[2] = np.log1p(np.abs(x)) + np.expm1(y) + np.log10(np.abs(y) + 1.0)
        out[3] = kd.fma(x, y, x) + np.sign(y)
        out[4] = np.arcsin(x * 0.5) + np.arccos(y * 0.5) + np.arctan(x)
        out[5] = np.sinh(x) + np.cosh(y) + np.exp2(x) + np.log2(np.abs(y) + 1.0)
        return np.isnan(x + y), np.isinf(y / x), np.isfinite(x)
    """, prefix="array_math")
    x = rng.uniform(-1.5, 1.5, (5, 7)).astype(dtype)
    y = rng.uniform(-1.5, 1.5, (5, 7)).astype(dtype)
    x[0, 0], y[1, 1], x[2, 2] = np.nan, np.inf, 0.0
    out = np.zeros((6, 5, 7), dtype)

    def reference(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> tuple:
        erf, erfc = (np.vectorize(f, otypes=[dtype]) for f in (math.erf, math.erfc))
        out[0] = erf(x) - erfc(y)
        out[1] = np.hypot(x, y) + np.copysign(x, y)
        out[2] = np.log1p(np.abs(x)) + np.expm1(y) + np.log10(np.abs(y) + 1.0)
        out[3] = (x.astype(np.float64) * y + x).astype(dtype) + np.sign(y)
        out[4] = np.arcsin(x * 0.5) + np.arccos(y * 0.5) + np.arctan(x)
        out[5] = np.sinh(x) + np.cosh(y) + np.exp2(x) + np.log2(np.abs(y) + 1.0)
        return np.isnan(x + y), np.isinf(y / x), np.isfinite(x)

    tolerance = 2e-6 if dtype == np.float32 else 1e-13
    against_numpy(k, (x, y, out), reference, rtol=tolerance, atol=tolerance)


def test_integer_operands() -> None:
    """Integers become float64 for the float functions and keep their type for sign."""

    @kd.kernel
    def k(n: kd.i32, m: kd.i64):
        return kd.erf(n), np.sign(n), kd.sign(m), kd.isnan(n), math.log2(m), kd.hypot(n, m)

    result = check(k, -3, 8)
    assert [type(r) for r in result] == [np.float64, np.int32, np.int64, np.bool_, float,
                                         np.float64]
    assert result[1] == -1 and result[2] == 1 and result[4] == 3.0 and result[5] == math.hypot(3, 8)


def test_sign_of_zeros_and_nan() -> None:
    @kd.kernel
    def k(x):
        for i in range(x.shape[0]):
            x[i] = kd.sign(x[i])

    x = np.array([-0.0, 0.0, np.nan, -np.inf, 2.5, -1e-40], np.float64)
    check(k, x)
    np.testing.assert_array_equal(x, [0.0, 0.0, np.nan, -1.0, 1.0, -1.0])
    assert not np.signbit(x[0])


def test_fma_rounds_once() -> None:
    @kd.kernel
    def k(a, b):
        return kd.fma(a, b, -(a * b))

    a = 1.0 + 2.0**-30
    error = check(k, a, a)
    assert error == 2.0**-60  # the rounding error of a * b, lost by a multiply then an add


@pytest.mark.parametrize("src, message", [
    ("return kd.erf(x, x)", "erf() takes 1 argument, got 2"),
    ("return kd.hypot(x)", "hypot() takes 2 arguments, got 1"),
    ("return math.erf(kd.vec3(x))", "math.erf() needs scalars, got vec3"),
    ("return kd.sign(x > 0.0)", "sign() needs numbers, got bool"),
    ("return kd.hypot(kd.vec2(x), kd.vec3(x))", "hypot(): shapes differ: vec2 and vec3"),
])
def test_bad_calls_are_located_compile_errors(src: str, message: str) -> None:
    k = kernel_from_source(f"""
    @kd.kernel
    def k(x: kd.f32):
        {src}
    """, prefix="math_errors")
    with pytest.raises(kd.CompileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        k(1.0)


def test_plain_python_mode_keeps_vectors() -> None:
    v = kd.erf(kd.vec3(0.5, 1.0, -1.0))
    assert isinstance(v, type(kd.vec3(0.0))) and v.dtype == np.float32
    assert v.x == np.float32(math.erf(0.5))
    assert kd.isnan(np.float32("nan")) and kd.sign(-3) == -1
    with pytest.raises(TypeError, match="hypot"):
        kd.hypot(1.0)


def test_the_language_guide_lists_every_math_builtin() -> None:
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "language.md").read_text()
    table = guide[guide.index("| functions | result |"):]
    table = table[:table.index("\n\n")]
    listed = set(re.findall(r"\b([a-z][a-z0-9]*)\b", table))
    assert set(MATH_FUNCTIONS) <= listed, set(MATH_FUNCTIONS) - listed

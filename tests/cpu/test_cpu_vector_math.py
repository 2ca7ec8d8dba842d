"""Vectorised math (kdsl/codegen/vector_math.py): every vectorised function of the math
table, compiled in a loop that vectorises, within 4 ulp over the whole input range
(random bit patterns: NaN, infinities, denormals, huge arguments) and over its usual
domain, against NumPy in double precision; fastmath=False keeps the C library's results."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from kdsl_cpu_util import kernel_from_source

import kdsl as kd
from kdsl.codegen import cpu, math_trig, vector_math, vector_variants
from kdsl.codegen.llvm_types import f32
from kdsl.ir.math_builtins import MATH_FUNCTIONS

# the usual domain of each function, sampled densely besides the random bit patterns
_DOMAIN = {
    "sin": (-100.0, 100.0), "cos": (-100.0, 100.0), "tan": (-10.0, 10.0),
    "asin": (-1.0, 1.0), "acos": (-1.0, 1.0), "atan": (-50.0, 50.0), "atan2": (-50.0, 50.0),
    "sinh": (-90.0, 90.0), "cosh": (-90.0, 90.0), "tanh": (-10.0, 10.0),
    "exp": (-100.0, 90.0), "exp2": (-150.0, 130.0), "expm1": (-20.0, 80.0),
    "log": (0.0, 1e6), "log2": (0.0, 1e6), "log10": (0.0, 1e6), "log1p": (-1.0, 1e4),
    "erf": (-6.0, 6.0), "erfc": (-6.0, 30.0), "hypot": (-1e3, 1e3), "pow": (0.0, 20.0),
}
_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-40, -1e-40,
            1e-310, 5e-324, 3.4e38, -3.4e38, 1e30, -1e30, 1e300, 1.7e308, 710.0, -746.0,
            89.0, -104.0, 1e6, 1e10, 2.0**60, 2.0**120, math.pi, math.pi / 2, 1e22]
_SCALAR_MATH = sorted(n for n, f in MATH_FUNCTIONS.items() if f.libm or f.intrinsic)
VECTORISED = sorted(n for n in _SCALAR_MATH if n in vector_math._VECTORISED) + ["pow"]

_OWN_HERE = any(vector_variants.available(s) for s in vector_variants.OWN)
pytestmark = pytest.mark.skipif(not (vector_math.available() or _OWN_HERE),
                                reason="no vector math here")
needs_libmvec = pytest.mark.skipif(not vector_math.available(), reason="no libmvec here")

_SOURCE = """
@kd.kernel{options}
def k({params}, out):
    for i in kd.prange(out.shape[0]):
        out[i] = {call}
"""


def _kernel(name: str, fastmath: bool = True) -> kd.Kernel:
    arity = 2 if name == "pow" else MATH_FUNCTIONS[name].arity
    params = ", ".join(f"x{k}" for k in range(arity))
    call = ("x0[i] ** x1[i]" if name == "pow"
            else f"kd.{name}({', '.join(f'x{k}[i]' for k in range(arity))})")
    options = "" if fastmath else "(fastmath=False)"
    return kernel_from_source(_SOURCE.format(options=options, params=params, call=call),
                              prefix=f"vm_{name}")


def _inputs(name: str, dtype: type, count: int, rng: np.random.Generator) -> np.ndarray:
    """Random bit patterns, the usual domain and the special values."""
    bits = np.dtype(dtype).itemsize * 8
    uint = np.uint32 if bits == 32 else np.uint64
    patterns = rng.integers(0, 2**bits, count, dtype=uint).view(dtype)
    lo, hi = _DOMAIN[name]
    usual = rng.uniform(lo, hi, count).astype(dtype)
    with np.errstate(over="ignore"):
        special = np.array(_SPECIAL, dtype=np.float64).astype(dtype)
    return np.concatenate([special, patterns, usual, -usual])


def _reference(name: str, args: list[np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        double = [a.astype(np.float64) for a in args]
        if name == "pow":
            return np.power(*double)
        if name in ("erf", "erfc"):
            return np.frompyfunc(getattr(math, name), 1, 1)(double[0]).astype(np.float64)
        return np.asarray(MATH_FUNCTIONS[name].reference(*double), dtype=np.float64)


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Units in the last place between two arrays of one float type (0 for two NaNs,
    the largest integer for one NaN)."""
    signed = np.int32 if actual.dtype == np.float32 else np.int64
    info = np.iinfo(signed)

    def ordered(a: np.ndarray) -> np.ndarray:
        i = a.view(signed).astype(np.int64)
        return np.where(i < 0, -(i & info.max), i)

    a, e = ordered(actual), ordered(expected)
    same_sign = (a >= 0) == (e >= 0)  # the difference cannot overflow
    distance = np.where(same_sign, np.abs(np.where(same_sign, a - e, 0)).astype(np.float64),
                        np.abs(a).astype(np.float64) + np.abs(e).astype(np.float64))
    nan_a, nan_e = np.isnan(actual), np.isnan(expected)
    distance = np.where(nan_a & nan_e, 0, distance)
    return np.where(nan_a ^ nan_e, float(info.max), distance)


def _run(kernel: kd.Kernel, args: list[np.ndarray]) -> np.ndarray:
    out = np.empty_like(args[0])
    kernel(*args, out)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", VECTORISED)
def test_vectorised_within_4_ulp(name: str, dtype: type) -> None:
    rng = np.random.default_rng(sum(map(ord, name)))
    count = 1 << (18 if name in ("erf", "erfc") else 20)
    first = _inputs(name, dtype, count, rng)
    args = [first]
    if name == "pow" or MATH_FUNCTIONS[name].arity == 2:
        second = rng.permutation(_inputs(name, dtype, count, rng))
        if name == "pow":  # exponents that keep most results finite
            second[first.size // 2:] = rng.uniform(-30, 30, first.size - first.size // 2)
        args.append(second)
    got = _run(_kernel(name), args)
    with np.errstate(over="ignore", under="ignore"):
        want = _reference(name, args).astype(dtype)
    distance = ulp_distance(got, want)
    worst = int(np.argmax(distance))
    assert distance[worst] <= 4, (
        f"{name}({', '.join(repr(a[worst]) for a in args)}) = {got[worst]!r}, "
        f"expected {want[worst]!r}: {distance[worst]:.0f} ulp")


@needs_libmvec
@pytest.mark.parametrize("name", ["exp", "sin", "pow", "atan2"])
def test_vector_variants_in_loops_and_libm_without_fastmath(name: str) -> None:
    arity = 2 if name in ("pow", "atan2") else 1
    args = [np.linspace(0.1, 3.0, 1000, dtype=np.float32) for _ in range(arity)]
    fast, exact = _kernel(name), _kernel(name, fastmath=False)
    optimised = str(cpu.optimize(fast.llvm_ir(*args, args[0])))
    symbol = ("pow" if name == "pow" else name) + "f"
    if vector_variants.chosen(symbol, libmvec_has_it=True):  # inlined polynomials
        assert "<16 x float>" in optimised or "<8 x float>" in optimised
        left = re.findall(rf"@kdsl\.vm\.{symbol}\.v\d+\(", optimised)
        assert not left, "a vector variant is left as a call"
    else:
        assert "call" in optimised and "@_ZGV" in optimised, "the loop calls no vector variant"
    assert "kdsl.vm." not in str(cpu.optimize(exact.llvm_ir(*args, args[0])))
    libm = _run(exact, args)
    want = _reference(name, args).astype(np.float32)
    assert np.max(ulp_distance(libm, want)) <= 1
    np.testing.assert_allclose(_run(fast, args), want, rtol=4e-7)


OWN = sorted(vector_variants.OWN)


@needs_libmvec
@pytest.mark.parametrize("symbol", OWN)
def test_libmvec_variants_of_own_functions(symbol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """KDSL_VECTOR_MATH=libmvec: the functions the compiler has its own variants of
    still vectorise through libmvec, within 4 ulp."""
    monkeypatch.setenv("KDSL_VECTOR_MATH", "libmvec")
    name, dtype = _name_and_dtype(symbol)
    rng = np.random.default_rng(5)
    args = [rng.permutation(_inputs(name, dtype, 1 << 15, rng))
            for _ in range(vector_variants.OWN[symbol].arity)]
    optimised = str(cpu.optimize(_kernel(name).llvm_ir(*args, args[0])))
    assert "@_ZGV" in optimised and not re.findall(rf"@kdsl\.vm\.{symbol}\.v\d+\(", optimised)
    _assert_within_4_ulp(name, args, _run(_kernel(name), args))


@pytest.mark.parametrize("symbol", sorted(set(OWN) - vector_variants.PREFERRED))
def test_own_variants_used_where_libmvec_is_missing(symbol: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """KDSL_VECTOR_MATH=own (what a host without libmvec gets): the functions whose own
    variants are not preferred to libmvec's vectorise inlined, within 4 ulp."""
    if not vector_variants.available(symbol):
        pytest.skip("no own vector variants here")
    monkeypatch.setenv("KDSL_VECTOR_MATH", "own")
    name, dtype = _name_and_dtype(symbol)
    rng = np.random.default_rng(6)
    args = [rng.permutation(_inputs(name, dtype, 1 << 18, rng))
            for _ in range(vector_variants.OWN[symbol].arity)]
    optimised = str(cpu.optimize(_kernel(name).llvm_ir(*args, args[0])))
    assert "@_ZGV" not in optimised and not re.findall(rf"@kdsl\.vm\.{symbol}\.v\d+\(", optimised)
    assert "<16 x double>" in optimised or "<8 x double>" in optimised or "<4 x double>" in optimised
    _assert_within_4_ulp(name, args, _run(_kernel(name), args))


def _name_and_dtype(symbol: str) -> tuple[str, type]:
    own = vector_variants.OWN[symbol]
    single = own.type == f32
    return (symbol[:-1] if single else symbol), (np.float32 if single else np.float64)


def _assert_within_4_ulp(name: str, args: list[np.ndarray], got: np.ndarray) -> None:
    with np.errstate(over="ignore", under="ignore"):
        want = _reference(name, args).astype(got.dtype)
    distance = ulp_distance(got, want)
    worst = int(np.argmax(distance))
    assert distance[worst] <= 4, (
        f"{name}({', '.join(repr(a[worst]) for a in args)}) = {got[worst]!r}, "
        f"expected {want[worst]!r}: {distance[worst]:.0f} ulp")


@pytest.mark.parametrize("symbol", [s for s in OWN if s.rstrip("f") in ("sin", "cos", "tan")])
def test_own_sin_cos_tan_near_and_past_the_reduction_limit(
        symbol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three-part reduction up to 2^20 (worst near multiples of pi/2 with many
    bits), the C library's function past it: dense around the limit, values next to
    multiples of pi/2, and single huge lanes among usual ones (the branch to the
    scalar fallback in one vector)."""
    monkeypatch.setenv("KDSL_VECTOR_MATH", "own")
    name, dtype = _name_and_dtype(symbol)
    rng = np.random.default_rng(11)
    limit = math_trig.LARGE_F32 if dtype == np.float32 else math_trig.LARGE_F64
    near = rng.uniform(limit / 4, limit * 4, 1 << 20)
    multiples = np.round(rng.uniform(1, limit * 2 / np.pi, 1 << 18)) * (np.pi / 2)
    around = np.concatenate([near, multiples, np.nextafter(multiples, 0),
                             np.nextafter(multiples, np.inf)]).astype(dtype)
    mixed = rng.uniform(-10, 10, 4096).astype(dtype)
    mixed[rng.integers(0, mixed.size, 40)] = dtype(3e37)
    for x in (around, -around, mixed):
        _assert_within_4_ulp(name, [x], _run(_kernel(name), [x]))


@pytest.mark.parametrize("mode", ["own", "libmvec"])
def test_atan2_of_zeros_infinities_and_nan_in_every_quadrant(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pair of signed zeros, infinities, NaN and ordinary values, in a loop that
    vectorises: C's atan2 results (pi, pi/2, 3 pi/4 and the sign of zero included)."""
    if mode == "libmvec" and not vector_math.available():
        pytest.skip("no libmvec here")
    monkeypatch.setenv("KDSL_VECTOR_MATH", mode)
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-40, -3e-39,
                       3e38, -2.5, 0.75], np.float32)
    y, x = (a.ravel() for a in np.meshgrid(values, values))
    y, x = np.tile(y, 4), np.tile(x, 4)
    got = _run(_kernel("atan2"), [y, x])
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(np.float32)
    assert np.max(ulp_distance(got, want)) <= 1
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def test_chains_of_math_calls_interleave_and_handle_remainders() -> None:
    """A loop body with several math calls asks for interleaving; every length (the
    vector loop, its epilogue and the scalar remainder) gives the float64 result."""

    @kd.kernel
    def chain(x: kd.Array[kd.f32], out: kd.Array[kd.f32]) -> None:
        for i in kd.prange(x.shape[0]):
            out[i] = kd.log(kd.tanh(kd.sin(kd.exp(x[i]))) + 2.0)

    rng = np.random.default_rng(2)
    x = rng.uniform(-3, 3, 1000).astype(np.float32)
    assert "llvm.loop.interleave.count" in str(chain.llvm_ir(x, x))
    for n in (1, 7, 16, 129, 1000):
        out = np.empty(n, np.float32)
        chain(x[:n], out)
        want = np.log(np.tanh(np.sin(np.exp(x[:n].astype(np.float64)))) + 2.0)
        np.testing.assert_allclose(out, want, rtol=2e-6)


def test_scalar_math_outside_loops_and_in_tensor_statements() -> None:
    @kd.kernel
    def scalar_and_tensor(x: kd.Array[kd.f64], out: kd.Array[kd.f64]) -> kd.f64:
        out[:] = kd.tanh(x) + kd.atan2(x, 2.0) * kd.erf(x)
        return kd.exp(x[0]) + x[1] ** 0.5

    x = np.random.default_rng(3).uniform(0.5, 3.0, 1001)
    out = np.empty_like(x)
    got = scalar_and_tensor(x, out)
    erf = np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)
    np.testing.assert_allclose(out, np.tanh(x) + np.arctan2(x, 2.0) * erf, rtol=1e-14)
    assert got == pytest.approx(math.exp(x[0]) + x[1] ** 0.5, rel=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["exp", "exp2"])
def test_scaling_without_a_native_ldexp(name: str, dtype: type,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no instruction scales by 2^k (AVX2), exp multiplies by two normal powers
    of two: overflow, denormal results and underflow stay within 4 ulp."""
    symbol = name + ("f" if dtype == np.float32 else "")
    if not vector_variants.chosen(symbol, libmvec_has_it=vector_math.available()):
        pytest.skip("not an own variant here")
    monkeypatch.setattr(vector_variants, "_native_ldexp", lambda bits: False)
    source = _SOURCE.format(options="", params="x0", call=f"kd.{name}(x0[i])")
    kernel = kernel_from_source(source.replace("def k(", "def k_two_factors("),
                                name="k_two_factors", prefix=f"vm2_{name}")
    x = _inputs(name, dtype, 1 << 16, np.random.default_rng(9))
    assert "llvm.ldexp" not in str(cpu.optimize(kernel.llvm_ir(x, x)))
    _assert_within_4_ulp(name, [x], _run(kernel, [x]))

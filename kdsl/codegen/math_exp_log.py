"""exp, expm1 and log as vector IR: range reduction, a minimax polynomial evaluated with
FMAs, and selects for the special cases (no branches, no tables).

The polynomials' coefficients are near-minimax fits of the relative error over the
reduced interval (Lawson's iteration in 40-digit arithmetic), rounded to the lane type.
"""

from __future__ import annotations

import math
import struct

from llvmlite import ir

from kdsl.codegen.vector_ir import VectorBuilder

# e^r = 1 + r + r^2 P(r) on [-ln2/2, ln2/2]; P of degree 3 and 4 (relative error 0.9 and
# 0.03 float32 ulp)
_EXPF_P3 = (0.499992311000824, 0.16667114198207855, 0.04189011827111244, 0.008312529884278774)
_EXPF_P4 = (0.4999999403953552, 0.1666652113199234, 0.04166838899254799,
            0.008368710055947304, 0.0013814608100801706)
# the same in double precision, P of degree 9 (0.05 double ulp)
_EXP_P9 = (0.5000000000000011, 0.16666666666666413, 0.04166666666653024,
           0.008333333333494206, 0.0013888888943603538, 0.00019841269507094353,
           2.48014931307574e-05, 2.7557585959182064e-06, 2.763023566654021e-07,
           2.500017593131474e-08)
# log(1 + f) = f + f^2 Q(f) on [sqrt(2)/2 - 1, sqrt(2) - 1]; Q of degree 7 (0.3 ulp)
_LOGF_Q = (-0.49999991059303284, 0.33333951234817505, -0.25001755356788635,
           0.19962070882320404, -0.16570521891117096, 0.1491800844669342,
           -0.14307434856891632, 0.08734634518623352)

# log(1 + f) = 2 atanh(s) = 2s + s R, s = f / (2 + f), R = z T(z), z = s^2 (fdlibm's form)
_LOG_T = (0.6666666666666735, 0.39999999999412766, 0.2857142874289432, 0.22222198513247848,
          0.18183567835142975, 0.1531395112425875, 0.14797037231348606)

_LN2_HI_F = 0.693145751953125  # 12 significant bits: k * _LN2_HI_F is exact for |k| < 2^12
_LN2_LO_F = math.log(2) - _LN2_HI_F
_LN2_F = float(struct.unpack("f", struct.pack("f", math.log(2)))[0])  # ln 2 in float32
_LN2_DOUBLE_LO = 2.3190468138462996e-17  # ln 2 - float64(ln 2)
_LN2_F_LO = math.log(2) - _LN2_F
_LN2_HI = 6.93147180369123816490e-01  # 32 significant bits (fdlibm's split)
_LN2_LO = 1.90821492927058770002e-10


def _expm1_reduced(v: VectorBuilder, x: ir.Value, accurate: bool) -> tuple[ir.Value, ir.Value]:
    """(e^r - 1, k) with x = k ln2 + r, |r| <= ln2/2, for |x| < 2^20; k as integers."""
    k, k_bits = v.round_to_integer(v.mul(x, v.f(1 / math.log(2))))
    k_int = v.isub(k_bits, v.as_int(v.shifter()))
    hi, lo = (_LN2_HI_F, _LN2_LO_F) if v.single else (_LN2_HI, _LN2_LO)
    r = v.fma(k, v.f(-hi), x)
    r = v.fma(k, v.f(-lo), r)
    r2 = v.mul(r, r)
    coefficients = (_EXPF_P4 if accurate else _EXPF_P3) if v.single else _EXP_P9
    p = v.estrin(r, r2, coefficients)
    return v.fma(r2, p, r), k_int


def exp(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """e^x within 2 ulp, denormal results included; e^x > the largest float gives inf,
    NaN stays NaN. 2^k over the clamped range (-150 to 128 for float32, -1077 to 1025
    for float64) needs no special case (``VectorBuilder.ldexp``)."""
    x = v.clamp(x, -104.0, 89.0) if v.single else v.clamp(x, -746.0, 710.0)
    em1, k = _expm1_reduced(v, x, accurate=False)
    return v.ldexp(v.add(em1, v.f(1.0)), k)


def half_exp(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """e^x / 2 for x >= 0, scaled by 2^(k-1) rather than 2^k: finite where e^x / 2 is
    (up to 89.4 for float32, 710.5 for float64, where e^x itself has overflowed), inf
    past it; NaN stays NaN."""
    x = v.clamp(x, 0.0, 90.0) if v.single else v.clamp(x, 0.0, 711.0)
    em1, k = _expm1_reduced(v, x, accurate=True)
    return v.ldexp(v.add(em1, v.f(1.0)), v.isub(k, v.i(1)))


def expm1(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """e^x - 1 for |x| < 40 (no cancellation near 0: e^r - 1 is the polynomial itself,
    and 2^k - 1 is exact)."""
    em1, k = _expm1_reduced(v, x, accurate=True)
    s = v.pow2(k)
    return v.fma(s, em1, v.sub(s, v.f(1.0)))


def expm1_whole_range(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """e^x - 1 for every x: 2 (h (e^r - 1) + h - 1/2) with h = 2^(k-1), normal over the
    clamped range (-30 to 89 for float32, -40 to 710 for float64, where e^x - 1 rounds to
    -1 below and overflows above); |x| tiny enough that the result rounds to x gives x
    (denormals and the sign of zero kept)."""
    clamped = v.clamp(x, -30.0, 89.0) if v.single else v.clamp(x, -40.0, 710.0)
    em1, k = _expm1_reduced(v, clamped, accurate=True)
    h = v.pow2(v.isub(k, v.i(1)))
    result = v.mul(v.fma(h, em1, v.sub(h, v.f(0.5))), v.f(2.0))
    return v.select(v.lt(v.abs(x), v.f(2.0 ** (-25 if v.single else -54))), x, result)


def log1p(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """log(1 + x): u = 1 + x rounded, and what the rounding lost, x - (u - 1), added to
    u's reduced mantissa (scaled by 2^-e); tiny x gives x."""
    u = v.add(x, v.f(1.0))
    lost = v.sub(x, v.sub(u, v.f(1.0)))
    e, y = _log_parts(v, u, lost)
    hi, lo = (_LN2_F, _LN2_F_LO) if v.single else (_LN2_HI, _LN2_LO)
    result = _log_special_cases(v, u, v.fma(e, v.f(hi), v.fma(e, v.f(lo), y)))
    return v.select(v.lt(v.abs(x), v.f(2.0 ** (-26 if v.single else -55))), x, result)


def _log_parts(v: VectorBuilder, x: ir.Value,
               lost: ir.Value | None = None) -> tuple[ir.Value, ir.Value]:
    """(e, log1p(m - 1)) with x = 2^e m, m in [sqrt(2)/2, sqrt(2)), for positive finite
    x (denormals are scaled by 2^23, or 2^54, first); e as a float. float32: a minimax
    polynomial in m - 1; float64: fdlibm's f - (f^2/2 - s (f^2/2 + R)) with one division.
    ``lost``: a small amount x lacks, added to m - 1 as lost 2^-e."""
    mantissa = 23 if v.single else 52
    scale = 23 if v.single else 54
    tiny = v.lt(x, v.f(2.0 ** (-126 if v.single else -1022)))
    scaled = v.select(tiny, v.mul(x, v.f(2.0**scale)), x)
    offset = 0x3F3504F3 if v.single else 0x3FE6A09E667F3BCD  # the bits of sqrt(2)/2
    ix = v.isub(v.as_int(scaled), v.i(offset))
    e = v.iadd(v.ashr(ix, mantissa), v.select(tiny, v.i(-scale), v.i(0)))
    m = v.as_float(v.iadd(v.and_(ix, v.i((1 << mantissa) - 1)), v.i(offset)))
    f = v.sub(m, v.f(1.0))
    if lost is not None:  # 2^-e stays normal: e is clamped (lost is 0 for large x)
        limit = v.i(100 if v.single else 1000)
        e_small = v.b.select(v.b.icmp_signed(">", e, limit), limit, e)
        f = v.fma(lost, v.pow2(v.isub(v.i(0), e_small)), f)
    f2 = v.mul(f, f)
    if v.single:
        return v.to_float(e), v.fma(f2, v.estrin(f, f2, _LOGF_Q), f)
    s = v.div(f, v.add(f, v.f(2.0)))
    z = v.mul(s, s)
    r = v.mul(z, v.estrin(z, v.mul(z, z), _LOG_T))
    half_f2 = v.mul(f2, v.f(0.5))
    return v.to_float(e), v.sub(f, v.sub(half_f2, v.mul(s, v.add(half_f2, r))))


def _log_special_cases(v: VectorBuilder, x: ir.Value, result: ir.Value) -> ir.Value:
    """0 gives -inf, negative numbers NaN, +inf and NaN themselves."""
    result = v.select(v.b.fcmp_unordered(">=", x, v.f(math.inf)), x, result)
    result = v.select(v.lt(x, v.f(0.0)), v.f(math.nan), result)
    return v.select(v.eq(x, v.f(0.0)), v.f(-math.inf), result)


def log(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """ln x = e ln2 + log1p(m - 1), within 1 ulp."""
    e, y = _log_parts(v, x)
    hi, lo = (_LN2_F, _LN2_F_LO) if v.single else (_LN2_HI, _LN2_LO)
    return _log_special_cases(v, x, v.fma(e, v.f(hi), v.fma(e, v.f(lo), y)))


def _split(value: float, double_lo: float, single: bool) -> tuple[float, float]:
    """A constant as hi + lo: hi in the lane type, lo the rest (``double_lo`` for
    float64, precomputed in higher precision)."""
    if single:
        hi = _to_f32(value)
        return hi, value - hi
    return value, double_lo


def log2(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """log2 x = e + log1p(m - 1) / ln2."""
    e, y = _log_parts(v, x)
    inv_hi, inv_lo = _split(1 / math.log(2), 2.0355273740931033e-17, v.single)
    return _log_special_cases(v, x, v.fma(y, v.f(inv_hi), v.fma(y, v.f(inv_lo), e)))


def log10(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """log10 x = e log10(2) + log1p(m - 1) log10(e)."""
    e, y = _log_parts(v, x)
    l2_hi, l2_lo = _split(math.log10(2), -2.8037281277851704e-18, v.single)
    le_hi, le_lo = _split(math.log10(math.e), 1.098319650216765e-17, v.single)
    low = v.fma(e, v.f(l2_lo), v.mul(y, v.f(le_lo)))
    return _log_special_cases(v, x, v.fma(e, v.f(l2_hi), v.fma(y, v.f(le_hi), low)))


def exp2(v: VectorBuilder, x: ir.Value) -> ir.Value:
    """2^x = 2^k e^((x - k) ln2), k = rint(x): x - k is exact, and (x - k) ln2 is
    rounded once more than in ``exp`` (a third of an ulp at most); scaled as in ``exp``."""
    x = v.clamp(x, -151.0, 129.0) if v.single else v.clamp(x, -1076.0, 1025.0)
    k, k_bits = v.round_to_integer(x)
    k_int = v.isub(k_bits, v.as_int(v.shifter()))
    f = v.sub(x, k)
    hi = _to_f32(math.log(2)) if v.single else math.log(2)
    lo = math.log(2) - hi if v.single else _LN2_DOUBLE_LO
    r = v.fma(f, v.f(hi), v.mul(f, v.f(lo)))
    r2 = v.mul(r, r)
    em1 = v.fma(r2, v.estrin(r, r2, _EXPF_P3 if v.single else _EXP_P9), r)
    return v.ldexp(v.add(em1, v.f(1.0)), k_int)


def _to_f32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])

"""sin, cos and tan as vector IR: x = n pi + r (Cody-Waite reduction in three parts,
exact enough for |x| < 2^20), an odd minimax polynomial for sin r on [-pi/2, pi/2], and
the sign flipped for odd n; tan from a reduction by halves of pi (``tan``). Larger arguments and
infinities take the C library's scalar function, lane by lane, behind one branch that is
not taken for usual inputs."""

from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from kdsl.codegen.vector_ir import VectorBuilder

# sin r = r + r^3 S(r^2) on [-pi/2, pi/2]; S of degree 3 (0.08 float32 ulp)
_SINF_S = (-0.16666659712791443, 0.00833306647837162, -0.00019809602235909551,
           2.6057798550027655e-06)
# the same in double precision, S of degree 7 (0.02 double ulp)
_SIN_S = (-0.16666666666666666, 0.008333333333333194, -0.00019841269841209215,
          2.7557319211136873e-06, -2.5052106872769874e-08, 1.6058939704442037e-10,
          -7.642991454958507e-13, 2.721174630560259e-15)
# pi = _PI1 + _PI2 + _PI3, float32 and float64 values
_PI_F = (3.1415927410125732, -8.742277657347586e-08, -3.4302490200117637e-15)
_PI = (3.141592653589793, 1.2246467991473532e-16, -2.9947698097183397e-33)
LARGE_F32 = 2.0**20  # past it the C library's function
LARGE_F64 = 2.0**20

# emits the scalar function for the lanes of a mask: (x, fast result, mask) -> result
Fallback = Callable[[ir.Value, ir.Value, ir.Value], ir.Value]


def _sin_reduced(v: VectorBuilder, x: ir.Value, n: ir.Value, n_bits: ir.Value) -> ir.Value:
    """sin(x - n pi) (-1)^n for the integer or half-integer n whose parity is the low bit
    of ``n_bits``."""
    pi1, pi2, pi3 = _PI_F if v.single else _PI
    r = v.fma(n, v.f(-pi1), x)
    r = v.fma(n, v.f(-pi2), r)
    r = v.fma(n, v.f(-pi3), r)
    y = _sin_polynomial(v, r)
    odd = v.shl(n_bits, v.bits - 1)
    return v.as_float(v.xor(v.as_int(y), odd))


def _sin_polynomial(v: VectorBuilder, r: ir.Value) -> ir.Value:
    """sin r for |r| <= pi/2."""
    r2 = v.mul(r, r)
    r4 = v.mul(r2, r2)
    s = v.estrin(r2, r4, _SINF_S if v.single else _SIN_S)
    return v.fma(v.mul(r, r2), s, r)


def _large(v: VectorBuilder) -> ir.Value:
    return v.f(LARGE_F32 if v.single else LARGE_F64)


def sin(v: VectorBuilder, x: ir.Value, fallback: Fallback) -> ir.Value:
    shifter = v.shifter()
    shifted = v.fma(x, v.f(1 / math.pi), shifter)
    n = v.sub(shifted, shifter)
    y = _sin_reduced(v, x, n, v.as_int(shifted))
    return fallback(x, y, v.gt(v.abs(x), _large(v)))


def cos(v: VectorBuilder, x: ir.Value, fallback: Fallback) -> ir.Value:
    """cos x = sin(|x| + pi/2): n = rint(|x|/pi + 1/2) - 1/2, a half-integer."""
    a = v.abs(x)
    shifter = v.shifter()
    shifted = v.fma(v.add(a, v.f(math.pi / 2)), v.f(1 / math.pi), shifter)
    n = v.sub(v.sub(shifted, shifter), v.f(0.5))
    y = _sin_reduced(v, a, n, v.as_int(shifted))
    return fallback(x, y, v.gt(a, _large(v)))




def _two_sum(v: VectorBuilder, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(a + b rounded, what the rounding lost), exactly (Knuth's TwoSum)."""
    total = v.add(a, b)
    b_part = v.sub(total, a)
    lost = v.add(v.sub(a, v.sub(total, b_part)), v.sub(b, b_part))
    return total, lost


def tan(v: VectorBuilder, x: ir.Value, fallback: Fallback) -> ir.Value:
    """x = n pi/2 + r + r_lo, |r| <= pi/4: the three-part reduction by halves of pi,
    with what rounding r lost kept in r_lo (tan's slope doubles an error of r, which
    sin's hides). tan x = sin r / cos r for even n, -cos r / sin r for odd n, with
    cos r = 1 - 2 sin^2 (r/2) (at least 0.7: no cancellation), both corrected by r_lo."""
    shifter = v.shifter()
    shifted = v.fma(x, v.f(2 / math.pi), shifter)
    n = v.sub(shifted, shifter)
    pi1, pi2, pi3 = _PI_F if v.single else _PI
    exact = v.fma(n, v.f(-pi1 / 2), x)  # x and n pi1/2 agree in their leading bits
    r = v.fma(n, v.f(-pi2 / 2), exact)
    difference, lost = _two_sum(v, exact, v.sub(v.f(-0.0), r))  # exact - r, exactly
    r_lo = v.fma(n, v.f(-pi3 / 2), v.add(v.fma(n, v.f(-pi2 / 2), difference), lost))
    sine = _sin_polynomial(v, r)
    half = _sin_polynomial(v, v.mul(r, v.f(0.5)))
    cosine = v.fma(v.mul(half, v.f(-2.0)), half, v.f(1.0))
    sine, cosine = v.fma(r_lo, cosine, sine), v.fma(v.sub(v.f(-0.0), r_lo), sine, cosine)
    odd = v.b.icmp_unsigned("!=", v.and_(v.as_int(shifted), v.i(1)), v.i(0))
    numerator = v.select(odd, v.sub(v.f(-0.0), cosine), sine)
    y = v.div(numerator, v.select(odd, sine, cosine))
    return fallback(x, y, v.gt(v.abs(x), _large(v)))

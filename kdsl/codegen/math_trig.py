"""sin and cos as vector IR: x = n pi + r (Cody-Waite reduction in three parts, exact
enough for |x| < 2^20), an odd minimax polynomial for sin r on [-pi/2, pi/2], and the sign
flipped for odd n. Larger arguments and infinities take the C library's scalar function,
lane by lane, behind one branch that is not taken for usual inputs."""

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
    r2 = v.mul(r, r)
    r4 = v.mul(r2, r2)
    s = v.estrin(r2, r4, _SINF_S if v.single else _SIN_S)
    y = v.fma(v.mul(r, r2), s, r)
    odd = v.shl(n_bits, v.bits - 1)
    return v.as_float(v.xor(v.as_int(y), odd))


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

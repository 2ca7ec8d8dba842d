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
# pi = _PI1 + _PI2 + _PI3 (float32 values)
_PI1_F = 3.1415927410125732
_PI2_F = -8.742277657347586e-08
_PI3_F = -3.4302490200117637e-15
LARGE_F32 = 2.0**20

# emits the scalar function for the lanes of a mask: (x, fast result, mask) -> result
Fallback = Callable[[ir.Value, ir.Value, ir.Value], ir.Value]


def _sin_reduced(v: VectorBuilder, x: ir.Value, n: ir.Value, n_bits: ir.Value) -> ir.Value:
    """sin(x - n pi) (-1)^n for the integer or half-integer n whose parity is the low bit
    of ``n_bits``."""
    r = v.fma(n, v.f(-_PI1_F), x)
    r = v.fma(n, v.f(-_PI2_F), r)
    r = v.fma(n, v.f(-_PI3_F), r)
    r2 = v.mul(r, r)
    r4 = v.mul(r2, r2)
    s = v.estrin(r2, r4, _SINF_S)
    y = v.fma(v.mul(r, r2), s, r)
    odd = v.shl(n_bits, 31)
    return v.as_float(v.xor(v.as_int(y), odd))


def sin_f32(v: VectorBuilder, x: ir.Value, fallback: Fallback) -> ir.Value:
    shifter = v.f(1.5 * 2.0**23)
    shifted = v.fma(x, v.f(1 / math.pi), shifter)
    n = v.sub(shifted, shifter)
    y = _sin_reduced(v, x, n, v.as_int(shifted))
    return fallback(x, y, v.gt(v.abs(x), v.f(LARGE_F32)))


def cos_f32(v: VectorBuilder, x: ir.Value, fallback: Fallback) -> ir.Value:
    """cos x = sin(|x| + pi/2): n = rint(|x|/pi + 1/2) - 1/2, a half-integer."""
    a = v.abs(x)
    shifter = v.f(1.5 * 2.0**23)
    shifted = v.fma(v.add(a, v.f(math.pi / 2)), v.f(1 / math.pi), shifter)
    n = v.sub(v.sub(shifted, shifter), v.f(0.5))
    y = _sin_reduced(v, a, n, v.as_int(shifted))
    return fallback(x, y, v.gt(a, v.f(LARGE_F32)))

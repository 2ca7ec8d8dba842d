"""atan, atan2, asin and acos of float32 as vector IR.

atan|x| = b + atan t with t = x (b = 0) up to tan(pi/8), (x - 1) / (x + 1) (b = pi/4) up
to tan(3pi/8), -1/x (b = pi/2) past it, so |t| <= tan(pi/8); atan t = t + t^3 P(t^2), P
of degree 9 (a least-squares fit on Chebyshev nodes, relative error 3e-16), the sign
copied back. Infinities give +-pi/2, NaN stays NaN.

The float32 functions compute in float64 lanes (their arguments widen exactly) and round
once at the end, which also makes the identities below exact enough:
- asin x = atan(x / sqrt(1 - x^2)) (1 - x^2 is exact in float64 for a float32 x);
- acos x = 2 atan(sqrt((1 - x) / (1 + x)));
- atan2(y, x) = atan(|y| / |x|), taken from pi where x is negative (or -0), the sign of y
  copied; both zero gives atan 0 and both infinite atan 1, as C's atan2 does.
"""

from __future__ import annotations

import math

from llvmlite import ir

from kdsl.codegen.llvm_types import f64
from kdsl.codegen.vector_ir import VectorBuilder

# atan t = t + t^3 P(t^2) on |t| <= tan(pi/8)
_ATAN_P = (-0.33333333333333287, 0.1999999999990354, -0.14285714266570818,
           0.111111096616676, -0.09090853277122717, 0.07691066959796614,
           -0.06649728025886399, 0.05736979369252843, -0.04485312802654432,
           0.022775731920018007)
_TAN_PI_8 = 0.41421356237309503
_TAN_3PI_8 = 2.414213562373095


def _atan_of_magnitude(v: VectorBuilder, a: ir.Value) -> ir.Value:
    """atan a for a >= 0 (or NaN)."""
    beyond = v.gt(a, v.f(_TAN_3PI_8))
    middle = v.gt(a, v.f(_TAN_PI_8))
    one = v.f(1.0)
    t = v.select(beyond, v.div(v.f(-1.0), a),
                 v.select(middle, v.div(v.sub(a, one), v.add(a, one)), a))
    base = v.select(beyond, v.f(math.pi / 2), v.select(middle, v.f(math.pi / 4), v.f(0.0)))
    z = v.mul(t, t)
    return v.add(base, v.fma(v.mul(t, z), v.horner(z, _ATAN_P), t))


def atan(v: VectorBuilder, x: ir.Value) -> ir.Value:
    if v.single:
        return _narrow(v, atan(_wide(v), _widen(v, x)))
    return v.copysign(_atan_of_magnitude(v, v.abs(x)), x)  # within 3 float64 ulp


def asin(v: VectorBuilder, x: ir.Value) -> ir.Value:
    assert v.single
    w = _wide(v)
    wx = _widen(v, x)
    cosine = w.sqrt(w.fma(w.mul(wx, w.f(-1.0)), wx, w.f(1.0)))
    return _narrow(v, atan(w, w.div(wx, cosine)))


def acos(v: VectorBuilder, x: ir.Value) -> ir.Value:
    assert v.single
    w = _wide(v)
    wx = _widen(v, x)
    one = w.f(1.0)
    ratio = w.div(w.sub(one, wx), w.add(one, wx))
    half = _atan_of_magnitude(w, w.sqrt(ratio))
    return _narrow(v, w.add(half, half))


def atan2(v: VectorBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
    assert v.single
    w = _wide(v)
    wy, wx = _widen(v, y), _widen(v, x)
    ay, ax = w.abs(wy), w.abs(wx)
    ratio = w.div(ay, ax)
    ratio = w.select(w.b.and_(w.eq(ay, w.f(0.0)), w.eq(ax, w.f(0.0))), w.f(0.0), ratio)
    inf = w.f(math.inf)
    ratio = w.select(w.b.and_(w.eq(ay, inf), w.eq(ax, inf)), w.f(1.0), ratio)
    angle = _atan_of_magnitude(w, ratio)
    negative_x = w.b.icmp_signed("<", w.as_int(wx), w.i(0))  # -0 too
    angle = w.select(negative_x, w.sub(w.f(math.pi), angle), angle)
    return _narrow(v, w.copysign(angle, wy))


def _wide(v: VectorBuilder) -> VectorBuilder:
    return VectorBuilder(v.b, f64, v.lanes)


def _widen(v: VectorBuilder, x: ir.Value) -> ir.Value:
    return v.b.fpext(x, ir.VectorType(f64, v.lanes))


def _narrow(v: VectorBuilder, x: ir.Value) -> ir.Value:
    return v.b.fptrunc(x, v.vf)

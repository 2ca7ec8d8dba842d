"""tanh, sinh and cosh as vector IR, from exp and expm1 (math_exp_log.py).

- tanh|x| = e / (e + 2) with e = expm1(2|x|), the sign copied back; |x| >= 9.1 (19.1 for
  float64) gives +-1 (tanh rounds to 1 there), NaN stays NaN.
- cosh x = h + 1/(4h) with h = e^|x| / 2 (``half_exp``: finite up to where cosh is).
- sinh|x| = h - 1/(4h) for |x| >= 1 (no cancellation to speak of: 1/(4h) < h / 7), and
  (t + t / (t + 1)) / 2 with t = expm1(|x|) below (two positive terms: tiny and denormal
  x give x), the sign copied back.
"""

from __future__ import annotations

from llvmlite import ir

from kdsl.codegen.math_exp_log import expm1, half_exp
from kdsl.codegen.vector_ir import VectorBuilder


def tanh(v: VectorBuilder, x: ir.Value) -> ir.Value:
    limit = v.f(9.1 if v.single else 19.1)
    a = v.abs(x)
    a = v.select(v.gt(a, limit), limit, a)  # NaN stays NaN
    e = expm1(v, v.add(a, a))
    return v.copysign(v.div(e, v.add(e, v.f(2.0))), x)


def cosh(v: VectorBuilder, x: ir.Value) -> ir.Value:
    h = half_exp(v, v.abs(x))
    return v.add(h, v.div(v.f(0.25), h))


def sinh(v: VectorBuilder, x: ir.Value) -> ir.Value:
    a = v.abs(x)
    h = half_exp(v, a)
    large = v.sub(h, v.div(v.f(0.25), h))
    t = expm1(v, v.select(v.lt(a, v.f(1.0)), a, v.f(1.0)))
    small = v.mul(v.add(t, v.div(t, v.add(t, v.f(1.0)))), v.f(0.5))
    return v.copysign(v.select(v.lt(a, v.f(1.0)), small, large), x)

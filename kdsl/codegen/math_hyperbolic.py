"""tanh as vector IR: tanh|x| = e / (e + 2) with e = expm1(2|x|), the sign copied back;
|x| >= 9.1 (19.1 for float64) gives +-1 (tanh rounds to 1 there), NaN stays NaN."""

from __future__ import annotations

from llvmlite import ir

from kdsl.codegen.math_exp_log import expm1
from kdsl.codegen.vector_ir import VectorBuilder


def tanh(v: VectorBuilder, x: ir.Value) -> ir.Value:
    limit = v.f(9.1 if v.single else 19.1)
    a = v.abs(x)
    a = v.select(v.gt(a, limit), limit, a)  # NaN stays NaN
    e = expm1(v, v.add(a, a))
    return v.copysign(v.div(e, v.add(e, v.f(2.0))), x)

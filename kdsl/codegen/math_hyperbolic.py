"""tanh as vector IR: tanh|x| = e / (e + 2) with e = expm1(2|x|), the sign copied back;
|x| >= 9.1 gives +-1 (tanh rounds to 1 there in float32), NaN stays NaN."""

from __future__ import annotations

from llvmlite import ir

from kdsl.codegen.math_exp_log import expm1_f32
from kdsl.codegen.vector_ir import VectorBuilder


def tanh_f32(v: VectorBuilder, x: ir.Value) -> ir.Value:
    a = v.abs(x)
    a = v.select(v.gt(a, v.f(9.1)), v.f(9.1), a)  # NaN stays NaN
    e = expm1_f32(v, v.add(a, a))
    return v.copysign(v.div(e, v.add(e, v.f(2.0))), x)

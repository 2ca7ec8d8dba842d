"""erf of float32 as vector IR, computed in float64 lanes (the argument widens exactly)
and rounded once at the end.

- |x| <= 1: erf x = x S(x^2), S of degree 8;
- 1 < |x| < 4: erf |x| = 1 - e^(-x^2) R(|x|), R a polynomial of degree 14 in
  u = (|x| - 2.5) / 1.5 fitted to erfc(t) e^(t^2) (smooth, no cancellation in the product);
- |x| >= 4 is taken as 4, where erf rounds to 1 in float32; NaN stays NaN.
Both fits are least squares on Chebyshev nodes (errors below 1e-11, far under a float32
ulp); the sign is copied back.
"""

from __future__ import annotations

from llvmlite import ir

from kdsl.codegen.llvm_types import f64
from kdsl.codegen.math_exp_log import exp
from kdsl.codegen.vector_ir import VectorBuilder

_ERF_S = (1.128379167094697, -0.37612638889878586, 0.11283791313606906,
          -0.026866133631052506, 0.005223785021842988, -0.0008542670776819701,
          0.00011956948332742713, -1.3911705560077653e-05, 1.0595276377960943e-06)
_ERFCX_R = (0.21080636405462433, -0.11152102074931304, 0.05611049427335189,
            -0.02700527577910853, 0.012489356646043613, -0.005570928999058721,
            0.0024037838502658413, -0.0010047883091427363, 0.0004085590776197205,
            -0.00016449773206539322, 6.367248750282914e-05, -2.0489395781771973e-05,
            7.47345339377627e-06, -5.058260996608355e-06, 1.813040761718692e-06)


def erf(v: VectorBuilder, x: ir.Value) -> ir.Value:
    assert v.single
    w = VectorBuilder(v.b, f64, v.lanes)
    wx = v.b.fpext(x, w.vf)
    a = w.abs(wx)
    a = w.select(w.gt(a, w.f(4.0)), w.f(4.0), a)  # NaN stays NaN
    a2 = w.mul(a, a)
    small = w.mul(a, w.horner(a2, _ERF_S))
    u = w.mul(w.sub(a, w.f(2.5)), w.f(1 / 1.5))
    large = w.fma(w.sub(w.f(-0.0), exp(w, w.sub(w.f(-0.0), a2))), w.horner(u, _ERFCX_R),
                  w.f(1.0))
    result = w.select(w.gt(a, w.f(1.0)), large, small)
    return v.b.fptrunc(w.copysign(result, wx), v.vf)

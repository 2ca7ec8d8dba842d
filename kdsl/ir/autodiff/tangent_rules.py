"""Tangent rules (forward mode), one per op name, attached to the op registry next to the
adjoint rules (rules.py).

A tangent rule receives the emitter, the op, its operands as values of the new function,
and the tangent of each operand (None where it has none); it returns the tangent of the
op's result, or None when it is zero. For an elementwise op of scalars the Jacobian is
one number per operand, which the adjoint rule multiplies the adjoint by: the tangent is
the sum over operands of the adjoint rule applied to the operand's tangent. Vectors and
matrices apply that per component. Ops that mix components (products, constructors)
have rules of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kdsl import types as T
from kdsl.ir.autodiff.rules import ADJOINT_RULES, PIECEWISE_CONSTANT, Rule, is_component_type
from kdsl.ir.core import Operation, Value

if TYPE_CHECKING:
    from kdsl.ir.autodiff.emitter import AdjointEmitter

Tangents = Sequence[Value | None]
TangentRule = Callable[["AdjointEmitter", Operation, Sequence[Value], Tangents], Value | None]

TANGENT_RULES: dict[str, TangentRule] = {}


def tangent_rule(*names: str) -> Callable[[TangentRule], TangentRule]:
    def register(rule: TangentRule) -> TangentRule:
        for name in names:
            TANGENT_RULES[name] = rule
        return rule
    return register


def _sum(e: AdjointEmitter, parts: Sequence[Value | None]) -> Value | None:
    found = [p for p in parts if p is not None]
    return e.add_all(found) if found else None


def _or_zero(e: AdjointEmitter, t: Value | None, like: Value) -> Value:
    return t if t is not None else e.zero(like.type)


def from_adjoint(rule: Rule) -> TangentRule:
    """The tangent of an elementwise op from its (scalar) adjoint rule."""

    def scalar(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
        return _sum(e, [rule(e, op, x, d)[k] if d is not None else None
                        for k, d in enumerate(dx)])

    def tangent(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
        result = e.result(op)
        if not is_component_type(result.type):
            return scalar(e, op, x, dx)
        components: list[Value] = []
        scalar_type = T.element_scalar(result.type)
        for k in range(T.element_count(result.type)):
            xs = [e.op("extract", v, index=k) if is_component_type(v.type) else v for v in x]
            ds = [None if d is None else
                  e.op("extract", d, index=k) if is_component_type(d.type) else d for d in dx]
            with e.result_override(e.op("extract", result, index=k)):
                part = scalar(e, op, xs, ds)
            components.append(part if part is not None else e.const(0.0, scalar_type))
        return e.op("make_vector", *components, type=result.type)

    return tangent


@tangent_rule("cast")
def _cast(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
    if dx[0] is None or not T.element_scalar(x[0].type).is_float:
        return None
    return e.op("cast", dx[0], type=op.results[0].type)


@tangent_rule("select")
def _select(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
    if dx[1] is None and dx[2] is None:
        return None
    return e.op("select", x[0], _or_zero(e, dx[1], x[1]), _or_zero(e, dx[2], x[2]))


@tangent_rule("splat")
def _splat(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
    return None if dx[0] is None else e.op("splat", dx[0], type=op.results[0].type)


@tangent_rule("make_vector")
def _make_vector(e: AdjointEmitter, op: Operation, x: Sequence[Value],
                 dx: Tangents) -> Value | None:
    return e.op("make_vector", *(_or_zero(e, d, v) for v, d in zip(x, dx)),
                type=op.results[0].type)


@tangent_rule("extract")
def _extract(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
    return None if dx[0] is None else e.op("extract", dx[0], index=op.attrs["index"])


@tangent_rule("insert")
def _insert(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
    return e.op("insert", _or_zero(e, dx[0], x[0]), _or_zero(e, dx[1], x[1]),
                index=op.attrs["index"])


@tangent_rule("transpose")
def _transpose(e: AdjointEmitter, op: Operation, x: Sequence[Value],
               dx: Tangents) -> Value | None:
    return None if dx[0] is None else e.op("transpose", dx[0])


@tangent_rule("dot", "cross", "matmul", "outer")
def _bilinear(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
    a, b = x
    da, db = dx
    return _sum(e, [None if da is None else e.op(op.name, da, b),
                    None if db is None else e.op(op.name, a, db)])


def _nothing(e: AdjointEmitter, op: Operation, x: Sequence[Value], dx: Tangents) -> Value | None:
    return None


def attach_tangent_rules() -> None:
    """Puts every tangent rule in the op registry."""
    from kdsl.ir.ops import REGISTRY, set_derivative_rules

    for name, rule in ADJOINT_RULES.items():
        if name in REGISTRY and name not in TANGENT_RULES:
            set_derivative_rules(name, tangent=from_adjoint(rule))
    for name, tangent in TANGENT_RULES.items():
        if name in REGISTRY:
            set_derivative_rules(name, tangent=tangent)
    for name in (*PIECEWISE_CONSTANT, "stop_gradient"):
        if name in REGISTRY:
            set_derivative_rules(name, tangent=_nothing)


attach_tangent_rules()

"""Adjoint rules, one per op name: how the adjoint of an op's result flows to its operands.

A rule receives the emitter (to build ops), the op, its operands and results as values of
the gradient function, and the adjoint of its (first) result; it returns one adjoint per
operand, or None where the operand receives nothing. Rules for elementwise ops are written
for scalars; vectors and matrices apply them per component (see ``per_component``).
Multiplying an adjoint by a partial derivative goes through ``scaled``, which gives 0
where the adjoint is 0: the untaken side of a select never leaks ``0 * inf``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.ir.core import Operation, Value

if TYPE_CHECKING:
    from kdsl.ir.autodiff.emitter import AdjointEmitter

Adjoints = list[Value | None]
Rule = Callable[["AdjointEmitter", Operation, Sequence[Value], Value], Adjoints]

ADJOINT_RULES: dict[str, Rule] = {}
"""Rules for scalar arguments; ``per_component`` lifts them to vectors and matrices."""

STRUCTURAL_RULES: dict[str, Rule] = {}
"""Rules that see whole vectors and matrices (constructors, products, components)."""

PIECEWISE_CONSTANT = ("floor", "ceil", "floordiv", "sign", "round", "trunc", "rint")
"""Ops with floating-point results whose derivative is zero wherever it exists."""


def adjoint_rule(*names: str) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        for name in names:
            ADJOINT_RULES[name] = rule
        return rule
    return register


def structural_rule(*names: str) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        for name in names:
            STRUCTURAL_RULES[name] = rule
        return rule
    return register




# --- arithmetic ---------------------------------------------------------------------


@adjoint_rule("add")
def _add(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [g, g]


@adjoint_rule("sub")
def _sub(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [g, e.op("neg", g)]


@adjoint_rule("neg")
def _neg(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [e.op("neg", g)]


@adjoint_rule("mul")
def _mul(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    return [e.scaled(g, b), e.scaled(g, a)]


@adjoint_rule("div")
def _div(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    r = e.result(op)
    if _is_one(e, op.operands[0]):  # r = 1 / b: -g / b^2 = -g r r, no division
        return [None, e.guarded(g, e.op("neg", e.op("mul", e.op("mul", g, r), r)))]
    ga = e.guarded(g, e.op("div", g, b))
    gb = e.guarded(g, e.op("neg", e.op("div", e.op("mul", g, r), b)))
    return [ga, gb]


def _definition(e: AdjointEmitter, v: Value) -> Operation | None:
    """The op making ``v`` where the emitter knows (not the elementwise emitter of
    whole-array maps, whose operands are made elsewhere)."""
    return getattr(e, "definitions", {}).get(v)


def _is_one(e: AdjointEmitter, v: Value) -> bool:
    made = _definition(e, v)
    return made is not None and made.name == "constant" and made.attrs["value"] == 1.0


@adjoint_rule("mod")
def _mod(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x  # a % b = a - floor(a / b) * b
    return [g, e.scaled(g, e.op("neg", e.op("floor", e.op("div", a, b))))]


@adjoint_rule("pow")
def _pow(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    r = e.result(op)
    one = e.const(1.0, a.type)
    zero = e.const(0.0, a.type)
    # d(a ** b)/da is 0 where b is 0 (not 0 * a ** -1, NaN at a = 0), as in JAX and PyTorch
    da = e.op("select", e.op("eq", b, zero), zero,
              e.op("mul", b, e.op("pow", a, e.op("sub", b, one))))
    positive = e.op("gt", a, zero)
    db = e.op("select", positive, e.op("mul", r, e.op("log", e.op("select", positive, a, one))), zero)
    return [e.scaled(g, da), e.scaled(g, db)]


@adjoint_rule("min", "max")
def _min_max(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x  # the first operand wins ties, as the forward op does
    # a whole-array min is a tensor_map whose attribute names the function
    is_min = op.name == "min" or op.attrs.get("fn") in ("min", "minimum", "fmin")
    first = e.op("le" if is_min else "ge", a, b)
    zero = e.const(0.0, a.type)
    return [e.op("select", first, g, zero), e.op("select", first, zero, g)]


@adjoint_rule("abs")
def _abs(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    (a,) = x
    zero = e.const(0.0, a.type)
    negative = e.op("select", e.op("lt", a, zero), e.op("neg", g), zero)
    return [e.op("select", e.op("gt", a, zero), g, negative)]


@structural_rule("select")
def _select(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    c = x[0]
    zero = e.zero(g.type)
    return [None, e.op("select", c, g, zero), e.op("select", c, zero, g)]


@adjoint_rule("copysign")
def _copysign(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    r = e.result(op)
    zero = e.const(0.0, a.type)
    same = e.op("eq", e.op("ge", a, zero), e.op("ge", r, zero))
    return [e.op("select", same, g, e.op("neg", g)), None]


@adjoint_rule("fma")
def _fma(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b, _c = x
    return [e.scaled(g, b), e.scaled(g, a), g]


@adjoint_rule("clamp")
def _clamp(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    v, lo, hi = x
    zero = e.const(0.0, v.type)
    below = e.op("lt", v, lo)
    above = e.op("gt", v, hi)
    inside = e.op("logical_not", e.op("bit_or", below, above))
    return [e.op("select", inside, g, zero), e.op("select", below, g, zero),
            e.op("select", above, g, zero)]


# --- math builtins: d(result)/d(argument) from the argument and the result -----------

Derivative = Callable[["AdjointEmitter", Value, Value], Value]


def _unary(name: str, derivative: Derivative) -> None:
    def rule(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
        return [e.scaled(g, derivative(e, x[0], e.result(op)))]
    ADJOINT_RULES[name] = rule


def _one_minus_square(e: AdjointEmitter, v: Value) -> Value:
    return e.op("sub", e.const(1.0, v.type), e.op("mul", v, v))


def _inverse_sqrt_one_minus_square(e: AdjointEmitter, a: Value) -> Value:
    return e.op("div", e.const(1.0, a.type), e.op("sqrt", _one_minus_square(e, a)))


_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046
_TWO_OVER_SQRT_PI = 1.1283791670955126

_unary("sin", lambda e, a, r: e.op("cos", a))
_unary("cos", lambda e, a, r: e.op("neg", e.op("sin", a)))
_unary("tan", lambda e, a, r: e.op("add", e.const(1.0, a.type), e.op("mul", r, r)))
_unary("exp", lambda e, a, r: r)
_unary("exp2", lambda e, a, r: e.op("mul", r, e.const(_LN2, a.type)))
_unary("expm1", lambda e, a, r: e.op("add", r, e.const(1.0, a.type)))
_unary("log", lambda e, a, r: e.op("div", e.const(1.0, a.type), a))
_unary("log2", lambda e, a, r: e.op("div", e.const(1.0 / _LN2, a.type), a))
_unary("log10", lambda e, a, r: e.op("div", e.const(1.0 / _LN10, a.type), a))
_unary("log1p", lambda e, a, r: e.op("div", e.const(1.0, a.type),
                                     e.op("add", a, e.const(1.0, a.type))))
_unary("tanh", lambda e, a, r: _one_minus_square(e, r))
_unary("sinh", lambda e, a, r: e.op("cosh", a))
_unary("cosh", lambda e, a, r: e.op("sinh", a))
_unary("asin", lambda e, a, r: _inverse_sqrt_one_minus_square(e, a))
_unary("acos", lambda e, a, r: e.op("neg", _inverse_sqrt_one_minus_square(e, a)))
_unary("atan", lambda e, a, r: e.op("div", e.const(1.0, a.type),
                                    e.op("add", e.const(1.0, a.type), e.op("mul", a, a))))
_unary("erf", lambda e, a, r: e.op("mul", e.const(_TWO_OVER_SQRT_PI, a.type),
                                   e.op("exp", e.op("neg", e.op("mul", a, a)))))
_unary("erfc", lambda e, a, r: e.op("mul", e.const(-_TWO_OVER_SQRT_PI, a.type),
                                    e.op("exp", e.op("neg", e.op("mul", a, a)))))


@adjoint_rule("sqrt")
def _sqrt(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    (a,) = x
    r = e.result(op)
    d = _squared_length_of(e, op)
    if d is not None:  # sqrt(dot(d, d) + c): d receives 2 d (g / 2r) = (g / r) d at once
        coefficient = e.guarded(g, e.op("div", g, r))
        e.accumulate(d, e.op("mul", e.op("splat", coefficient, type=d.type), e.mapped(d)))
        return [None]
    return [e.scaled(g, e.op("div", e.const(0.5, a.type), r))]


def _squared_length_of(e: AdjointEmitter, op: Operation) -> Value | None:
    """The vector ``d`` when the operand of ``op`` is ``dot(d, d)``, or ``dot(d, d) + c``
    with ``c`` not varying, made in the block of ``op``; else None."""
    if op.name != "sqrt" or not isinstance(op.results[0].type, T.ScalarType):
        return None
    v = op.operands[0]
    made = _definition(e, v)
    if made is not None and made.name == "add" and made.parent is op.parent:
        first, second = made.operands
        if second not in e.varied:
            v = first
        elif first not in e.varied:
            v = second
        else:
            return None
        made = _definition(e, v)
    if made is None or made.name != "dot" or made.parent is not op.parent:
        return None
    d, other = made.operands
    return d if d is other and isinstance(d.type, T.VectorType) else None


def division_by_splat(e: AdjointEmitter, op: Operation, x: Sequence[Value],
                      g: Value) -> Adjoints | None:
    """``q = a / splat(s)`` for a vector ``a``: ``a`` receives ``g / s`` and ``s``
    (directly: not component by component through the splat) ``-dot(g, q) / s``. None
    where it does not apply (other operands, products that must be guarded)."""
    divisor = _definition(e, op.operands[1])
    if (divisor is None or not isinstance(op.operands[0].type, T.VectorType) or divisor.name != "splat" or divisor.parent is not op.parent
            or not isinstance(g.type, T.VectorType) or e.guards_products()):
        return None
    s = e.mapped(divisor.operands[0])
    count = T.element_count(g.type)
    ga = e.op("make_vector", *(e.op("div", e.op("extract", g, index=k), s)
                               for k in range(count)), type=g.type)
    e.accumulate(divisor.operands[0], e.op("neg", e.op("div", e.op("dot", g, e.result(op)), s)))
    return [ga, None]


@adjoint_rule("atan2")
def _atan2(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    y, xx = x
    norm = e.op("add", e.op("mul", y, y), e.op("mul", xx, xx))
    return [e.guarded(g, e.op("div", e.op("mul", g, xx), norm)),
            e.guarded(g, e.op("neg", e.op("div", e.op("mul", g, y), norm)))]


@adjoint_rule("hypot")
def _hypot(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    r = e.result(op)
    return [e.guarded(g, e.op("div", e.op("mul", g, a), r)),
            e.guarded(g, e.op("div", e.op("mul", g, b), r))]


@adjoint_rule("cast")
def _cast(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    source = x[0].type
    if not T.element_scalar(source).is_float:
        return [None]
    return [e.op("cast", g, type=source)]


@structural_rule("stop_gradient")
def _stop_gradient(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [None]


# --- vectors and matrices --------------------------------------------------------------


@structural_rule("splat")
def _splat(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [e.sum_components(g)]


@structural_rule("make_vector")
def _make_vector(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [e.op("extract", g, index=k) for k in range(len(x))]


@structural_rule("extract")
def _extract(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [e.op("insert", e.zero(x[0].type), g, index=op.attrs["index"])]


@structural_rule("insert")
def _insert(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    index = op.attrs["index"]
    scalar = T.element_scalar(x[0].type)
    return [e.op("insert", g, e.const(0.0, scalar), index=index),
            e.op("extract", g, index=index)]


@structural_rule("dot")
def _dot(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    if a is b:  # dot(d, d): one update of d's adjoint, by 2 g d, rather than two
        twice = e.op("mul", g, e.const(2.0, T.element_scalar(a.type)))
        return [e.op("mul", e.op("splat", twice, type=a.type), a), None]
    spread = e.op("splat", g, type=a.type)
    return [e.op("mul", spread, b), e.op("mul", spread, a)]


@structural_rule("cross")
def _cross(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    return [e.op("cross", b, g), e.op("cross", g, a)]


@structural_rule("matmul")
def _matmul(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    if isinstance(b.type, T.VectorType):
        return [e.op("outer", g, b), e.op("matmul", e.op("transpose", a), g)]
    return [e.op("matmul", g, e.op("transpose", b)), e.op("matmul", e.op("transpose", a), g)]


@structural_rule("transpose")
def _transpose(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [e.op("transpose", g)]


@structural_rule("outer")
def _outer(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    a, b = x
    return [e.op("matmul", g, b), e.op("matmul", e.op("transpose", g), a)]


def is_component_type(t: Any) -> bool:
    return isinstance(t, (T.VectorType, T.MatrixType))


def _zero_rule(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
    return [None] * len(x)


def per_component(rule: Rule) -> Rule:
    """A scalar rule applied to each component of vector and matrix operands; a scalar
    operand mixed with vectors receives the sum over components."""

    def lifted(e: AdjointEmitter, op: Operation, x: Sequence[Value], g: Value) -> Adjoints:
        if not is_component_type(g.type):
            return rule(e, op, x, g)
        if op.name == "div":
            shared = division_by_splat(e, op, x, g)
            if shared is not None:
                return shared
        count = T.element_count(g.type)
        result = e.result(op)
        parts: list[list[Value | None]] = [[] for _ in x]
        for k in range(count):
            xs = [e.op("extract", v, index=k) if is_component_type(v.type) else v for v in x]
            with e.result_override(e.op("extract", result, index=k)):
                adjoints = rule(e, op, xs, e.op("extract", g, index=k))
            for part, a in zip(parts, adjoints):
                part.append(a)
        out: list[Value | None] = []
        for v, part in zip(x, parts):
            if all(a is None for a in part):
                out.append(None)
            elif is_component_type(v.type):
                scalar = T.element_scalar(v.type)
                filled = [a if a is not None else e.const(0.0, scalar) for a in part]
                out.append(e.op("make_vector", *filled, type=v.type))
            else:
                out.append(e.add_all([a for a in part if a is not None]))
        return out

    return lifted


def attach_rules() -> None:
    """Puts every rule in the op registry, where the differentiate pass looks them up."""
    from kdsl.ir.ops import REGISTRY, set_derivative_rules

    for name, rule in ADJOINT_RULES.items():
        if name in REGISTRY:
            set_derivative_rules(name, adjoint=per_component(rule))
    for name, rule in STRUCTURAL_RULES.items():
        if name in REGISTRY:
            set_derivative_rules(name, adjoint=rule)
    for name in PIECEWISE_CONSTANT:
        if name in REGISTRY:
            set_derivative_rules(name, adjoint=_zero_rule)


attach_rules()

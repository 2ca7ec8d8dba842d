"""Adjoints of elementwise whole-array ops (``tensor_map``), as whole-array ops.

An elementwise op gets the elementwise adjoint of its scalar rule (rules.py), applied to
arrays; an operand that was broadcast receives the sum of its adjoint over the broadcast
axes. See tensor_rules.py for the reverse sweep of the other tensor ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.errors import CompileError
from kdsl.ir.autodiff.rules import ADJOINT_RULES, PIECEWISE_CONSTANT, STRUCTURAL_RULES
from kdsl.ir.autodiff.tensor_activity import LINEAR_FNS, is_array
from kdsl.ir.autodiff.tensor_shapes import constant_value, element_type
from kdsl.ir.core import Operation, Value
from kdsl.ir.effects import has_side_effects

if TYPE_CHECKING:
    from kdsl.ir.autodiff.tensor_rules import TensorAdjoints


_RULE_ALIASES = {"minimum": "min", "maximum": "max", "fmin": "min", "fmax": "max"}


class _ElementwiseEmitter:
    """What a scalar adjoint rule (rules.py) sees, building tensor ops instead: each op
    it makes is elementwise over broadcast arrays."""

    def __init__(self, tensors: TensorAdjoints, op: Operation, guard: bool) -> None:
        self.t = tensors
        self.forward_op = op
        self.guard = guard
        self.current = op
        self._result: Value | None = None

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        if attrs:
            raise CompileError(f"'{name}' cannot be differentiated in a whole-array "
                               "expression yet", self.forward_op.location)
        return self.t.map(name, list(operands))

    def const(self, value: float, t: Any) -> Value:
        scalar = T.element_scalar(t.dtype if isinstance(t, T.ArrayType) else t)
        if not scalar.is_float:
            scalar = T.f64
        return self.t.b.constant(value, scalar)

    def zero(self, t: Any) -> Value:
        return self.const(0.0, t)

    def guarded(self, g: Value, value: Value) -> Value:
        if not self.guard:
            return value
        is_zero = self.op("eq", g, self.const(0.0, element_type(g)))
        return self.op("select", is_zero, self.const(0.0, element_type(value)), value)

    def scaled(self, g: Value, derivative: Value) -> Value:
        return self.guarded(g, self.op("mul", g, derivative))

    def result(self, op: Operation) -> Value:
        if self._result is None:
            self._result = self.t.primal(op.result)
        return self._result



def map_adjoint(tensors: TensorAdjoints, op: Operation, g: Value) -> None:
    """Adds the adjoints of an elementwise op's (``tensor_map``) varied operands: its
    scalar rule (rules.py) applied to arrays, summed over the axes an operand was
    broadcast along."""
    fn = op.attrs["fn"]
    varied = [k for k, v in enumerate(op.operands) if tensors.is_varied(v)]
    if not varied or fn in PIECEWISE_CONSTANT:
        return
    name = _RULE_ALIASES.get(fn, fn)
    rule = STRUCTURAL_RULES.get(name) if name == "select" else ADJOINT_RULES.get(name)
    if name == "pow":
        rule = _pow
    if rule is None:
        raise CompileError(f"'{fn}' of arrays cannot be differentiated", op.location)
    _check_broadcasts(tensors, op, varied)
    start = len(tensors.b.block.ops)
    e = _ElementwiseEmitter(tensors, op, op.result in tensors.routed)
    x = [tensors.primal(v) if k in _needed_operands(op, name) else tensors.m.get(v, v)
         for k, v in enumerate(op.operands)]
    contributions = rule(e, op, x, g)  # type: ignore[arg-type]
    kept = {c for k in varied if (c := contributions[k]) is not None}
    _prune(tensors, start, kept)
    result = tensors.pattern(op.result)
    for k in varied:
        c = contributions[k]
        if c is None:
            continue
        target = op.operands[k]
        tensors.add_adjoint(target, tensors.reduce_to(c, target, result,
                                                lambda axis: tensors.dim(op.result, axis)))

def _needed_operands(op: Operation, name: str) -> range | tuple[int, ...]:
    if name in LINEAR_FNS:
        return ()
    if name == "select":
        return (0,)
    return range(len(op.operands))

def _check_broadcasts(tensors: TensorAdjoints, op: Operation, varied: list[int]) -> None:
    """An operand that varies must not be broadcast along an axis whose size is 1
    only at run time (see the module's docstring)."""
    n = op.result.type.ndim
    arrays = [v for v in op.operands if is_array(v)]
    checked: set[tuple[Value, Value]] = set()
    for k in varied:
        v = op.operands[k]
        if not is_array(v):
            continue
        p = tensors.pattern(v)
        for j, size in enumerate(p):
            axis = j + n - len(p)
            if size != "?":
                continue
            for other in arrays:
                po = tensors.pattern(other)
                i = axis - (n - len(po))
                if other is v or i < 0 or po[i] != "?":
                    continue
                mine, theirs = tensors.dim(v, j), tensors.dim(other, i)
                if mine is theirs or (mine, theirs) in checked:
                    continue
                checked.add((mine, theirs))
                one = tensors.b.constant(1, T.i64)
                ok = tensors.b.value("bit_or", tensors.b.value("eq", mine, theirs),
                                  tensors.b.value("eq", theirs, one))
                tensors.b.create("raise_shape_error", [ok, mine, theirs], {
                    "axis": axis,
                    "what": "under a gradient an operand of size 1 on an axis cannot be "
                            "broadcast; give it a new axis (a[None, :]) instead"})

def _prune(tensors: TensorAdjoints, start: int, kept: set[Value]) -> None:
    """Removes what a rule built and nothing uses (adjoints of constant operands)."""
    block = tensors.b.block
    emitted = block.ops[start:]
    live = set(kept)
    out: list[Operation] = []
    for op in reversed(emitted):
        if any(r in live for r in op.results) or has_side_effects(op):
            live.update(op.operands)
            out.append(op)
    removed = {r for op in emitted if op not in out for r in op.results}
    if not removed:
        return
    block.ops[start:] = list(reversed(out))
    tensors.recomputed = {k: v for k, v in tensors.recomputed.items() if v not in removed}
    tensors.dims = {k: v for k, v in tensors.dims.items() if v not in removed}


def _pow(e: Any, op: Operation, x: Sequence[Value], g: Value) -> list[Value | None]:
    """``a ** b``; with a constant exponent, ``b * a ** (b - 1)`` without a call to pow
    for the common small exponents."""
    a, b = x
    exponent = e.t.b.known_constants.get(b, constant_value(e.t.defs, op.operands[1]))
    if exponent is None:
        return ADJOINT_RULES["pow"](e, op, x, g)
    exponent = float(exponent)
    if exponent == 0.0:
        return [None, None]
    if exponent == 1.0:
        return [g, None]
    if exponent == 2.0:
        derivative = e.op("mul", e.const(2.0, element_type(a)), a)
    elif exponent == int(exponent) and 3 <= exponent <= 4:
        power = a  # a ** (exponent - 1)
        for _ in range(int(exponent) - 2):
            power = e.op("mul", power, a)
        derivative = e.op("mul", e.const(exponent, element_type(a)), power)
    elif exponent == 0.5:
        derivative = e.op("div", e.const(0.5, element_type(a)), e.result(op))
    else:
        derivative = e.op("mul", e.const(exponent, element_type(a)),
                          e.op("pow", a, e.const(exponent - 1.0, element_type(a))))
    return [e.scaled(g, derivative), None]

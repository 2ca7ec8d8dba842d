"""Debug-mode bounds checks: every array access is guarded; a bad index is reported as an
``IndexError`` naming the kernel, the source line, the index and the axis size, and the
access is skipped, so no input crashes the process."""

from __future__ import annotations

from typing import Any

from kdsl import types as T
from kdsl.ir.analysis import definitions
from kdsl.ir.builder import typed_operation
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.effects import ElementAccess, element_access


class _Emitter:
    def __init__(self, like: Operation) -> None:
        self.ops: list[Operation] = []
        self.location = like.location

    def add(self, name: str, operands: list[Value], **attrs: Any) -> Operation:
        op = typed_operation(name, operands, attrs, None, self.location)
        self.ops.append(op)
        return op

    def constant(self, value: Any, type: T.ScalarType) -> Value:
        value = bool(value) if type.is_bool else float(value) if type.is_float else int(value)
        return self.add("constant", [], value=value, type=type).result


_GUARD_YIELDS: set[Operation] = set()


def _as_written(index: Value, definitions: dict[Value, Operation]) -> Value:
    """The index the user wrote: ``a[-2]`` is lowered to ``-2 + size`` and ``a[k]`` to
    ``wrap_index k, size`` (the check is on the wrapped index); report -2 or k."""
    op = definitions.get(index)
    if op is not None and op.name == "wrap_index":
        return op.operands[0]
    if op is not None and op.name == "add":
        literal = definitions.get(op.operands[0])
        size = definitions.get(op.operands[1])
        if (literal is not None and literal.name == "constant" and literal.attrs["value"] < 0
                and size is not None and size.name == "array_dim"):
            return op.operands[0]
    return index


def _guard(
    op: Operation, access: ElementAccess, definitions: dict[Value, Operation]
) -> tuple[list[Operation], dict[Value, Value]]:
    array, indices = access.array, access.indices
    e = _Emitter(op)
    zero = e.constant(0, T.i64)
    inside: Value | None = None
    checks = []
    for axis, index in enumerate(indices):
        size = e.add("array_dim", [array], axis=axis).result
        ok = e.add("bit_and", [
            e.add("ge", [index, zero]).result,
            e.add("lt", [index, size]).result,
        ]).result
        checks.append((index, size, ok, axis))
        inside = ok if inside is None else e.add("bit_and", [inside, ok]).result
    assert inside is not None
    then_block, else_block = Block(), Block()
    op.parent = then_block
    then_block.ops.append(op)
    own_yield = typed_operation("yield", list(op.results), location=op.location)
    _GUARD_YIELDS.add(own_yield)
    then_block.ops.append(own_yield)
    report = _Emitter(op)
    # report the first failing axis
    for index, size, ok, axis in checks:
        report.add("raise_index_error", [_as_written(index, definitions), size, ok], axis=axis,
                   array=getattr(array, "name_hint", ""))
    fallback = [_zero(report, r.type) for r in op.results]
    report.add("yield", fallback)
    else_block.ops.extend(report.ops)
    guarded = typed_operation("if", [inside], {"types": [r.type for r in op.results]},
                              [then_block, else_block], op.location)
    # the guarded op keeps its results inside the region; the if gives them outside
    mapping = dict(zip(op.results, guarded.results))
    return e.ops + [guarded], mapping


def _zero(e: _Emitter, t: Any) -> Value:
    if isinstance(t, T.ScalarType):
        return e.constant(0, t)
    return e.add("splat", [e.constant(0, t.element)], type=t).result


def _visit(block: Block, mapping: dict[Value, Value], definitions: dict[Value, Operation]) -> None:
    out = []
    for op in block.ops:
        for region in op.regions:
            _visit(region, mapping, definitions)
        access = element_access(op)
        if access is not None:
            ops, results = _guard(op, access, definitions)
            out.extend(ops)
            mapping.update(results)
        else:
            out.append(op)
    block.ops = out


def run(function: Function, options: Any = None) -> None:
    mapping: dict[Value, Value] = {}
    _visit(function.body, mapping, definitions(function))
    # uses after the access now read the if's results; the yield inside keeps the original
    for op in function.walk():
        if op in _GUARD_YIELDS:
            continue
        op.operands = [mapping.get(v, v) for v in op.operands]
    _GUARD_YIELDS.clear()

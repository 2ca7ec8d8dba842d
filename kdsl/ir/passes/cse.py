"""Common-subexpression elimination over nested regions (a scoped table of pure ops)."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Block, Function, Value
from kdsl.ir.ops import Trait, lookup
from kdsl.ir.rewrite import remap_operands


def _key(op: Any) -> Any:
    attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items()))
    operands = tuple(id(v) for v in op.operands)
    if lookup(op.name).has(Trait.COMMUTATIVE):
        operands = tuple(sorted(operands))
    return (op.name, operands, attrs, tuple(str(r.type) for r in op.results))


def _visit(block: Block, table: dict[Any, list[Value]], mapping: dict[Value, Value]) -> None:
    scope = dict(table)
    kept = []
    for op in block.ops:
        op.operands = [mapping.get(v, v) for v in op.operands]
        for region in op.regions:
            _visit(region, scope, mapping)
        if not op.regions and lookup(op.name).has(Trait.PURE) and op.results:
            key = _key(op)
            found = scope.get(key)
            if found is not None:
                for old, new in zip(op.results, found):
                    mapping[old] = new
                continue
            scope[key] = op.results
        kept.append(op)
    block.ops = kept


def run(function: Function, options: Any = None) -> None:
    mapping: dict[Value, Value] = {}
    _visit(function.body, {}, mapping)
    remap_operands(function.body, mapping)

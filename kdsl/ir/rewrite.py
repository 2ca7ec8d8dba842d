"""Utilities passes share: cloning regions, replacing uses."""

from __future__ import annotations

from kdsl.ir.core import Block, Operation, Value


def clone_block(block: Block, mapping: dict[Value, Value]) -> Block:
    new = Block([Value(a.type, a.name_hint) for a in block.args])
    for old_arg, new_arg in zip(block.args, new.args):
        mapping[old_arg] = new_arg
    for op in block.ops:
        new.append(clone_op(op, mapping))
    return new


def clone_op(op: Operation, mapping: dict[Value, Value]) -> Operation:
    regions = [clone_block(r, mapping) for r in op.regions]
    new = Operation(
        op.name, [mapping.get(v, v) for v in op.operands], [r.type for r in op.results],
        dict(op.attrs), regions, op.location,
    )
    for old, fresh in zip(op.results, new.results):
        fresh.name_hint = old.name_hint
        mapping[old] = fresh
    return new


def remap_operands(root: Block, mapping: dict[Value, Value]) -> None:
    """Replaces uses of values by their images in ``mapping`` (followed transitively)."""
    if not mapping:
        return

    def resolve(v: Value) -> Value:
        while v in mapping:
            v = mapping[v]
        return v

    for op in root.walk():
        op.operands = [resolve(v) for v in op.operands]

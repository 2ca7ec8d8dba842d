"""Analyses passes and code generators share: where each value is defined, who uses it,
and which values a region takes from outside."""

from __future__ import annotations

from collections.abc import Sequence

from kdsl.ir.core import Block, Function, Operation, Value


def definitions(root: Block | Function | Operation) -> dict[Value, Operation]:
    """The op defining each result in ``root`` (block arguments have none)."""
    return {r: op for op in root.walk() for r in op.results}


def users(root: Block | Function | Operation) -> dict[Value, list[Operation]]:
    """The ops in ``root`` using each value, in walk order (an op using a value twice is
    listed twice)."""
    found: dict[Value, list[Operation]] = {}
    for op in root.walk():
        for v in op.operands:
            found.setdefault(v, []).append(op)
    return found


def free_values(blocks: Block | Sequence[Block]) -> list[Value]:
    """Values used in ``blocks`` (and their regions) but defined outside them, in order
    of first use."""
    regions = [blocks] if isinstance(blocks, Block) else list(blocks)
    defined: set[Value] = set()
    for block in regions:
        defined.update(block.args)
        for op in block.walk():
            defined.update(op.results)
            for region in op.regions:
                defined.update(region.args)
    seen: dict[Value, None] = {}
    for block in regions:
        for op in block.walk():
            for v in op.operands:
                if v not in defined:
                    seen.setdefault(v, None)
    return list(seen)

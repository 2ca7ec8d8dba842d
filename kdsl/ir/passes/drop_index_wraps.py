"""Index wraps where they cannot matter are removed: ``wrap_index %i, %n`` (a negative
index counts from the end, as in Python) becomes ``%i`` itself when the range analysis
proves ``%i`` non-negative, so ``for i in kd.prange(n): a[i] = ...`` pays nothing for
Python's negative indices. The array sizes only those wraps used go too."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Block, Function, Operation, Value, use_counts
from kdsl.ir.ranges import NonNegative
from kdsl.ir.rewrite import remap_operands


def _drop(block: Block, facts: NonNegative, mapping: dict[Value, Value],
          sizes: set[Value]) -> None:
    kept = []
    for op in block.ops:
        for region in op.regions:
            _drop(region, facts, mapping, sizes)
        if op.name == "wrap_index" and op.operands[0] in facts:
            mapping[op.result] = op.operands[0]
            sizes.add(op.operands[1])
            continue
        kept.append(op)
    block.ops = kept


def _remove_unused_sizes(block: Block, sizes: set[Value], uses: dict[Value, int]) -> None:
    def unused(op: Operation) -> bool:
        return op.name == "array_dim" and op.result in sizes and not uses.get(op.result)

    block.ops = [op for op in block.ops if not unused(op)]
    for op in block.ops:
        for region in op.regions:
            _remove_unused_sizes(region, sizes, uses)


def run(function: Function, options: Any = None) -> None:
    drop_index_wraps(function.body)


def drop_index_wraps(body: Block) -> None:
    """Removes the wraps of provably non-negative indices from a function body (also run
    by the frontend on each function it lowers, so that its IR shows only the wraps that
    may matter)."""
    mapping: dict[Value, Value] = {}
    sizes: set[Value] = set()
    _drop(body, NonNegative(body), mapping, sizes)
    remap_operands(body, mapping)
    _remove_unused_sizes(body, sizes, use_counts(body))

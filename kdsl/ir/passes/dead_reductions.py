"""Drops the reductions of parallel loops whose result is never read (a loss a fused
vector-Jacobian product computes along with the adjoints, say): its partial value, what
only it depends on, and its combination across threads."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.effects import has_side_effects
from kdsl.ir.structured import ParallelForOp


def _only_feeds_itself(body: Block, partial: Value, position: int) -> bool:
    """Whether ``partial`` reaches nothing but pure operations whose values reach only
    the yield at ``position`` (the next partial value of the same reduction)."""
    dependent = {partial}
    for op in body.ops:
        if op.name == "yield":
            return not any(v in dependent for k, v in enumerate(op.operands) if k != position)
        if any(v in dependent for inner in op.walk() for v in inner.operands):
            if has_side_effects(op):
                return False
            dependent.update(op.results)
    return False


def _drop(op: Operation, position: int) -> None:
    loop = ParallelForOp(op)
    body = loop.body
    del op.operands[loop.ndim + position]
    del body.args[loop.ndim + position]
    del body.ops[-1].operands[position]
    del op.results[position]
    kinds = list(op.attrs["reductions"])
    del kinds[position]
    op.attrs["reductions"] = tuple(kinds)


def drop_unread_reductions(block: Block, counts: dict[Any, int]) -> bool:
    """Removes, in ``block`` and the blocks inside it, each reduction whose result no one
    reads; the values it used become dead for dead-code elimination to sweep."""
    changed = False
    for op in block.ops:
        for region in op.regions:
            changed |= drop_unread_reductions(region, counts)
        if op.name != "parallel_for":
            continue
        loop = ParallelForOp(op)
        for position in reversed(range(len(op.results))):
            if counts.get(op.results[position], 0) == 0 and _only_feeds_itself(
                    loop.body, loop.partials[position], position):
                yielded = loop.body.ops[-1].operands[position]
                counts[yielded] = counts.get(yielded, 0) - 1
                counts[loop.inits[position]] = counts.get(loop.inits[position], 0) - 1
                _drop(op, position)
                changed = True
    return changed

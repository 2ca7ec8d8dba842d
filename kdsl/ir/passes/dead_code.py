"""Dead-code elimination: drops operations whose results are unused and that have no effects."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Block, Function, use_counts
from kdsl.ir.effects import has_side_effects
from kdsl.ir.passes.dead_reductions import drop_unread_reductions


def _sweep(block: Block, counts: dict[Any, int]) -> bool:
    changed = False
    kept = []
    for op in reversed(block.ops):
        for region in op.regions:
            changed |= _sweep(region, counts)
        if all(counts.get(r, 0) == 0 for r in op.results) and not has_side_effects(op) and (
            op.name not in ("yield", "condition", "return")
        ):
            for inner in op.walk():
                for v in inner.operands:
                    counts[v] = counts.get(v, 0) - 1
            changed = True
            continue
        kept.append(op)
    kept.reverse()
    block.ops = kept
    return changed


def run(function: Function, options: Any = None) -> None:
    while True:
        counts = use_counts(function.body)
        if not (drop_unread_reductions(function.body, counts) | _sweep(function.body, counts)):
            break

"""Parallel regions that are the same code, compiled once.

A func with a parallel loop called in two places (a simulation's force computation before
its time loop and inside it) is inlined twice, and so is its region: two functions LLVM
would optimise and compile twice. Where two regions of a module are the same code (the
same LLVM IR apart from their names and the identities of their loop metadata), every
call and every reference of the second goes to the first, and the second becomes a call
of the first (which LLVM drops once nothing refers to it).
"""

from __future__ import annotations

import re
from typing import Any

from llvmlite import ir

from kdsl.codegen.split_module import REGION_NAME, instruction_count

_METADATA_REFERENCE = re.compile(r"!\d+\b")


def merge_identical_regions(module: ir.Module) -> int:
    """Merges the module's identical regions (see the module's docstring); how many it
    merged into others. Repeated until none is left, so that regions calling identical
    regions (nested parallel loops) merge too."""
    merged: set[int] = set()
    while True:
        duplicates = _duplicates(module, merged)
        if not duplicates:
            return len(merged)
        _redirect(module, duplicates)
        for duplicate, first in duplicates.values():
            _call_instead(duplicate, first)
            merged.add(id(duplicate))


def _regions(module: ir.Module, merged: set[int]) -> list[ir.Function]:
    return [f for f in module.functions if f.blocks and f.linkage == "internal"
            and REGION_NAME.fullmatch(f.name) and id(f) not in merged]


def _duplicates(module: ir.Module,
                merged: set[int]) -> dict[int, tuple[ir.Function, ir.Function]]:
    """The id of each region that is the same code as one before it -> the region and
    that one."""
    regions = _regions(module, merged)
    if len(regions) < 2:
        return {}
    # the text is rendered only for regions with the same type and size as another
    by_shape: dict[tuple[str, int, int], list[ir.Function]] = {}
    for f in regions:
        by_shape.setdefault((str(f.ftype), len(f.blocks), instruction_count(f)), []).append(f)
    nodes: dict[str, Any] | None = None
    duplicates: dict[int, tuple[ir.Function, ir.Function]] = {}
    for candidates in by_shape.values():
        if len(candidates) < 2:
            continue
        if nodes is None:
            nodes = {node.get_reference(): node for node in module.metadata}
        seen: dict[str, ir.Function] = {}
        for f in candidates:
            first = seen.setdefault(_code(f, nodes), f)
            if first is not f:
                duplicates[id(f)] = (f, first)
    return duplicates


def _code(f: ir.Function, nodes: dict[str, Any]) -> str:
    """The function's LLVM IR with its own name left out and each loop's metadata node (a
    node whose first operand is itself) written as the hints it holds."""
    text = str(f).replace(f'@"{f.name}"', "@<self>", 1)

    def loop_hints(match: re.Match[str]) -> str:
        node = nodes.get(match.group(0))
        operands = getattr(node, "operands", ())
        if node is None or not operands or operands[0] is not node:
            return match.group(0)
        return "<loop " + ", ".join(str(op) for op in operands[1:]) + ">"

    return _METADATA_REFERENCE.sub(loop_hints, text)


def _redirect(module: ir.Module, duplicates: dict[int, tuple[ir.Function, ir.Function]]) -> None:
    """Every instruction's use of a duplicate (a call, a cast to a pointer) takes the
    region it duplicates instead."""
    for f in module.functions:
        for block in f.blocks:
            for instruction in block.instructions:
                for op in [op for op in instruction.operands if id(op) in duplicates]:
                    instruction.replace_usage(op, duplicates[id(op)][1])


def _call_instead(duplicate: ir.Function, first: ir.Function) -> None:
    """The duplicate's body becomes a call of the region it duplicates (for a use the
    redirection cannot see, such as one inside a constant expression)."""
    duplicate.blocks = []
    builder = ir.IRBuilder(duplicate.append_basic_block("merged"))
    result = builder.call(first, list(duplicate.args), tail=True)
    if isinstance(duplicate.ftype.return_type, ir.VoidType):
        builder.ret_void()
    else:
        builder.ret(result)

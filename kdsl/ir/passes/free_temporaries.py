"""Freeing temporaries: an array made inside a loop body (a materialised whole-array
value, a ``kd.zeros`` there) is released at the end of the body when it cannot escape it,
so that a time loop does not hold one array per iteration until the call returns."""

from __future__ import annotations

from typing import Any

from kdsl.ir.analysis import users
from kdsl.ir.builder import typed_operation
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.effects import allocates, view_source

_ESCAPES = ("yield", "return", "condition", "call")


def escapes(array: Value, users: dict[Value, list[Operation]]) -> bool:
    """Whether the array (or a view of it) leaves the block it was made in."""
    pending, seen = [array], {array}
    while pending:
        value = pending.pop()
        for user in users.get(value, []):
            if user.name in _ESCAPES:
                return True
            if view_source(user) is value or user.name == "select":
                for r in user.results:
                    if r not in seen:
                        seen.add(r)
                        pending.append(r)
    return False


def _visit(block: Block, users_of: dict[Value, list[Operation]], top: bool) -> None:
    for op in block.ops:
        for region in op.regions:
            _visit(region, users_of, False)
    if top:
        return  # arrays of the call itself are released when it returns
    frees = [
        typed_operation("array_free", [op.result], location=op.location)
        for op in block.ops if allocates(op) and not escapes(op.result, users_of)
    ]
    if frees:
        terminator = block.ops[-1] if block.ops and block.ops[-1].name in _ESCAPES else None
        body = block.ops[:-1] if terminator is not None else block.ops
        block.ops = body + frees + ([terminator] if terminator is not None else [])
        for op in frees:
            op.parent = block


def run(function: Function, options: Any = None) -> None:
    _visit(function.body, users(function), True)

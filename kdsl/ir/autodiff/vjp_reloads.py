"""Cheap values an adjoint branch computes again instead of carrying them.

An adjoint branch of a parallel loop's body reads the values its recomputation made in
the branch of the same condition, as results of that branch, all live from one to the
other. A value made in the recomputing branch from loads of arrays the loop never writes
by a few cheap ops (a difference of two positions, an index) is made again in the adjoint
branch from the same loads instead: fewer values to keep (pipeline.py carries the others
from one iteration to the next).
"""

from __future__ import annotations

from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.effects import written_arrays
from kdsl.ir.rewrite import clone_op

CHEAP = ("array_load", "sub", "add", "neg", "cast", "wrap_index", "array_dim",
         "eq", "ne", "lt", "le", "gt", "ge")
_MAX_OPS = 6  # ops made again per value


def reload_cheap_values(body: Block) -> None:
    """Rewrites the adjoint branches at the top level of ``body`` (a parallel loop's)."""
    written = written_arrays(body)
    for k, op in enumerate(body.ops):
        if op.name != "if" or len(op.regions) != 2:
            continue
        first = next((a for a in reversed(body.ops[:k]) if a.name == "if"
                      and len(a.regions) == 2 and a.operands[0] is op.operands[0]), None)
        if first is not None:
            _reload_in(first, op.regions[0], written)


def _reload_in(first: Operation, branch: Block, written: set[Value]) -> None:
    then = first.regions[0]
    yielded = dict(zip(first.results, then.ops[-1].operands))
    defined = {r: inner for inner in then.ops for r in inner.results}
    inside = {r for inner in first.walk() for r in inner.results}
    made: list[Operation] = []
    mapping: dict[Value, Value] = {}
    for result, value in yielded.items():
        if not any(result in inner.operands for inner in branch.walk()):
            continue
        ops = cheap_slice(value, defined, inside, written)
        if ops is None:
            continue
        local: dict[Value, Value] = {}
        made.extend(clone_op(op, local) for op in ops)
        mapping[result] = local.get(value, value)
    if not mapping:
        return
    for inner in branch.walk():
        inner.operands = [mapping.get(v, v) for v in inner.operands]
    for op in made:
        op.parent = branch
    branch.ops[:0] = made


def cheap_slice(value: Value, defined: dict[Value, Operation], inside: set[Value],
                written: set[Value], limit: int = _MAX_OPS) -> list[Operation] | None:
    """The ops of ``defined`` that make ``value`` from values made outside ``inside``, in
    order, if they are few and cheap and read no array the loop writes."""
    found: list[Operation] = []

    def visit(v: Value) -> bool:
        op = defined.get(v)
        if op is None:
            return v not in inside
        if op in found:
            return True
        if op.name not in CHEAP or op.regions:
            return False
        if op.name == "array_load" and op.operands[0] in written:
            return False
        if not all(visit(x) for x in op.operands):
            return False
        found.append(op)
        return len(found) <= limit

    if not visit(value) or not found:
        return None
    return found

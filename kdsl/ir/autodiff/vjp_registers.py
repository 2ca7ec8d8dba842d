"""Adjoints of a parallel iteration's own elements summed in registers.

An adjoint loop adds into ``d_x[i]`` (``i`` its index) once per use of ``x[i]``: eight
times for a mass with eight springs, each add a read-modify-write of memory that the
next one waits for. When the iteration only adds into that array (no loads, no plain
stores), the adds at its own index become a sum carried through the body (through the
branches that hold them, as an extra value they yield), added into the array once at the
end. Adds at other indices (a neighbour's ``d_x[j]``) stay as they are: the order of the
adds changes, as the threads' order of atomic adds does.
"""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Operation, Value

_ADDS = ("add", "sub")


def sum_own_elements(loop: Operation) -> None:
    """Rewrites the body of the parallel loop ``loop`` (see the module's doc)."""
    body = loop.regions[0]
    ivs = body.args[:loop.attrs["ndim"]]
    for array in _summed_arrays(body, ivs):
        _carry_sum(body, array, ivs)


def _own_add(op: Operation, array: Value, ivs: list[Value], used: set[Value]) -> bool:
    return (op.name == "atomic_rmw" and op.operands[0] is array
            and op.operands[1:-1] == ivs and op.attrs.get("kind") in _ADDS
            and op.result not in used)


def _summed_arrays(body: Block, ivs: list[Value]) -> list[Value]:
    """Arrays the body only adds into, at least twice at its own index (outside loops)."""
    used = {v for op in body.walk() for v in op.operands}
    counts: dict[Value, int] = {}
    for op in _outside_loops(body):
        if op.name == "atomic_rmw" and _own_add(op, op.operands[0], ivs, used):
            counts[op.operands[0]] = counts.get(op.operands[0], 0) + 1
    found = []
    for array, count in counts.items():
        t = array.type
        if count < 2 or not isinstance(t, T.ArrayType) or not isinstance(
                t.dtype, (T.ScalarType, T.VectorType)):
            continue
        other_uses = [op for op in body.walk() if array in op.operands
                      and op.name not in ("atomic_rmw", "array_dim")]
        if other_uses or any(op.name == "atomic_rmw" and op.operands[0] is array
                             and op.result in used for op in body.walk()):
            continue
        found.append(array)
    return found


def _outside_loops(block: Block) -> list[Operation]:
    """The ops of ``block`` and of the branches nested in it (not inside loops)."""
    found = []
    for op in block.ops:
        found.append(op)
        if op.name == "if":
            for region in op.regions:
                found.extend(_outside_loops(region))
    return found


def _zero(builder: IRBuilder, t: T.ScalarType | T.VectorType) -> Value:
    if isinstance(t, T.ScalarType):
        return builder.constant(0.0, t)
    return builder.value("splat", builder.constant(0.0, t.element), type=t)


def _carry_sum(body: Block, array: Value, ivs: list[Value]) -> None:
    t = array.type
    assert isinstance(t, T.ArrayType)
    dtype = t.dtype
    assert isinstance(dtype, (T.ScalarType, T.VectorType))
    used = {v for op in body.walk() for v in op.operands}
    start = Block()
    total = _zero(IRBuilder(start), dtype)
    total = _sum_in(body, array, ivs, used, total)
    terminator = body.ops.pop()
    builder = IRBuilder(body)
    builder.create("atomic_rmw", [array, *ivs, total], {"kind": "add", "implicit": True})
    body.ops.append(terminator)
    body.ops[:0] = start.ops
    for op in body.ops:
        op.parent = body


def _sum_in(block: Block, array: Value, ivs: list[Value], used: set[Value],
            total: Value) -> Value:
    """Replaces the own-index adds of ``block`` (and of its branches) by additions to
    ``total``; returns the sum at the end of the block (before its terminator)."""
    kept: list[Operation] = []
    for op in block.ops:
        if _own_add(op, array, ivs, used):
            name = "add" if op.attrs["kind"] == "add" else "sub"
            added = Operation(name, [total, op.operands[-1]], [total.type], {}, [], op.location)
            kept.append(added)
            total = added.result
            continue
        if op.name == "if" and any(_own_add(inner, array, ivs, used) for region in op.regions
                                   for inner in _outside_loops(region)):
            incoming = total
            for region in op.regions:
                terminator = region.ops[-1]
                region.ops = region.ops[:-1]
                end = _sum_in(region, array, ivs, used, incoming)
                terminator.operands = [*terminator.operands, end]
                region.ops.append(terminator)
            op.attrs["types"] = [*op.attrs.get("types", [r.type for r in op.results]),
                                 total.type]
            result = Value(total.type, "sum")
            op.results.append(result)
            total = result
        kept.append(op)
    block.ops = kept
    for op in kept:
        op.parent = block
    return total

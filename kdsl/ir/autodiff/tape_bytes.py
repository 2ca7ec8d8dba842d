"""Counting the memory a gradient keeps for its reverse sweep, at run time.

Every array the sweep allocates for saved values (loop tapes, checkpoints, copies of
arrays updated in place) is counted where it is made: a two-slot counter holds the bytes
live now and the most live at once. An array made inside a block is released at the end
of that block (see passes/free_temporaries.py), where its bytes leave the live count.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from kdsl import types as T
from kdsl.ir.analysis import users
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.passes.free_temporaries import escapes

_LIVE, _PEAK = 0, 1
_TERMINATORS = ("yield", "condition", "return")
_COUNTER = T.ArrayType(T.i64, 1, True)


def _itemsize(dtype: T.ScalarType | T.VectorType | T.MatrixType) -> int:
    if isinstance(dtype, T.VectorType):
        return dtype.element.itemsize * dtype.size
    if isinstance(dtype, T.MatrixType):
        return dtype.element.itemsize * dtype.rows * dtype.cols
    return dtype.itemsize


def _counted(ops: list[Operation], op: Operation, t: T.ArrayType,
             update: Callable[[IRBuilder, Value, str, int], Value]) -> Value:
    """Appends to ``ops`` the counting of the array ``op`` makes; returns its size in bytes."""
    sizes: list[Value] = []

    def count(b: IRBuilder) -> None:
        size = b.constant(_itemsize(t.dtype), T.i64)
        for extent in op.operands:
            size = b.value("mul", size, b.cast(extent, T.i64))
        old = update(b, size, "add", _LIVE)
        update(b, b.value("add", old, size), "max", _PEAK)
        sizes.append(size)

    ops.extend(_built(count))
    return sizes[0]


def _built(fill: Callable[[IRBuilder], object]) -> list[Operation]:
    block = Block([])
    fill(IRBuilder(block))
    return block.ops


def count_tape_bytes(body: Block, tape_arrays: set[Value]) -> Value:
    """Adds the counting to the gradient's body (not yet returning); returns the peak,
    read at its end."""
    if not tape_arrays:
        zero = _built(lambda b: b.constant(0, T.i64))
        body.ops.extend(zero)
        zero[0].parent = body
        return zero[0].result
    counter: list[Value] = []

    def make_counter(b: IRBuilder) -> None:
        two = b.constant(2, T.i64)
        counter.append(b.create("array_new", [two], {"type": _COUNTER, "fill": "zeros"}).result)

    prologue = _built(make_counter)
    users_of = users(body)

    def update(b: IRBuilder, size: Value, kind: str, slot: int) -> Value:
        index = b.constant(slot, T.i64)
        return b.create("atomic_rmw", [counter[0], index, size], {"kind": kind}).result

    def visit(block: Block, top: bool) -> None:
        ops: list[Operation] = []
        releases: list[Operation] = []
        for op in block.ops:
            for region in op.regions:
                visit(region, False)
            ops.append(op)
            if op.name != "array_new" or op.result not in tape_arrays:
                continue
            t = op.result.type
            assert isinstance(t, T.ArrayType)
            size = _counted(ops, op, t, update)
            if not top and not escapes(op.result, users_of):
                releases.extend(_built(partial(update, size=size, kind="sub", slot=_LIVE)))
        if releases:
            last = ops[-1] if ops and ops[-1].name in _TERMINATORS else None
            ops = (ops[:-1] if last else ops) + releases + ([last] if last else [])
        for op in ops:
            op.parent = block
        block.ops = ops

    visit(body, True)
    peak = _built(lambda b: b.value("array_load", counter[0], b.constant(_PEAK, T.i64)))
    body.ops = prologue + body.ops + peak
    for op in body.ops:
        op.parent = body
    return peak[-1].result

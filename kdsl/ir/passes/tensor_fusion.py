"""Fusion decisions of the tensor lowering: which elementwise producer is computed inside
its consumer's loop, and when an assignment's destination cannot overlap its operands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.effects import has_side_effects
from kdsl.ir.passes.tensor_matmul import lower_matmul

if TYPE_CHECKING:
    from kdsl.ir.passes.lower_tensors import TensorLowerer


def feeds_elementwise(lo: TensorLowerer, op: Operation, block: Block, position: int) -> bool:
    users = lo.users.get(op.result, [])
    return (len(users) == 1 and users[0].name == "tensor_map"
            and fusable(lo, op, block, position))


def lower_deferred(lo: TensorLowerer, value: Value) -> None:
    """Lowers the products an expression reads that wait for an epilogue, before it."""
    for leaf in lo.leaves(value):
        if leaf in lo.deferred:
            lo.mapping[leaf] = lower_matmul(lo, lo.deferred.pop(leaf))


def fusable(lo: TensorLowerer, op: Operation, block: Block, position: int) -> bool:
    users = lo.users.get(op.result, [])
    if len(users) != 1 or lo.uses.get(op.result, 0) != 1:
        return False
    user = users[0]
    if user.name not in ("tensor_map", "tensor_assign", "tensor_reduce"):
        return False
    if user not in block.ops:
        return False
    between = block.ops[position + 1:block.ops.index(user)]
    return not any(has_side_effects(other) for other in between)


def disjoint_rows(lo: TensorLowerer, a: Value, b: Value) -> bool:
    """Views of one array at two different constant indices of its first axis
    (``a[0, 1:-1]`` and ``a[1, 1:-1]``) share no element."""
    ops = [lo.definitions.get(v) for v in (a, b)]
    if any(op is None or op.name != "array_view" for op in ops):
        return False
    first, second = ops
    assert first is not None and second is not None
    if first.operands[0] is not second.operands[0]:
        return False
    if first.attrs["spec"][0] != ("index",) or second.attrs["spec"][0] != ("index",):
        return False
    indices = [lo.definitions.get(op.operands[1]) for op in (first, second)]
    if any(i is None or i.name != "constant" for i in indices):
        return False
    x, y = (i.attrs["value"] for i in indices)  # type: ignore[union-attr]
    return (x >= 0) == (y >= 0) and x != y

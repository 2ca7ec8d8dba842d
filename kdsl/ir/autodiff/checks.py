"""Constructs whose gradient would not be exact: located compile errors, found before
anything is emitted."""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.autodiff.activity import is_float
from kdsl.ir.autodiff.bits import check_bits_round_trips
from kdsl.ir.autodiff.emitter import located_error
from kdsl.ir.autodiff.memory import array_bases
from kdsl.ir.autodiff.tensor_activity import REVERSED_HERE, check_tensor_ops
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.location import SourceLocation
from kdsl.ir.ops import lookup


def check_differentiable(body: Block, varied: set[Value], varied_arrays: set[Value],
                         stateful: set[Value]) -> None:
    """Constructs whose gradient would not be exact are located errors."""
    check_tensor_ops(body, varied, varied_arrays)
    check_bits_round_trips(body, varied)
    check_no_early_exits(body)
    bases = array_bases(body)
    used = {v for op in body.walk() for v in op.operands}
    for op in body.walk():
        if op.name in ("array_store", "atomic_rmw"):
            target = op.operands[0]
            array = bases.get(target, target)
            if array in stateful and target is not array:
                raise located_error(
                    "an in-place update through a view cannot be differentiated yet; index "
                    "the array itself", op.location)
            if array in stateful and isinstance(array.type, T.ArrayType) and array.type.ndim > 3:
                raise located_error(
                    "in-place updates of arrays of more than 3 axes cannot be differentiated yet",
                    op.location)
            if op.name == "atomic_rmw" and (array in stateful or op.operands[-1] in varied):
                if op.result in used:
                    raise located_error(
                        "the old value an atomic update returns cannot be differentiated",
                        op.location)
                if op.attrs["kind"] not in ("add", "sub"):
                    raise located_error(
                        f"an atomic {op.attrs['kind']} cannot be differentiated", op.location)
        if op.name == "call" and "gradient" not in op.attrs:
            raise located_error("calls that were not inlined cannot be differentiated",
                                op.location)
        if op.name == "parallel_for":
            for kind, r in zip(op.attrs["reductions"], op.results):
                if r in varied and kind not in ("add", "min", "max"):
                    raise located_error(
                        f"a '{kind}' reduction cannot be differentiated yet",
                        reduction_location(op, op.results.index(r)))
        if not op.regions and op.name not in ("array_load", "array_store", "atomic_rmw",
                                              "yield", "condition", "return", "call",
                                              *REVERSED_HERE):
            if any(r in varied for r in op.results) and lookup(op.name).adjoint is None:
                raise located_error(
                    f"'{op.name}' has no derivative rule; its result cannot be differentiated",
                    op.location)
        for r in op.results:
            if r in varied and not is_float(r.type):
                raise located_error("this value cannot be differentiated", op.location)


def reduction_location(op: Operation, k: int) -> SourceLocation:
    """Where the ``k``-th reduction of parallel loop ``op`` is updated (``p *= x[i]``): the
    op making the value its body yields, else the loop's line."""
    body = op.regions[0]
    yielded = body.ops[-1].operands[k] if body.ops and body.ops[-1].name == "yield" else None
    for inner in body.ops:
        if yielded is not None and yielded in inner.results:
            return inner.location
    return op.location


def check_no_early_exits(body: Block) -> None:
    """A parallel loop left by ``break`` or ``return``: which iterations ran is not
    differentiable."""
    for op in body.walk():
        if op.name == "parallel_for" and op.attrs.get("stops"):
            raise located_error(
                "a parallel loop left by 'break' or 'return' cannot be differentiated: which "
                "of its iterations run is not fixed", op.location)

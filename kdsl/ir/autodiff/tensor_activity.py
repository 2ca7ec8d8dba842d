"""Whole-array (tensor) ops under a gradient: which of their values vary with the
differentiated arguments, and the cases whose gradient would not be exact yet (located
errors). Their adjoints are in tensor_rules.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kdsl import types as T
from kdsl.errors import CompileError
from kdsl.ir.analysis import definitions, users
from kdsl.ir.core import Block, Operation, Value

TENSOR_OPS = ("tensor_map", "tensor_reduce", "tensor_matmul", "tensor_assign")
VIEW_OPS = ("array_view", "array_transpose")
REVERSED_HERE = TENSOR_OPS + VIEW_OPS
"""Ops whose adjoint tensor_rules.py emits (views only when they view an array value that
varies)."""
LINEAR_FNS = ("add", "sub", "neg")


class WholeArrayGradientError(CompileError):
    """A whole-array expression the whole-array adjoints do not cover yet; the gradient
    is then taken of its loops, after the tensor lowering (passes/differentiate.py)."""


def is_stop_gradient(op: Operation) -> bool:
    """``kd.stop_gradient`` of a scalar, vector or matrix, or of an array."""
    return op.name == "stop_gradient" or (op.name == "tensor_map"
                                          and op.attrs["fn"] == "stop_gradient")


def is_array(v: Value) -> bool:
    return isinstance(v.type, T.ArrayType)


def is_float_array(v: Value) -> bool:
    return is_array(v) and T.element_scalar(v.type.dtype).is_float


def tensor_activity(op: Operation, varied: set[Value], arrays: set[Value],
                    bases: dict[Value, Value], mark: Callable[[Iterable[Value], set[Value]], None]
                    ) -> None:
    """The activity of a tensor op: its result varies when an operand does (arrays go
    into ``arrays``, scalars into ``varied``); an assignment of values that vary makes
    its destination (and the array it views) vary."""
    if not any(v in varied or v in arrays for v in op.operands) or is_stop_gradient(op):
        return
    if op.name == "tensor_assign":
        dest, source = op.operands
        if source in varied or (source in arrays and is_float_array(source)):
            mark([bases.get(dest, dest), dest], arrays)
        return
    result = op.result
    if is_float_array(result):
        mark([result], arrays)
    elif isinstance(result.type, T.ScalarType) and result.type.is_float:
        mark([result], varied)


def root_array(v: Value, defs: dict[Value, Operation]) -> Value:
    op = defs.get(v)
    while op is not None and op.name in VIEW_OPS + ("cast",) and is_array(op.operands[0]):
        v = op.operands[0]
        op = defs.get(v)
    return v


def _is_memory(v: Value, defs: dict[Value, Operation]) -> bool:
    """An array with storage of its own: an argument or a temporary (``kd.zeros``)."""
    op = defs.get(v)
    return op is None or op.name == "array_new"


def touched_arrays(op: Operation, defs: dict[Value, Operation]) -> set[Value]:
    """The arrays whose elements ``op`` (or an op inside it) reads or writes."""
    return {root_array(v, defs) for inner in op.walk() for v in inner.operands
            if is_array(v) and inner.name not in VIEW_OPS + ("array_dim", "cast")}


def written_arrays(op: Operation, defs: dict[Value, Operation]) -> set[Value]:
    return {root_array(inner.operands[0], defs) for inner in op.walk()
            if inner.name in ("tensor_assign", "array_store", "atomic_rmw")}


def _linear_read(op: Operation, v: Value, varied: set[Value]) -> bool:
    """Whether ``op`` reads array ``v`` only where its adjoint needs no values of it: a
    sum, or a product with (a quotient by) values that do not vary."""
    if op.name == "tensor_map":
        fn = op.attrs["fn"]
        if fn in ("mul", "div") and len(op.operands) == 2:
            first, second = op.operands
            if fn == "div" and second is v:  # the divisor's adjoint needs its values
                return False
            other = second if first is v else first
            return other is not v and other not in varied
        return fn in LINEAR_FNS
    if op.name == "tensor_reduce":
        return op.attrs["kind"] in ("sum", "mean")
    return op.name in ("tensor_assign",) + VIEW_OPS or op.name == "array_dim"


def check_tensor_ops(body: Block, varied: set[Value], varied_arrays: set[Value]) -> None:
    """Tensor ops under a gradient that would not give exact gradients yet: located
    errors."""
    defs = definitions(body)
    uses = users(body)
    for op in body.walk():
        check_array_results(op, varied | varied_arrays)
        if op.name not in TENSOR_OPS + VIEW_OPS:
            continue
        active = any(v in varied or v in varied_arrays for v in op.operands)
        if not active:
            continue
        if op.name in ("tensor_map", "tensor_reduce"):
            for v in op.operands:
                if is_array(v) and not isinstance(v.type.dtype, T.ScalarType) and v in varied_arrays:
                    raise WholeArrayGradientError("whole-array expressions of vectors or matrices cannot "
                                       "be differentiated yet; write the loop", op.location)
        if op.name == "tensor_assign":
            dest = op.operands[0]
            if op.parent is not body and dest in varied_arrays:
                raise WholeArrayGradientError(
                    "a whole-array assignment inside a loop cannot be differentiated yet",
                    op.location)
        for r in op.results:
            if r not in varied_arrays or _is_memory(root_array(r, defs), defs):
                continue
            for user in uses.get(r, []):
                if user.name in ("array_store", "atomic_rmw") or (
                        user.name == "tensor_assign" and user.operands[0] is r):
                    raise WholeArrayGradientError(
                        "writing into the result of a whole-array expression cannot be "
                        "differentiated yet; assign it into an array first", user.location)
    _check_overwrites(body, defs, varied | varied_arrays)


def check_array_results(op: Operation, varied: set[Value]) -> None:
    """A loop or branch whose result is an array that varies (``h = kd.tanh(w @ h)`` in a
    loop, ``y = a if c else b``): a located error rather than a derivative that misses
    it (in reverse and forward mode)."""
    if not op.regions or not any(is_array(r) for r in op.results):
        return
    yielded = [v for region in op.regions for inner in region.ops
               if inner.name in ("yield", "condition") for v in inner.operands]
    culprits = [v for v in [*op.operands, *yielded] if is_array(v) and v in varied]
    if culprits:
        made_inside = definitions(op)  # the line that binds the array, where there is one
        arrays_made = [v for v in [*culprits, *yielded] if is_array(v) and v in made_inside]
        where = made_inside[arrays_made[0]].location if arrays_made else op.location
        raise CompileError(
            "an array chosen or bound again inside a loop or branch (h = f(h), y = a if c "
            "else b) cannot be differentiated yet; assign into an array instead "
            "(h[:] = f(h))", where)


def needs_adjoint_storage(op: Operation, uses: dict[Value, list[Operation]]) -> bool:
    """Whether the adjoint of the array ``op`` makes must be kept in an array of its own:
    single elements of it are read, or it is used inside a loop or branch, directly or
    through a view (``t = kd.exp(a); u = t.T``, then ``u[i, j]`` in a loop)."""
    return any(user.parent is not op.parent or user.name not in REVERSED_HERE + ("array_dim",)
               or (user.name in VIEW_OPS and needs_adjoint_storage(user, uses))
               for user in uses.get(op.result, []))


def _check_overwrites(body: Block, defs: dict[Value, Operation], varied: set[Value]) -> None:
    """An array read (where its adjoint needs its values) and then overwritten by a
    whole-array assignment: the old values are not kept. ``varied``: the values and
    arrays that vary with the differentiated arguments."""
    read_before: dict[Value, Operation] = {}
    for op in body.ops:
        if op.name == "tensor_assign" and op.operands[0] in varied:
            root = root_array(op.operands[0], defs)
            if root in read_before:
                raise WholeArrayGradientError(
                    f"this assignment overwrites an array read before (line "
                    f"{read_before[root].location.line}) whose old values its gradient needs; "
                    "they are not kept yet: assign into a new array", op.location)
        for inner in op.walk():
            for v in inner.operands:
                if is_array(v) and not _linear_read(inner, v, varied):
                    root = root_array(v, defs)
                    if any(w.name == "tensor_assign" for w in body.ops) and root in varied:
                        read_before.setdefault(root, inner)

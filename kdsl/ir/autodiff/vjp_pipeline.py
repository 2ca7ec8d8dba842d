"""An adjoint loop's recomputation of the next iteration next to the adjoints of this one.

The body of an adjoint parallel loop starts by computing the loop's values again (square
roots and divisions of the springs of a mass, long chains that wait on each other) and
then runs their adjoints (many multiplications and adds, whose inputs are ready): the
first half keeps the divider busy, the second the other units, and one iteration is more
instructions than the processor looks ahead, so each waits for the other. The loop runs
in blocks of ``BLOCK`` iterations, each a serial loop whose iteration ``i`` computes the
values of ``i + 1`` and runs the adjoints of ``i``, from the values the iteration before
computed (carried from one to the next): the two halves overlap.

The recomputation is the longest run of ops at the start of the body that have no effect
and read no array the loop writes; the ops of it that do not depend on the index run
once per block.
"""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.autodiff.vjp_reloads import cheap_slice
from kdsl.ir.builder import typed_operation
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.effects import array_effects, has_side_effects, written_arrays
from kdsl.ir.rewrite import clone_op

BLOCK = 64  # iterations per block: the inner trip count parallel_cost assumes


def pipeline_recomputation(parent: Block, loop: Operation) -> None:
    """Rewrites the parallel loop ``loop`` (one axis, no reductions) of block ``parent``,
    see the module's doc; leaves it as it is where its body has no such start."""
    if loop.attrs.get("ndim") != 1 or loop.results or loop.attrs.get("reductions"):
        return
    body = loop.regions[0]
    iv = body.args[0]
    written = written_arrays(body)
    ops = body.ops[:-1]
    start = 0
    while start < len(ops) and _recomputable(ops[start], written):
        start += 1
    head, rest = ops[:start], ops[start:]
    if not rest or not any(op.name == "if" for op in head):
        return
    invariant, varying = _split_invariant(head, iv)
    made = {r for op in varying for r in op.results}
    used = list(dict.fromkeys(v for op in rest for inner in op.walk() for v in inner.operands
                              if v in made))
    # cheap values (loads of arrays the loop never writes, indices, comparisons) are made
    # again where they are used rather than carried
    defined = {r: op for op in varying for r in op.results}
    again: dict[Operation, None] = {}
    carried: list[Value] = []
    for v in used:
        cheap = cheap_slice(v, defined, made, written)
        if cheap is None:
            carried.append(v)
        else:
            again.update(dict.fromkeys(cheap))
    remade = [op for op in varying if op in again]
    if not carried or not all(isinstance(v.type, (T.ScalarType, T.VectorType))
                              for v in carried):
        return
    # the block count, before the loop
    extent = loop.operands[0]
    before = Block()
    size = _constant(before, BLOCK, T.i64)
    spare = _constant(before, BLOCK - 1, T.i64)
    padded = _append(before, typed_operation("add", [extent, spare])).result
    blocks = _append(before, typed_operation("floordiv", [padded, size])).result
    at = parent.ops.index(loop)
    for op in before.ops:
        op.parent = parent
    parent.ops[at:at] = before.ops
    loop.operands[0] = blocks
    new = Block([Value(T.i64, "block")])
    mapping: dict[Value, Value] = {}
    _clone_into(new, invariant, mapping)
    size_in = _constant(new, BLOCK, T.i64)
    one = _constant(new, 1, T.i64)
    lower = _append(new, typed_operation("mul", [new.args[0], size_in])).result
    full = _append(new, typed_operation("add", [lower, size_in])).result
    upper = _append(new, typed_operation("min", [full, extent])).result
    first = dict(mapping)
    first[iv] = lower
    _clone_into(new, varying, first)
    inits = [first[v] for v in carried]
    # the serial loop: iteration i computes the values of i + 1, then the adjoints of i
    inner = Block([Value(T.i64, "i"), *(Value(v.type, v.name_hint) for v in carried)])
    i, values = inner.args[0], inner.args[1:]
    following = _append(inner, typed_operation("add", [i, one])).result
    more = _append(inner, typed_operation("lt", [following, upper])).result
    then, otherwise = Block(), Block()
    ahead = dict(mapping)
    ahead[iv] = following
    _clone_into(then, varying, ahead)
    _append(then, Operation("yield", [ahead[v] for v in carried], []))
    zeros = [_zero(otherwise, v.type) for v in carried]
    _append(otherwise, Operation("yield", zeros, []))
    branch = _append(inner, typed_operation("if", [more], {"types": [v.type for v in carried]},
                                            [then, otherwise]))
    now = dict(mapping)
    now[iv] = i
    now.update(zip(carried, values))
    _clone_into(inner, remade, now)
    _clone_into(inner, rest, now)
    _append(inner, Operation("yield", list(branch.results), []))
    _append(new, typed_operation("for", [lower, upper, one, *inits], {}, [inner]))
    terminator = body.ops[-1]
    _append(new, Operation("yield", list(terminator.operands), [], dict(terminator.attrs)))
    loop.regions[0] = new
    new.parent = loop
    loop.attrs["blocked"] = True  # its first thread adds into the arrays themselves


def _recomputable(op: Operation, written: set[Value]) -> bool:
    if has_side_effects(op) or op.name in ("yield", "condition", "return"):
        return False
    return not any(array in written for inner in op.walk() for array, _ in array_effects(inner))


def _split_invariant(ops: list[Operation], iv: Value) -> tuple[list[Operation], list[Operation]]:
    """The ops that depend neither on ``iv`` nor on memory (constants, dimensions), and
    the others."""
    varying_values = {iv}
    invariant, varying = [], []
    for op in ops:
        depends = bool(op.regions) or op.name == "array_load" or any(
            v in varying_values for inner in op.walk() for v in inner.operands)
        if depends:
            varying.append(op)
            varying_values.update(op.results)
        else:
            invariant.append(op)
    return invariant, varying


def _append(block: Block, op: Operation) -> Operation:
    block.append(op)
    return op


def _constant(block: Block, value: object, t: T.ScalarType) -> Value:
    return _append(block, typed_operation("constant", [], {"value": value, "type": t})).result


def _zero(block: Block, t: T.ScalarType | T.VectorType) -> Value:
    if isinstance(t, T.VectorType):
        scalar = _zero(block, t.element)
        return _append(block, typed_operation("splat", [scalar], {"type": t})).result
    value: object = False if t.is_bool else 0.0 if t.is_float else 0
    return _constant(block, value, t)


def _clone_into(block: Block, ops: list[Operation], mapping: dict[Value, Value]) -> None:
    for op in ops:
        _append(block, clone_op(op, mapping))

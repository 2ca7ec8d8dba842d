"""Row-fused lowering of a tensor assignment that reads reductions along the last axis
kept as a size-1 axis (``keepdims=True``): softmax, layer norm, ``x / kd.sum(x, axis=1,
keepdims=True)``.

The assignment and the reductions it reads become one parallel loop over the rows (the
leading axes); for each row, every reduction is a serial loop along the row, in program
order (a later one may read an earlier one: ``mean((x - mean(x)) ** 2)``), and then the
assignment's loop writes the row. A row is read once per reduction and once more for the
result while it is in the cache, and no temporary array is made. An elementwise value
used by several of them is recomputed in each, except one that calls a math function
(softmax's ``e = exp(x - m)``): the loop of the first reduction that reads it stores it in
the destination's row, and the later loops load it. Layer norm's mean and variance are
one pass (kdsl/ir/passes/tensor_row_moments.py). Under fastmath a division by a value
of the row (``e / sum``) is a multiplication by its reciprocal, computed once per row.
The passes are separate (not an online max-and-sum in one pass): a row of a few thousand
elements stays in the L1 or L2 cache between them, so the extra pass costs little, and the
online form would rescale every partial sum.

Eligible when the reductions and elementwise values involved are used only by the
assignment's expression, are computed in the same block before it with no write to
memory in between, and the destination is not a view of any array the expression reads.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.effects import has_side_effects, view_source
from kdsl.ir.math_builtins import MATH_FUNCTIONS
from kdsl.ir.passes.tensor_fusion import fusable
from kdsl.ir.passes.tensor_matmul import lower_matmul
from kdsl.ir.passes.tensor_row_moments import moment_pairs, reduce_moments
from kdsl.ir.reductions import REDUCTION_COMBINE, reduction_identity
from kdsl.records import dataclass

if TYPE_CHECKING:
    from kdsl.ir.passes.lower_tensors import TensorLowerer


@dataclass
class RowPlan:
    """The reductions (in program order) and elementwise ops an assignment absorbs."""

    reductions: list[Operation] = field(default_factory=list)
    maps: list[Operation] = field(default_factory=list)
    leaves: list[Value] = field(default_factory=list)


def _base(lo: TensorLowerer, v: Value) -> Value:
    op = lo.definitions.get(v)
    while op is not None and (source := view_source(op)) is not None:
        v = source
        op = lo.definitions.get(v)
    return v


def _is_row_reduction(op: Operation, ndim: int) -> bool:
    result = op.result.type
    return (op.attrs.get("keepdims") is True and op.attrs.get("axis") == ndim - 1
            and op.operands[0].type.ndim == ndim and isinstance(result, T.ArrayType)
            and result.ndim == ndim)


def _collect(lo: TensorLowerer, assign: Operation, positions: dict[Operation, int]) -> RowPlan | None:
    """The plan of a ``tensor_assign`` or of a ``tensor_map`` made into a new array."""
    materialised = assign.name == "tensor_map"
    dest = None if materialised else assign.operands[0]
    ndim = assign.result.type.ndim if materialised else assign.operands[0].type.ndim
    plan = RowPlan()
    seen: set[Operation] = set()

    def visit(v: Value) -> None:
        op = lo.definitions.get(v)
        if (op is None or op not in positions or positions[op] >= positions[assign]
                or op.name not in ("tensor_map", "tensor_reduce")
                or (op.name == "tensor_reduce" and not _is_row_reduction(op, ndim))):
            if isinstance(v.type, T.ArrayType) and v not in plan.leaves:
                plan.leaves.append(v)
            return
        if op in seen:
            return
        seen.add(op)
        for operand in op.operands:
            visit(operand)
        (plan.reductions if op.name == "tensor_reduce" else plan.maps).append(op)

    if materialised:
        seen.add(assign)
        for operand in assign.operands:
            visit(operand)
    else:
        visit(assign.operands[1])
    if not plan.reductions:
        return None
    absorbed = set(plan.reductions) | set(plan.maps)
    for op in absorbed:
        if any(user is not assign and user not in absorbed for user in lo.users.get(op.result, [])):
            return None  # needed elsewhere: lowered on its own
    if dest is not None:
        dest_base = _base(lo, dest)
        if any(_base(lo, leaf) is dest_base for leaf in plan.leaves):
            return None
    first = min(positions[op] for op in absorbed)
    block_ops = list(positions)
    between = block_ops[first:positions[assign]]
    if any(has_side_effects(op) for op in between if op not in absorbed):
        return None
    plan.reductions.sort(key=positions.__getitem__)
    return plan


def row_plans(lo: TensorLowerer, block: Block) -> dict[Operation, RowPlan]:
    """The assignments of ``block`` that are lowered row by row, with what they absorb."""
    positions = {op: k for k, op in enumerate(block.ops)}
    plans: dict[Operation, RowPlan] = {}
    claimed: set[Operation] = set()
    # the last first: an assignment claims the values it reads before they are taken as
    # arrays of their own
    for position in reversed(range(len(block.ops))):
        op = block.ops[position]
        if op in claimed or not _is_root(lo, op, block, position):
            continue
        plan = _collect(lo, op, positions)
        if plan is None or claimed & (set(plan.reductions) | set(plan.maps)):
            continue
        claimed |= set(plan.reductions) | set(plan.maps)
        plans[op] = plan
    return plans


def _is_root(lo: TensorLowerer, op: Operation, block: Block, position: int) -> bool:
    """An assignment to an array of 2 or more axes, or an elementwise value of 2 or more
    axes made into a new array (returned, or used twice)."""
    if op.name == "tensor_assign":
        dest = op.operands[0]
        return (not op.attrs.get("accumulate") and isinstance(dest.type, T.ArrayType)
                and dest.type.ndim >= 2)
    return (op.name == "tensor_map" and op.result.type.ndim >= 2
            and not fusable(lo, op, block, position))


def row_invariant(lo: TensorLowerer, v: Value) -> bool:
    """A float value the same along the current row: computed from row reductions and
    scalars only (a division by it becomes a multiplication by its reciprocal)."""
    if not lo.row_values:
        return False
    v = lo.resolve(v)
    scalar = T.element_scalar(v.type.dtype if isinstance(v.type, T.ArrayType) else v.type)
    if not scalar.is_float:
        return False
    if not isinstance(v.type, T.ArrayType) or v in lo.row_values:
        return True
    if v in lo.fused and v not in lo.row_stored:
        return all(row_invariant(lo, o) for o in lo.definitions[v].operands)
    return False


def absorbed_ops(plans: dict[Operation, RowPlan]) -> set[Operation]:
    return {op for plan in plans.values() for op in plan.reductions + plan.maps}


def _deep_leaves(lo: TensorLowerer, v: Value, reductions: dict[Value, Operation]) -> list[Value]:
    """The arrays an expression reads, looking through its fused values and reductions."""
    v = lo.resolve(v)
    if not isinstance(v.type, T.ArrayType):
        return []
    if v in reductions:
        return _deep_leaves(lo, reductions[v].operands[0], reductions)
    if v in lo.fused:
        return [leaf for operand in lo.definitions[v].operands
                for leaf in _deep_leaves(lo, operand, reductions)]
    return [v]


def lower_rows(lo: TensorLowerer, root: Operation, plan: RowPlan) -> None:
    """Emits the row-fused loop nest of ``root`` at the lowerer's builder: an assignment,
    or an elementwise value computed into a new array (then its value)."""
    materialised = root.name == "tensor_map"
    ndim = root.result.type.ndim if materialised else root.operands[0].type.ndim
    for leaf in plan.leaves:  # a product waiting for an epilogue: computed first
        if leaf in lo.deferred:
            lo.mapping[leaf] = lower_matmul(lo, lo.deferred.pop(leaf))
    zero, one = lo.constant(0, T.i64), lo.constant(1, T.i64)
    reductions = {op.result: op for op in plan.reductions}
    extents: dict[Value, list[Value]] = {}
    for op in plan.reductions:  # shapes (and their checks) in program order
        source_shape = lo.broadcast_shape(op.operands[0], ndim,
                                          "operands could not be broadcast together")
        if op.attrs["kind"] in ("min", "max"):
            count = one
            for size in source_shape:
                count = lo.value("mul", count, size)
            lo.builder.create("raise_value_error", [lo.value("gt", count, zero), count], {
                "what": f"zero-size array to reduction operation {op.attrs['kind']} "
                        "which has no identity"})
        extents[op.result] = source_shape
        lo.row_shapes[op.result] = source_shape[:-1] + [one]
    if materialised:
        source = root.result
        lo.fused.add(source)
        t: T.ArrayType = root.result.type
        shape = lo.broadcast_shape(source, ndim, "operands could not be broadcast together")
        dest = lo.value("array_new", *shape, type=T.ArrayType(t.dtype, ndim, True), fill="empty")
    else:
        dest, source = root.operands
        shape = lo.dims(dest)
        lo.check_fits(source, shape, "cannot assign: array shapes")

    kept = _kept_in_destination(lo, plan, dest, ndim)
    pairs = {mean: variance for mean, variance in moment_pairs(lo, plan).items()
             if not any(first in (mean, variance) for first in kept.values())}
    paired = set(pairs.values())

    def body(ivs: list[Value], accs: list[Value]) -> list[Value]:
        for op in plan.reductions:
            if op in pairs:
                variance = pairs[op]
                reduce_moments(lo, op, variance, list(ivs), extents[op.result][-1],
                               extents[variance.result][-1])
                continue
            if op in paired:
                continue
            stores = [v for v, first in kept.items() if first is op] if lo.direct else []
            _reduce_row(lo, op, list(ivs), extents[op.result], dest, stores)
        row = list(ivs)

        def store(j: Value, carried: list[Value]) -> list[Value]:
            value = lo.convert(lo.element(source, row + [j]), dest.type.dtype)
            lo.builder.create("array_store", [dest, *row, j, value])
            return []

        loop = lo.serial_loop(lo.value("max", shape[-1], zero), [], store)
        if lo.direct and lo.target == "cpu":
            # the next row is fetched while this one is written (codegen/row_prefetch.py)
            loop.attrs["prefetch_next_row"] = True
        if lo.direct and lo.target == "cpu" and not kept:
            # written once and not read here again: large destinations take streaming
            # stores (kdsl/codegen/streaming_stores.py)
            loop.attrs["stream_stores"] = True
        return []

    outer = [lo.value("max", s, zero) for s in shape[:-1]]
    leaves = _deep_leaves(lo, source, reductions)
    same: Value = lo.constant(True, T.bool_)
    for leaf in leaves:  # fewer axes (layer norm's weights): the trailing ones must match
        trailing = shape[ndim - leaf.type.ndim:]
        for size, want in zip(lo.dims(leaf), trailing):
            same = lo.value("bit_and", same, lo.value("eq", size, want))
    regions = []
    for direct in (True, False):
        block = Block()
        with lo.builder.at(block):
            lo.direct = direct
            lo.row_stored.clear()
            lo.parallel_loop(outer, body)
            lo.builder.create("yield", [])
        regions.append(block)
    lo.direct = False
    lo.row_stored.clear()
    lo.builder.create("if", [same], {"types": []}, regions, [])
    if materialised:
        lo.mapping[source] = dest  # the value is now this array


def nan_ignoring(combine: str, scalar: T.ScalarType) -> dict[str, bool]:
    """The attributes of a float min/max reduction's combine: its accumulator starts at
    an identity and is never NaN, so a NaN element is skipped either way, and llvm.maxnum
    (which the code generator then uses) vectorises where a compare-and-select does not."""
    return {"ignore_nan": True} if combine in ("min", "max") and scalar.is_float else {}


_CHEAP = ("sqrt", "copysign", "fma", "sign", "isnan", "isinf", "isfinite", "abs")


def _kept_in_destination(lo: TensorLowerer, plan: RowPlan, dest: Value,
                         ndim: int) -> dict[Value, Operation]:
    """Elementwise values worth storing in the destination's row while the first
    reduction that reads them runs, for the later loops to load instead of recomputing
    (softmax's ``e``: one ``exp`` per element instead of two): values of the
    destination's type and rank that call a math function and have more than one user.
    By the value, the reduction that stores it."""
    maps = {op.result: op for op in plan.maps}
    kept: dict[Value, Operation] = {}

    def reads(v: Value, target: Value) -> bool:
        if v is target:
            return True
        op = maps.get(v)
        return op is not None and any(reads(o, target) for o in op.operands)

    def costly(v: Value) -> bool:
        op = maps.get(v)
        if op is None:
            return False
        fn = op.attrs.get("fn")
        return (fn in MATH_FUNCTIONS and fn not in _CHEAP) or fn == "pow" or any(
            costly(o) for o in op.operands)

    for op in plan.maps:
        v = op.result
        if (len(lo.users.get(v, [])) < 2 or v.type.ndim != ndim
                or v.type.dtype != dest.type.dtype or not costly(v)):
            continue
        first = next((r for r in plan.reductions if reads(r.operands[0], v)), None)
        if first is not None:
            kept[v] = first
    return kept


def _reduce_row(lo: TensorLowerer, op: Operation, row: list[Value], shape: list[Value],
                dest: Value, stores: list[Value]) -> None:
    """One reduction along the current row, its value kept for the row's later loops;
    the values ``stores`` are written into ``dest``'s row on the way (same shape: the
    loop version with plain indexing)."""
    kind = op.attrs["kind"]
    combine = REDUCTION_COMBINE[kind]
    element_t = op.result.type.dtype
    scalar = T.element_scalar(element_t)
    source = op.operands[0]
    init = lo.convert(lo.constant(reduction_identity(combine, scalar), scalar), element_t)

    attrs = nan_ignoring(combine, scalar)

    def inner(k: Value, carried: list[Value]) -> list[Value]:
        for v in stores:
            stored = lo.element(v, row + [k])
            lo.builder.create("array_store", [dest, *row, k, stored])
            lo.row_values[v] = stored  # this element, for the reduction's own expression
        value = lo.convert(lo.element(source, row + [k]), element_t)
        return [lo.builder.create(combine, [carried[0], value], attrs).result]

    total = lo.serial_loop(lo.value("max", shape[-1], lo.constant(0, T.i64)), [init], inner).result
    for v in stores:  # the later loops load it
        del lo.row_values[v]
        lo.row_stored[v] = dest
    if kind == "mean":
        total = lo.value("div", total, lo.convert(lo.builder.cast(shape[-1], scalar), element_t))
    lo.row_values[op.result] = total

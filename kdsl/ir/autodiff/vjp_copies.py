"""Removing the array copies a vector-Jacobian product does not need.

The reverse sweep keeps each array a region updates in place as the region found it: a
copy before the region runs (a snapshot), copied back before the region is reversed and
again after (its adjoint loop replays the region's stores). A vector-Jacobian product
leaves the arrays it was given in no particular state (``kd.Tape`` passes copies), so
many of those copies, and the stores they undo, do nothing that is read:

- a store whose value is loaded again in the same iteration gives the load its value;
- a whole-array copy into an array that is not read before it is overwritten or the
  kernel ends, and a store into such an array in a parallel loop that does not read the
  array after it, are dropped (a parallel loop's iterations do not read elements another
  iteration writes);
- a whole-array copy ``b = a`` where ``b`` already holds ``a`` is dropped.

What remains of a time step ``f = forces(x, v); v += dt * f; x += dt * v`` is the forces,
the adjoint of the update and the adjoint of the forces: three loops, no copies.

Only arrays whose every use is an element access or a dimension take part (no views, no
calls): the kernel's array arguments and the arrays it makes at its top level. An
adjoint loop sums what it adds at its own index in registers (vjp_registers.py); one that
still adds into one array at many elements per iteration is marked ``many_updates``, so
that each thread adds into its own copy rather than with atomics.
"""

from __future__ import annotations

from collections.abc import Iterable

from kdsl import types as T
from kdsl.ir.autodiff.vjp_pipeline import pipeline_recomputation
from kdsl.ir.autodiff.vjp_registers import sum_own_elements
from kdsl.ir.autodiff.vjp_reloads import reload_cheap_values
from kdsl.ir.core import Block, Operation, Value, replace_all_uses, use_counts
from kdsl.ir.passes.dead_code import _sweep as drop_dead_ops
from kdsl.records import dataclass

_ELEMENT_USES = ("array_load", "array_store", "atomic_rmw", "array_dim")
_WRITES = ("array_store", "atomic_rmw")
_MANY_UPDATES = 4  # implicit adds into one array per iteration from which copies pay


@dataclass(frozen=True)
class _Copy:
    """A parallel loop ``target[...] = source[...]`` over every element of both."""

    source: Value
    target: Value


def tidy_vjp(body: Block, primal_arrays: Iterable[Value], results: list[Value],
             cpu: bool = True) -> None:
    """Removes from the top level of ``body`` (a vector-Jacobian product, its return not
    yet emitted; it will return ``results``) the copies and stores of ``primal_arrays``
    and of the arrays it makes that nothing reads. On the ``cpu``, an adjoint loop that
    adds many times recomputes an iteration's values next to the adjoints of the one
    before (vjp_pipeline.py)."""
    tracked = _tracked_arrays(body, primal_arrays)
    keep = Operation("return", results, [])  # for the time of the pass: results are used
    body.ops.append(keep)
    for op in body.walk():
        if op.name == "parallel_for":
            _forward_stores(op.regions[0], tracked)
    changed = True
    while changed:
        changed = _drop_repeated_copies(body, tracked)
        changed |= _drop_unread_writes(body, tracked)
        if changed:
            drop_dead_ops(body, use_counts(body))
    for op in list(body.ops):
        if op.name == "parallel_for":
            reload_cheap_values(op.regions[0])
            sum_own_elements(op)
            if _adds_many_times(op):
                op.attrs["many_updates"] = True
                if cpu:
                    pipeline_recomputation(body, op)
    body.ops.remove(keep)


def _tracked_arrays(body: Block, primal_arrays: Iterable[Value]) -> set[Value]:
    candidates = set(primal_arrays)
    candidates.update(op.result for op in body.ops
                      if op.name == "array_new" and isinstance(op.result.type, T.ArrayType))
    for op in body.walk():
        for k, v in enumerate(op.operands):
            if v in candidates and (op.name not in _ELEMENT_USES or k != 0):
                candidates.discard(v)  # a view, a call, a value stored: not followed
    return candidates


# --- stores to loads --------------------------------------------------------------------


def _forward_stores(block: Block, tracked: set[Value]) -> None:
    """Loads of an element stored earlier in the same block (the same array and index
    values, no other write of the array between) take the stored value."""
    stored: dict[tuple[Value, ...], Value] = {}
    for op in block.ops:
        if op.name == "array_load" and op.operands[0] in tracked:
            found = stored.get(tuple(op.operands))
            if found is not None and found.type == op.result.type:
                replace_all_uses(block, op.result, found)
            continue
        if op.name == "array_store" and op.operands[0] in tracked:
            array = op.operands[0]
            stored = {key: v for key, v in stored.items() if key[0] is not array}
            stored[tuple(op.operands[:-1])] = op.operands[-1]
            continue
        written = {inner.operands[0] for inner in op.walk() if inner.name in _WRITES}
        if op.name == "call":
            stored.clear()
        stored = {key: v for key, v in stored.items() if key[0] not in written}
        for region in op.regions:
            _forward_stores(region, tracked)


# --- whole-array copies -----------------------------------------------------------------


def _definitions(body: Block) -> dict[Value, Operation]:
    return {r: op for op in body.walk() for r in op.results}


def _shape_of(array: Value, defs: dict[Value, Operation]) -> Value:
    """The array whose shape ``array`` has: itself, or for an array made with the
    dimensions of another, that one."""
    made = defs.get(array)
    if made is not None and made.name == "array_new":
        source = _dims_of(made.operands, defs)
        if source is not None and source is not array:
            return _shape_of(source, defs)
    return array


def _dims_of(sizes: list[Value], defs: dict[Value, Operation]) -> Value | None:
    """The array whose dimensions ``sizes`` are, in order, if they all are one's."""
    arrays = set()
    for axis, size in enumerate(sizes):
        op = defs.get(size)
        if op is None or op.name != "array_dim" or op.attrs.get("axis") != axis:
            return None
        arrays.add(op.operands[0])
    if len(arrays) != 1:
        return None
    array = arrays.pop()
    t = array.type
    return array if isinstance(t, T.ArrayType) and t.ndim == len(sizes) else None


def _as_copy(op: Operation, tracked: set[Value], defs: dict[Value, Operation]) -> _Copy | None:
    if op.name != "parallel_for" or op.results:
        return None
    body = op.regions[0]
    ivs = body.args
    if len(body.ops) != 3 or len(ivs) != op.attrs.get("ndim"):
        return None
    load, store, _ = body.ops
    if (load.name != "array_load" or store.name != "array_store"
            or load.operands[1:] != ivs or store.operands[1:-1] != ivs
            or store.operands[-1] is not load.result):
        return None
    source, target = load.operands[0], store.operands[0]
    if source not in tracked or target not in tracked or source is target:
        return None
    covered = _dims_of(op.operands[:len(ivs)], defs)
    if covered is None:
        return None
    shape = _shape_of(covered, defs)
    if _shape_of(source, defs) is not shape or _shape_of(target, defs) is not shape:
        return None
    return _Copy(source, target)


def _accessed(op: Operation, tracked: set[Value]) -> tuple[set[Value], set[Value]]:
    """The tracked arrays ``op`` reads and those it writes."""
    reads, writes = set(), set()
    for inner in op.walk():
        if inner.name in ("array_load", "atomic_rmw") and inner.operands[0] in tracked:
            reads.add(inner.operands[0])
        if inner.name in _WRITES and inner.operands[0] in tracked:
            writes.add(inner.operands[0])
    return reads, writes


def _drop_repeated_copies(body: Block, tracked: set[Value]) -> bool:
    """Drops copies into an array that already holds what they copy."""
    defs = _definitions(body)
    same: set[frozenset[Value]] = set()  # pairs of arrays known to hold the same elements
    kept: list[Operation] = []
    for op in body.ops:
        copy = _as_copy(op, tracked, defs)
        if copy is not None:
            pair = frozenset((copy.source, copy.target))
            if pair in same:
                continue
            same = {p for p in same if copy.target not in p}
            same |= {frozenset((copy.target, *(p - {copy.source})))
                     for p in same if copy.source in p}
            same.add(pair)
        else:
            _, writes = _accessed(op, tracked)
            if op.name == "call":
                same.clear()
            same = {p for p in same if not p & writes}
        kept.append(op)
    changed = len(kept) != len(body.ops)
    body.ops = kept
    return changed


# --- writes nothing reads ---------------------------------------------------------------


def _drop_unread_writes(body: Block, tracked: set[Value]) -> bool:
    """Walking back from the end (where no tracked array is read any more): drops
    copies into arrays not read before they are next overwritten, and the stores of a
    parallel loop into such arrays where the loop does not read them after the store."""
    defs = _definitions(body)
    live: set[Value] = set()
    kept: list[Operation] = []
    changed = False
    for op in reversed(body.ops):
        copy = _as_copy(op, tracked, defs)
        if copy is not None:
            if copy.target not in live:
                changed = True
                continue
            live.discard(copy.target)
            live.add(copy.source)
            kept.append(op)
            continue
        reads, writes = _accessed(op, tracked)
        if op.name == "parallel_for":
            for array in writes - live:
                changed |= _drop_stores(op.regions[0], array)
        kept.append(op)
        live |= reads
    kept.reverse()
    body.ops = kept
    return changed


def _drop_stores(body: Block, array: Value) -> bool:
    """Drops the stores into ``array`` at the top level of a parallel loop's body that no
    load of the array follows (in the body); the adjoint stores of an atomic update's old
    value are never dropped (the update's result would be used)."""
    used = use_counts(body)
    reads = [k for k, op in enumerate(body.ops)
             if any(inner.name in ("array_load", "atomic_rmw") and inner.operands[0] is array
                    and not _is_dead_update(inner, array, used)
                    for inner in op.walk())]
    last_read = max(reads, default=-1)
    removable = [k for k, op in enumerate(body.ops)
                 if k > last_read and (op.name == "array_store" or _is_dead_update(op, array, used))
                 and op.operands[0] is array]
    if not removable:
        return False
    body.ops = [op for k, op in enumerate(body.ops) if k not in removable]
    return True


def _is_dead_update(op: Operation, array: Value, used: dict[Value, int]) -> bool:
    return (op.name == "atomic_rmw" and op.operands[0] is array
            and op.attrs.get("kind") in ("add", "sub") and used.get(op.result, 0) == 0)


# --- adjoint loops that add many times -------------------------------------------------


def _adds_many_times(op: Operation) -> bool:
    """Whether one iteration of a parallel loop adds into one array at (up to)
    ``_MANY_UPDATES`` elements or more, with the atomics the sweep made."""
    counts: dict[Value, int] = {}
    for inner in op.regions[0].walk():
        if inner.name == "atomic_rmw" and inner.attrs.get("implicit"):
            counts[inner.operands[0]] = counts.get(inner.operands[0], 0) + 1
    return max(counts.values(), default=0) >= _MANY_UPDATES

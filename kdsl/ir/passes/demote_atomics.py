"""Atomics demotion: an implicit atomic update (``a[i] += v`` in a parallel loop) becomes a
plain load, add and store when no two iterations can touch the same element.

Indices are compared as values: ``a[i]`` is at the loop variable itself, never at an
expression of it. A run-time index that may be negative is a ``wrap_index`` of it (so
``a[i - n]`` and ``a[i]``, which Python sends to one element, are never taken for
distinct ones); only the wraps of provably non-negative indices are gone by now."""

from __future__ import annotations

from typing import Any

from kdsl.ir.builder import typed_operation
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.effects import element_access, view_source
from kdsl.ir.structured import ParallelForOp


def _demote(op: Operation) -> list[Operation]:
    array, *indices, value = op.operands
    load = typed_operation("array_load", [array, *indices], location=op.location)
    kind = "add" if op.attrs["kind"] == "add" else "sub"
    update = typed_operation(kind, [load.result, value], location=op.location)
    store = typed_operation("array_store", [array, *indices, update.result], location=op.location)
    return [load, update, store]


def _shared_writes(body: Block, ivs: tuple[Value, ...], views: dict[Value, Value]) -> set[Value]:
    """Arrays that two iterations may write at the same element: unless every write to
    an array has each parallel loop variable as the index of one same axis (``a[i, 2]``
    and ``a[5, i]`` meet at ``a[5, 2]``, from iterations 5 and 2), or when some write
    goes through a view of it."""
    writes: dict[Value, list[list[Value]]] = {}
    shared: set[Value] = set()
    for op in body.walk():
        access = element_access(op)
        if access is None or not access.writes:
            continue
        if access.array in views:
            shared.update((access.array, _base(access.array, views)))
        writes.setdefault(access.array, []).append(access.indices)
    for array, index_lists in writes.items():
        for iv in ivs:
            axes = set.intersection(*({k for k, v in enumerate(indices) if v is iv}
                                      for indices in index_lists))
            if not axes:
                shared.add(array)
    return shared


def _base(array: Value, views: dict[Value, Value]) -> Value:
    while array in views:
        array = views[array]
    return array


def _visit(
    block: Block, parallel_ivs: tuple[Value, ...], used: set[Value], shared: set[Value],
    views: dict[Value, Value],
) -> None:
    out = []
    for op in block.ops:
        if op.name == "parallel_for":
            ivs = tuple(ParallelForOp(op).ivs)
            inner_ivs = parallel_ivs + ivs
            inner_shared = shared | _shared_writes(op.regions[0], inner_ivs, views)
            _visit(op.regions[0], inner_ivs, used, inner_shared, views)
        else:
            for region in op.regions:
                _visit(region, parallel_ivs, used, shared, views)
        if (
            op.name == "atomic_rmw" and op.attrs.get("implicit") and op.attrs["kind"] in ("add", "sub")
            and parallel_ivs and op.result not in used and op.operands[0] not in shared
            and _base(op.operands[0], views) not in shared
            and _injective(op.operands[1:-1], parallel_ivs)
        ):
            out.extend(_demote(op))
            continue
        out.append(op)
    block.ops = out


def _injective(indices: list[Value], ivs: tuple[Value, ...]) -> bool:
    """Distinct iterations of the parallel loops give distinct index tuples: every
    parallel loop variable is used directly as one of the indices."""
    return all(iv in indices for iv in ivs)


def run(function: Function, options: Any = None) -> None:
    used = {v for op in function.walk() for v in op.operands}
    views = {op.result: source for op in function.walk()
             if (source := view_source(op)) is not None}
    _visit(function.body, (), used, set(), views)

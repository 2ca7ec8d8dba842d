"""Atomics demotion: an implicit atomic update (``a[i] += v`` in a parallel loop) becomes a
plain load, add and store when no two iterations can touch the same element."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Block, Module, Operation, Value
from kdsl.ir.effects import element_access


def _demote(op: Operation) -> list[Operation]:
    array, *indices, value = op.operands
    load = Operation("array_load", [array, *indices], [value.type], {}, None, op.location)
    kind = "add" if op.attrs["kind"] == "add" else "sub"
    update = Operation(kind, [load.result, value], [value.type], {}, None, op.location)
    store = Operation("array_store", [array, *indices, update.result], [], {}, None, op.location)
    return [load, update, store]


def _shared_writes(body: Block, ivs: tuple[Value, ...]) -> set[Value]:
    """Arrays written somewhere in ``body`` at an index that is not injective."""
    shared = set()
    for op in body.walk():
        access = element_access(op)
        if access is not None and access.writes and not _injective(access.indices, ivs):
            shared.add(access.array)
    return shared


def _visit(
    block: Block, parallel_ivs: tuple[Value, ...], used: set[Value], shared: set[Value]
) -> None:
    out = []
    for op in block.ops:
        if op.name == "parallel_for":
            ivs = tuple(op.regions[0].args[: op.attrs["ndim"]])
            inner_ivs = parallel_ivs + ivs
            _visit(op.regions[0], inner_ivs, used, shared | _shared_writes(op.regions[0], inner_ivs))
        else:
            for region in op.regions:
                _visit(region, parallel_ivs, used, shared)
        if (
            op.name == "atomic_rmw" and op.attrs.get("implicit") and op.attrs["kind"] in ("add", "sub")
            and parallel_ivs and op.result not in used and op.operands[0] not in shared
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


def run(module: Module, options: Any = None) -> None:
    used = {v for op in module.kernel.walk() for v in op.operands}
    _visit(module.kernel.body, (), used, set())

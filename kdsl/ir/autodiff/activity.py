"""Activity analysis: which values vary with the differentiated arguments, and which
values the reverse sweep needs exactly (loop-carried ones among them are saved)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value

VIEW_OPS = ("array_view", "array_transpose", "cast")

LINEAR_OPS = frozenset({
    "add", "sub", "neg", "make_vector", "extract", "insert", "splat", "transpose",
    "stop_gradient",
})
"""Ops whose adjoint rules do not read their operands' values."""


def is_float(t: Any) -> bool:
    return not isinstance(t, T.ArrayType) and T.is_numeric_value_type(t) and (
        T.element_scalar(t).is_float
    )


def _loop_links(op: Operation) -> list[tuple[list[Value], list[Value]]]:
    """For each loop-carried or merged value of a structured op: the values flowing in
    (initial value, yielded values) and the values they become (block arguments,
    results)."""
    links: list[tuple[list[Value], list[Value]]] = []
    if op.name == "for":
        body = op.regions[0]
        for k, init in enumerate(op.operands[3:]):
            links.append(([init, body.ops[-1].operands[k]], [body.args[1 + k], op.results[k]]))
    elif op.name == "parallel_for":
        body = op.regions[0]
        ndim = op.attrs["ndim"]
        for k, init in enumerate(op.operands[ndim:]):
            links.append(([init, body.ops[-1].operands[k]], [body.args[ndim + k], op.results[k]]))
    elif op.name == "while":
        before, body = op.regions
        for k, init in enumerate(op.operands):
            links.append(([init, body.ops[-1].operands[k]],
                          [before.args[k], body.args[k], op.results[k]]))
    elif op.name == "if":
        then, other = op.regions
        for k, r in enumerate(op.results):
            links.append(([then.ops[-1].operands[k], other.ops[-1].operands[k]], [r]))
    return links


def varied_values(body: Block, roots: Iterable[Value]) -> tuple[set[Value], set[Value]]:
    """The float values and the arrays that depend on ``roots`` (arguments)."""
    from kdsl.ir.autodiff.memory import array_bases

    bases = array_bases(body)
    varied: set[Value] = set()
    arrays: set[Value] = set()
    for r in roots:
        (arrays if isinstance(r.type, T.ArrayType) else varied).add(r)
    changed = True
    while changed:
        changed = False

        def mark(v: Value, into: set[Value]) -> None:
            nonlocal changed
            if v not in into:
                into.add(v)
                changed = True

        for op in body.walk():
            if op.regions:
                for sources, targets in _loop_links(op):
                    if any(s in varied for s in sources):
                        for t in targets:
                            if is_float(t.type):
                                mark(t, varied)
            elif op.name == "array_load":
                if op.operands[0] in arrays and is_float(op.result.type):
                    mark(op.result, varied)
            elif op.name in VIEW_OPS and isinstance(op.results[0].type, T.ArrayType):
                if op.operands[0] in arrays:
                    mark(op.results[0], arrays)
            elif op.name in ("array_store", "atomic_rmw"):
                if op.operands[-1] in varied:  # the array now holds values that vary
                    target = op.operands[0]
                    mark(bases.get(target, target), arrays)
                    mark(target, arrays)
            elif op.name == "stop_gradient":
                continue
            elif any(v in varied for v in op.operands):
                for r in op.results:
                    if is_float(r.type):
                        mark(r, varied)
    return varied, arrays


def needed_values(body: Block) -> set[Value]:
    """Values whose exact value the reverse sweep reads (conservatively: operands of every
    op that is not linear, conditions, indices, trip counts, and what they depend on)."""
    needed: set[Value] = set()
    changed = True
    while changed:
        changed = False

        def need(values: Iterable[Value]) -> None:
            nonlocal changed
            for v in values:
                if v not in needed:
                    needed.add(v)
                    changed = True

        for op in body.walk():
            if op.name in ("yield", "condition", "return"):
                if op.name == "condition":
                    need(op.operands[:1])
                continue
            if op.regions:
                _structured_needs(op, needed, need)
            elif op.name in LINEAR_OPS or (op.name == "cast" and is_float(op.operands[0].type)):
                if any(r in needed for r in op.results):
                    need(op.operands)
            elif op.name == "select":
                need(op.operands[:1])
                if op.result in needed:
                    need(op.operands[1:])
            else:
                need(op.operands)
    return needed


def _structured_needs(op: Operation, needed: set[Value], need: Any) -> None:
    if op.name == "for":
        need(op.operands[:3])
    elif op.name == "parallel_for":
        need(op.operands[:op.attrs["ndim"]])
        for kind, r in zip(op.attrs["reductions"], op.results):
            if kind in ("min", "max"):
                need([r])  # the winner is found by comparing with the result
    elif op.name == "if":
        need(op.operands[:1])
    for sources, targets in _loop_links(op):
        if any(t in needed for t in targets):
            need(sources)


ROUTING_OPS = frozenset({"select", "min", "max", "abs", "clamp", "copysign"})
"""Ops whose adjoint rule sends an exact zero to an operand (the untaken side)."""


def routed_values(body: Block) -> set[Value]:
    """Values whose adjoint may be an exact zero a routing op sent while their partial
    derivatives are infinite (``kd.where(x > 0, 1 / x, 0.0)`` at 0): only the rules of
    these guard their products, so that ``0 * inf`` never leaks."""
    routed: set[Value] = set()
    changed = True
    while changed:
        changed = False

        def mark(values: Iterable[Value]) -> None:
            nonlocal changed
            for v in values:
                if v not in routed:
                    routed.add(v)
                    changed = True

        for op in body.walk():
            if op.name in ROUTING_OPS:
                mark(op.operands)
            elif op.name == "parallel_for" and any(
                    kind in ("min", "max") for kind in op.attrs["reductions"]):
                mark(op.regions[0].ops[-1].operands)
            if op.regions:
                for sources, targets in _loop_links(op):
                    if any(t in routed for t in targets):
                        mark(sources)
            elif any(r in routed for r in op.results):
                mark(op.operands)
    return routed

"""Activity analysis: which values vary with the differentiated arguments, and which
values the reverse sweep needs exactly (loop-carried ones among them are saved)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.structured import ForOp, IfOp, ParallelForOp, WhileOp

Mark = Callable[[Iterable[Value], set[Value]], None]

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
    if op.name in ("for", "parallel_for"):
        loop = ForOp(op) if op.name == "for" else ParallelForOp(op)
        carried = loop.carried if isinstance(loop, ForOp) else loop.partials
        yielded = loop.body.ops[-1].operands
        for k, init in enumerate(loop.inits):
            links.append(([init, yielded[k]], [carried[k], loop.results[k]]))
    elif op.name == "while":
        w = WhileOp(op)
        yielded = w.body.ops[-1].operands
        for k, init in enumerate(w.inits):
            links.append(([init, yielded[k]], [w.before.args[k], w.body.args[k], w.results[k]]))
    elif op.name == "if":
        branch = IfOp(op)
        then_out, else_out = branch.then_block.ops[-1].operands, branch.else_block.ops[-1].operands
        for k, r in enumerate(branch.results):
            links.append(([then_out[k], else_out[k]], [r]))
    return links


def _grow_until_stable(step: Callable[[Mark], None]) -> None:
    """Runs ``step`` again and again, each time with a function that adds values to a
    set, until a run adds nothing: the closure each analysis here computes."""
    changed = True

    def mark(values: Iterable[Value], into: set[Value]) -> None:
        nonlocal changed
        for v in values:
            if v not in into:
                into.add(v)
                changed = True

    while changed:
        changed = False
        step(mark)


def varied_values(body: Block, roots: Iterable[Value]) -> tuple[set[Value], set[Value]]:
    """The float values and the arrays that depend on ``roots`` (arguments)."""
    from kdsl.ir.autodiff.memory import array_bases
    from kdsl.ir.autodiff.tensor_activity import TENSOR_OPS, tensor_activity

    bases = array_bases(body)
    varied: set[Value] = set()
    arrays: set[Value] = set()
    for r in roots:
        (arrays if isinstance(r.type, T.ArrayType) else varied).add(r)

    def step(mark: Mark) -> None:
        for op in body.walk():
            if op.regions:
                for sources, targets in _loop_links(op):
                    if any(s in varied for s in sources):
                        mark([t for t in targets if is_float(t.type)], varied)
            elif op.name == "array_load":
                if op.operands[0] in arrays and is_float(op.result.type):
                    mark([op.result], varied)
            elif op.name in VIEW_OPS and isinstance(op.results[0].type, T.ArrayType):
                if op.operands[0] in arrays:
                    mark([op.results[0]], arrays)
            elif op.name in ("array_store", "atomic_rmw"):
                if op.operands[-1] in varied:  # the array now holds values that vary
                    target = op.operands[0]
                    mark([bases.get(target, target), target], arrays)
            elif op.name == "stop_gradient":
                continue
            elif op.name in TENSOR_OPS:
                tensor_activity(op, varied, arrays, bases, mark)
            elif any(v in varied for v in op.operands):
                mark([r for r in op.results if is_float(r.type)], varied)

    _grow_until_stable(step)
    return varied, arrays


def needed_values(body: Block, varied: set[Value] | None = None) -> set[Value]:
    """Values whose exact value the reverse sweep reads (conservatively: operands of every
    op that is not linear, conditions, indices, trip counts, and what they depend on).
    Given the values that vary, a product needs only the factors of the other, varied
    factor, and a quotient its numerator only when the denominator varies (for their own
    adjoints: a product or quotient whose value is needed needs both operands)."""
    needed: set[Value] = set()

    def step(mark: Mark) -> None:
        def mark_needed(values: Iterable[Value]) -> None:
            mark(values, needed)

        for op in body.walk():
            if op.name in ("yield", "condition", "return"):
                if op.name == "condition":
                    mark_needed(op.operands[:1])
                continue
            if op.regions:
                _structured_needs(op, needed, mark_needed)
            elif op.name in LINEAR_OPS or (op.name == "cast" and is_float(op.operands[0].type)):
                if any(r in needed for r in op.results):
                    mark_needed(op.operands)
            elif op.name == "select":
                mark_needed(op.operands[:1])
                if op.result in needed:
                    mark_needed(op.operands[1:])
            elif op.name in ("mul", "div") and varied is not None and len(op.operands) == 2:
                x, y = op.operands
                if op.name == "div" or x in varied:
                    mark_needed([y])
                if y in varied:
                    mark_needed([x])
                if op.result in needed:  # read by another op's adjoint: computed again
                    mark_needed(op.operands)
            elif op.name in ("array_store", "atomic_rmw") and op.attrs.get("kind", "add") in (
                    "add", "sub"):
                # the adjoint of the stored value is read from the adjoint array
                mark_needed(op.operands[:-1])
                if any(r in needed for r in op.results):
                    mark_needed(op.operands[-1:])
            else:
                mark_needed(op.operands)

    _grow_until_stable(step)
    return needed


def _structured_needs(op: Operation, needed: set[Value], need: Any) -> None:
    if op.name == "for":
        loop = ForOp(op)
        need([loop.start, loop.stop, loop.step])
    elif op.name == "parallel_for":
        need(ParallelForOp(op).extents)
        for kind, r in zip(op.attrs["reductions"], op.results):
            if kind in ("min", "max"):
                need([r])  # the winner is found by comparing with the result
    elif op.name == "if":
        need([IfOp(op).condition])
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

    def step(mark: Mark) -> None:
        def mark_routed(values: Iterable[Value]) -> None:
            mark(values, routed)

        for op in body.walk():
            if op.name in ROUTING_OPS:
                mark_routed(op.operands)
            elif op.name == "parallel_for" and any(
                    kind in ("min", "max") for kind in op.attrs["reductions"]):
                mark_routed(ParallelForOp(op).body.ops[-1].operands)
            if op.regions:
                for sources, targets in _loop_links(op):
                    if any(t in routed for t in targets):
                        mark_routed(sources)
            elif any(r in routed for r in op.results):
                mark_routed(op.operands)

    _grow_until_stable(step)
    return routed

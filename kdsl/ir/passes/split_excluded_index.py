"""Index-set splitting: a serial loop whose whole body is guarded by ``j != x`` (``x``
invariant in the loop) runs over ``[start, x)`` and then ``[x + 1, stop)`` without the
guard: one loop without it inside a loop over the two pieces.

This is the all-pairs pattern ``for j in range(n): if j == i: continue``: the per-element
comparison and the select it feeds disappear from the vectorised loop.
"""

from __future__ import annotations

from typing import Any

from kdsl import types as T
from kdsl.ir.analysis import definitions
from kdsl.ir.builder import typed_operation
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.effects import has_side_effects
from kdsl.ir.rewrite import clone_block, remap_operands
from kdsl.ir.structured import ForOp


def _constant(op: Operation | None, value: Any) -> bool:
    return op is not None and op.name == "constant" and op.attrs["value"] == value


class _Splitter:
    def __init__(self, function: Function) -> None:
        self.body = function.body
        self.definitions = definitions(self.body)
        self.mapping: dict[Value, Value] = {}

    def visit(self, block: Block) -> None:
        out: list[Operation] = []
        for op in block.ops:
            for region in op.regions:
                self.visit(region)
            replacement = self.split(op) if op.name == "for" else None
            out.extend(replacement if replacement is not None else [op])
        block.ops = out
        for op in out:
            op.parent = block

    def _guard(self, loop: Operation) -> tuple[Operation, Operation, Value] | None:
        """The ``if j != x`` guarding the whole body, its comparison, and ``x``."""
        body = loop.regions[0]
        iv, carried = body.args[0], body.args[1:]
        terminator = body.ops[-1]
        guards = [op for op in body.ops if op.name == "if" and op.results
                  and list(terminator.operands) == list(op.results)]
        if len(guards) != 1 or not carried:
            return None
        guard = guards[0]
        if list(guard.regions[1].ops[-1].operands) != list(carried) or len(guard.regions[1].ops) != 1:
            return None
        compare = self.definitions.get(guard.operands[0])
        if compare is None or compare.name != "ne" or compare not in body.ops:
            return None
        left, right = compare.operands
        excluded = right if left is iv else left if right is iv else None
        inside = {r for op in loop.walk() for r in op.results} | set(body.args)
        if excluded is None or excluded in inside:
            return None
        for op in body.ops:
            if op not in (guard, compare, terminator) and op.name != "array_load" and has_side_effects(op):
                return None
        return guard, compare, excluded

    def split(self, loop: Operation) -> list[Operation] | None:
        start, stop, step = ForOp(loop).start, ForOp(loop).stop, ForOp(loop).step
        if not _constant(self.definitions.get(step), 1):
            return None
        found = self._guard(loop)
        if found is None:
            return None
        guard, _, excluded = found
        location = loop.location

        def make(name: str, operands: list[Value], **attrs: Any) -> Operation:
            return typed_operation(name, operands, attrs, location=location)

        one = make("constant", [], value=1, type=T.i64)
        lower = make("max", [excluded, start])
        first_stop = make("min", [lower.result, stop])
        # x + 1 only where x < stop, so that it cannot overflow
        beyond = make("ge", [excluded, stop])
        capped = make("min", [excluded, stop])
        after = make("add", [capped.result, one.result])
        lower_after = make("max", [after.result, start])
        clamped = make("min", [lower_after.result, stop])
        second_start = make("select", [beyond.result, stop, clamped.result])
        zero = make("constant", [], value=0, type=T.i64)
        two = make("constant", [], value=2, type=T.i64)
        inits = ForOp(loop).inits
        # one copy of the body, run over each piece in turn: a loop over the two pieces
        # around it (LLVM compiles, vectorises and interleaves the body once, not twice)
        outer = Block([Value(T.i64, "piece"), *(Value(v.type) for v in inits)])
        first = make("eq", [outer.args[0], zero.result])
        piece_start = make("select", [first.result, start, second_start.result])
        piece_stop = make("select", [first.result, first_stop.result, stop])
        inner = self._loop(loop, guard, piece_start.result, piece_stop.result, step,
                           outer.args[1:])
        for op in (first, piece_start, piece_stop, inner,
                   make("yield", list(inner.results))):
            outer.append(op)
        # unrolled, the two pieces would be two loops again
        pieces = typed_operation("for", [zero.result, two.result, one.result, *inits],
                                 {"unroll": False}, [outer], location)
        for old, new in zip(loop.results, pieces.results):
            new.name_hint = old.name_hint
            self.mapping[old] = new
        return [one, lower, first_stop, beyond, capped, after, lower_after, clamped, second_start,
                zero, two, pieces]

    def _loop(self, loop: Operation, guard: Operation, start: Value, stop: Value, step: Value,
              inits: list[Value]) -> Operation:
        mapping: dict[Value, Value] = {}
        body = clone_block(loop.regions[0], mapping)
        position = loop.regions[0].ops.index(guard)
        cloned_guard = body.ops[position]
        then_region = cloned_guard.regions[0]
        yielded = then_region.ops[-1].operands
        body.ops[position:position + 1] = then_region.ops[:-1]
        local = dict(zip(cloned_guard.results, yielded))
        for op in body.walk():
            op.operands = [local.get(v, v) for v in op.operands]
        new = typed_operation("for", [start, stop, step, *inits], {}, [body], loop.location)
        for old, fresh in zip(loop.results, new.results):
            fresh.name_hint = old.name_hint
        return new


def run(function: Function, options: Any = None) -> None:
    splitter = _Splitter(function)
    splitter.visit(function.body)
    remap_operands(function.body, splitter.mapping)

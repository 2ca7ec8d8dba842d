"""Load speculation: an array load inside a branch moves in front of the branch when its
indices are provably in bounds (a loop variable running over ``range(a.shape[k])``) and
nothing in the branch writes memory before it.

Branch-free loads let LLVM turn the remaining branches into selects and vectorise the
loop (the n-body inner loop's ``if j == i: continue`` is the common case).
"""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.effects import has_effect
from kdsl.ir.structured import ForOp, ParallelForOp


class _Facts:
    """Which values are loop variables bounded by which sizes."""

    def __init__(self, body: Block) -> None:
        self.definition: dict[Value, Operation] = {}
        self.upper_bound: dict[Value, Value] = {}
        for op in body.walk():
            for r in op.results:
                self.definition[r] = op
        for op in body.walk():
            if op.name == "for":
                loop = ForOp(op)
                if self._constant(loop.start, lambda v: v >= 0) and self._constant(
                    loop.step, lambda v: v > 0
                ):
                    self.upper_bound[loop.iv] = loop.stop
            elif op.name == "parallel_for":
                nest = ParallelForOp(op)
                for iv, extent in zip(nest.ivs, nest.extents):
                    self.upper_bound[iv] = extent

    def _constant(self, v: Value, test: Any) -> bool:
        op = self.definition.get(v)
        return op is not None and op.name == "constant" and test(op.attrs["value"])

    def _dimension(self, v: Value) -> tuple[Value, int] | None:
        """(array, axis) if ``v`` is that array's size along that axis."""
        op = self.definition.get(v)
        if op is None:
            return None
        if op.name == "array_dim":
            return op.operands[0], op.attrs["axis"]
        if op.name == "max" and self._constant(op.operands[1], lambda c: c == 0):
            return self._dimension(op.operands[0])
        return None

    def in_bounds(self, load: Operation) -> bool:
        array = load.operands[0]
        for axis, index in enumerate(load.operands[1:]):
            bound = self.upper_bound.get(index)
            if bound is None or self._dimension(bound) != (array, axis):
                return False
        return True


def _hoistable(region: Block, facts: _Facts, outside: set[Value]) -> list[Operation]:
    hoisted = []
    for op in region.ops:
        if any(has_effect(inner) for inner in op.walk()):
            break
        if op.name == "array_load" and all(v in outside for v in op.operands) and facts.in_bounds(op):
            hoisted.append(op)
    return hoisted


def _visit(block: Block, facts: _Facts, defined: set[Value]) -> None:
    scope = set(defined) | set(block.args)
    out: list[Operation] = []
    for op in block.ops:
        for region in op.regions:
            _visit(region, facts, scope)
        if op.name == "if":
            for region in op.regions:
                for load in _hoistable(region, facts, scope):
                    region.ops.remove(load)
                    load.parent = block
                    out.append(load)
                    scope.update(load.results)
        out.append(op)
        scope.update(op.results)
    block.ops = out


def run(function: Function, options: Any = None) -> None:
    body = function.body
    _visit(body, _Facts(body), set())

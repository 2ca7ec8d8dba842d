"""Reciprocal sharing (fast-math only): divisions by powers of one value share a single
reciprocal of it.

``1.0 / (r2 * r2 * r2)`` and ``f / r2`` in one body cost two divisions; rewritten as
``inv = 1.0 / r2``, ``inv * inv * inv`` and ``f * inv`` they cost one. A division is the
slowest float operation in a vectorised loop (the Lennard-Jones force is the example),
and the rewrite only changes rounding, which fast-math allows.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kdsl import types as T
from kdsl.ir.analysis import definitions
from kdsl.ir.builder import typed_operation
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.location import UNKNOWN_LOCATION
from kdsl.ir.rewrite import remap_operands


def _power_of(value: Value, definitions: dict[Value, Operation]) -> tuple[Value, int]:
    """``value`` as ``base ** k`` when it is a product of one base; else (value, 1)."""
    op = definitions.get(value)
    if op is None or op.name != "mul":
        return value, 1
    left, right = (_power_of(v, definitions) for v in op.operands)
    if left[0] is right[0]:
        return left[0], left[1] + right[1]
    return value, 1


def _is_one(value: Value, definitions: dict[Value, Operation]) -> bool:
    op = definitions.get(value)
    return op is not None and op.name == "constant" and op.attrs["value"] == 1.0


class _Rewriter:
    def __init__(self, function: Function) -> None:
        self.body = function.body
        self.definitions = definitions(self.body)
        self.parent: dict[Operation, Block] = {}
        self.argument_block: dict[Value, Block] = {a: self.body for a in self.body.args}
        self._index_blocks(self.body)
        self.divisions: dict[Value, list[tuple[Operation, int]]] = defaultdict(list)

    def _index_blocks(self, block: Block) -> None:
        for op in block.ops:
            self.parent[op] = block
            for region in op.regions:
                for a in region.args:
                    self.argument_block[a] = region
                self._index_blocks(region)

    def _insert(self, block: Block, index: int, op: Operation) -> None:
        block.ops.insert(index, op)
        op.parent = block
        self.parent[op] = block

    def collect(self) -> None:
        for op in self.body.walk():
            if op.name != "div" or not isinstance(op.result.type, T.ScalarType):
                continue
            if not op.result.type.is_float:
                continue
            base, power = _power_of(op.operands[1], self.definitions)
            self.divisions[base].append((op, power))

    def rewrite(self) -> dict[Value, Value]:
        mapping: dict[Value, Value] = {}
        for base, uses in self.divisions.items():
            if len(uses) < 2 and not any(p > 1 for _, p in uses):
                continue  # one plain division: nothing to share
            reciprocal = self._insert_reciprocal(base)
            for op, power in uses:
                factor = reciprocal
                for _ in range(power - 1):
                    factor = self._mul_before(op, factor, reciprocal)
                if _is_one(op.operands[0], self.definitions):
                    mapping[op.result] = factor
                    op.name, op.operands = "mul", [factor, self._one_like(op, base)]
                else:
                    op.name, op.operands = "mul", [op.operands[0], factor]
        return mapping

    def _one_like(self, op: Operation, base: Value) -> Value:
        one = typed_operation("constant", [], {"value": 1.0, "type": base.type},
                              location=op.location)
        block = self.parent[op]
        self._insert(block, block.ops.index(op), one)
        return one.result

    def _mul_before(self, op: Operation, a: Value, b: Value) -> Value:
        mul = typed_operation("mul", [a, b], location=op.location)
        block = self.parent[op]
        self._insert(block, block.ops.index(op), mul)
        return mul.result

    def _insert_reciprocal(self, base: Value) -> Value:
        """``1 / base`` right after ``base`` is defined, so it dominates every use."""
        definition = self.definitions.get(base)
        if definition is not None:
            block = self.parent[definition]
            index = block.ops.index(definition) + 1
            location = definition.location
        else:  # a block argument
            block = self.argument_block[base]
            index = 0
            location = block.ops[0].location if block.ops else UNKNOWN_LOCATION
        one = typed_operation("constant", [], {"value": 1.0, "type": base.type},
                              location=location)
        reciprocal = typed_operation("div", [one.result, base], location=location)
        self._insert(block, index, one)
        self._insert(block, index + 1, reciprocal)
        return reciprocal.result


def run(function: Function, options: Any = None) -> None:
    if options is not None and not getattr(options, "fastmath", True):
        return
    rewriter = _Rewriter(function)
    rewriter.collect()
    mapping = rewriter.rewrite()
    remap_operands(function.body, mapping)

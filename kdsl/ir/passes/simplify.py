"""Simplification: constant folding, algebraic identities, branches on constants."""

from __future__ import annotations

import math
from typing import Any

from kdsl import types as T
from kdsl.ir.builder import typed_operation
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.rewrite import remap_operands


class _Simplifier:
    def __init__(self) -> None:
        self.constants: dict[Value, Any] = {}
        self.mapping: dict[Value, Value] = {}
        self.comparisons: dict[Value, tuple[str, tuple[Value, Value]]] = {}
        self.vectors: dict[Value, Operation] = {}  # splat and make_vector results

    def resolve(self, v: Value) -> Value:
        while v in self.mapping:
            v = self.mapping[v]
        return v

    def constant_op(self, value: Any, type: T.ScalarType, like: Operation) -> Operation:
        op = typed_operation("constant", [], {"value": value, "type": type}, location=like.location)
        self.constants[op.result] = value
        return op

    def replace_by_constant(self, op: Operation, value: Any) -> Operation:
        new = self.constant_op(value, op.result.type, op)
        self.mapping[op.result] = new.result
        return new

    def block(self, block: Block) -> None:
        out: list[Operation] = []
        for op in block.ops:
            op.operands = [self.resolve(v) for v in op.operands]
            for region in op.regions:
                self.block(region)
            replacement = self.simplify(op)
            if replacement is None:
                out.append(op)
            elif isinstance(replacement, list):
                out.extend(replacement)
            # else: results were mapped; the op disappears
        block.ops = out
        for op in out:
            op.parent = block

    def simplify(self, op: Operation) -> Any:
        """None keeps ``op``; a list of ops replaces it; True drops it (results mapped)."""
        from kdsl.ir.ops import lookup

        if op.name == "constant":
            self.constants[op.result] = op.attrs["value"]
            return None
        if op.name == "if":
            return self.simplify_if(op)
        if op.name in ("raise_shape_error", "raise_index_error") and self.constants.get(
            op.operands[-1 if op.name == "raise_index_error" else 0], _NOT_CONSTANT
        ) is True:
            return True  # a check that always passes
        if op.name in ("eq", "ne", "lt", "le", "gt", "ge"):
            left, right = op.operands
            if left is right and isinstance(left.type, T.ScalarType) and not left.type.is_float:
                return [self.replace_by_constant(op, op.name in ("eq", "le", "ge"))]
            self.comparisons[op.result] = (op.name, (left, right))
        if op.regions or not op.results or len(op.results) != 1:
            return None
        if op.name in ("splat", "make_vector"):
            self.vectors[op.result] = op
        elif op.name == "extract" and op.operands[0] in self.vectors:
            return self.component(op, self.vectors[op.operands[0]])
        values = [self.constants.get(v, _NOT_CONSTANT) for v in op.operands]
        definition = lookup(op.name)
        result_type = op.result.type
        if definition.fold is not None and values and all(v is not _NOT_CONSTANT for v in values):
            attrs = dict(op.attrs)
            if isinstance(op.operands[0].type, T.ScalarType):
                attrs["_operand_type"] = op.operands[0].type
            try:
                folded = definition.fold(values, attrs, result_type)
            except (ArithmeticError, ValueError, TypeError):
                folded = None
            if folded is not None:
                return [self.replace_by_constant(op, folded)]
        return self.identity(op, values)

    def identity(self, op: Operation, values: list[Any]) -> Any:
        name = op.name
        a = op.operands[0] if op.operands else None
        rt = op.result.type
        if name == "cast" and a is not None and a.type == rt:
            return self.forward(op, a)
        if len(values) == 2 and isinstance(rt, T.ScalarType):
            x, y = values
            left, right = op.operands
            # x + 0.0 is not x for x = -0.0; x + (-0.0) and x - 0.0 are
            if name in ("add", "bit_or", "bit_xor") and _is_additive_identity(y, rt) and not rt.is_bool:
                return self.forward(op, left)
            if name == "add" and _is_additive_identity(x, rt):
                return self.forward(op, right)
            if name == "sub" and y is not _NOT_CONSTANT and y == 0 and (
                not rt.is_float or math.copysign(1.0, y) > 0
            ):
                return self.forward(op, left)
            if name == "mul" and y == 1 and y is not _NOT_CONSTANT:
                return self.forward(op, left)
            if name == "mul" and x == 1 and x is not _NOT_CONSTANT:
                return self.forward(op, right)
            if name == "bit_and" and rt.is_bool:
                if y is True:
                    return self.forward(op, left)
                if x is True:
                    return self.forward(op, right)
                if y is False or x is False:
                    return [self.replace_by_constant(op, False)]
            if name == "bit_or" and rt.is_bool:
                if y is False:
                    return self.forward(op, left)
                if x is False:
                    return self.forward(op, right)
                if x is True or y is True:
                    return [self.replace_by_constant(op, True)]
        if name == "logical_not" and a is not None and a in self.comparisons:
            compared, (left, right) = self.comparisons[a]
            inverse = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "le": "gt", "gt": "le"}
            if not isinstance(left.type, T.ScalarType) or not left.type.is_float or compared in (
                "eq", "ne"
            ):  # for floats only eq/ne invert exactly (NaN)
                flipped = typed_operation(inverse[compared], [left, right], location=op.location)
                self.mapping[op.result] = flipped.result
                self.comparisons[flipped.result] = (inverse[compared], (left, right))
                return [flipped]
        if name == "select" and values and values[0] is not _NOT_CONSTANT:
            return self.forward(op, op.operands[1] if values[0] else op.operands[2])
        return None

    def component(self, op: Operation, vector: Operation) -> Any:
        """``extract`` of a component of a vector made of scalars: that scalar."""
        index = op.attrs.get("index")
        if not isinstance(vector.result.type, T.VectorType):
            return None
        if vector.name == "splat" and vector.operands[0].type == op.result.type:
            return self.forward(op, vector.operands[0])
        if (vector.name == "make_vector" and isinstance(index, int)
                and 0 <= index < len(vector.operands)
                and vector.operands[index].type == op.result.type):
            return self.forward(op, vector.operands[index])
        return None

    def forward(self, op: Operation, value: Value) -> bool:
        self.mapping[op.result] = value
        if value in self.constants:
            self.constants[op.result] = self.constants[value]
        return True

    def simplify_if(self, op: Operation) -> Any:
        cond = self.constants.get(op.operands[0], _NOT_CONSTANT)
        if cond is _NOT_CONSTANT:
            return self.boolean_if(op)
        region = op.regions[0] if cond else op.regions[1]
        body = region.ops[:-1]
        yielded = region.ops[-1].operands
        for result, value in zip(op.results, yielded):
            self.mapping[result] = self.resolve(value)
            if value in self.constants:
                self.constants[result] = self.constants[value]
        return body


    def boolean_if(self, op: Operation) -> Any:
        """``if c {yield True} else {yield False}`` is ``c`` (the flag a ``continue``
        sets); with the yields swapped it is ``not c``."""
        if len(op.results) != 1 or any(
            inner.name not in ("constant", "yield") for r in op.regions for inner in r.ops
        ):
            return None
        then_value = self.constants.get(self.resolve(op.regions[0].ops[-1].operands[0]), _NOT_CONSTANT)
        else_value = self.constants.get(self.resolve(op.regions[1].ops[-1].operands[0]), _NOT_CONSTANT)
        if then_value is True and else_value is False:
            self.mapping[op.result] = op.operands[0]
            return True
        if then_value is False and else_value is True:
            negation = typed_operation("logical_not", [op.operands[0]], location=op.location)
            self.mapping[op.result] = negation.result
            return [negation]
        return None


_NOT_CONSTANT = object()


def _is_additive_identity(value: Any, t: T.ScalarType) -> bool:
    if value is _NOT_CONSTANT or value != 0:
        return False
    return not t.is_float or math.copysign(1.0, value) < 0


def run(function: Function, options: Any = None) -> None:
    simplifier = _Simplifier()
    simplifier.block(function.body)
    remap_operands(function.body, simplifier.mapping)

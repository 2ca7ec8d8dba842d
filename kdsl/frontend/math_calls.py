"""Calls of the math builtins (``kd.erf``, ``np.arcsin``, ``math.hypot``, ...): operands
promoted as the table says, then one elementwise op, or a ``tensor_map`` over arrays."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.frontend.tensors import is_array
from kdsl.ir.core import Value
from kdsl.ir.math_builtins import MathFunction, Result

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering


def math_call(fn: MathFunction, python_result: bool = False) -> Callable[..., Value]:
    """The lowering of a call of ``fn``. ``python_result``: the ``math`` module's spelling,
    which computes in double precision and returns a Python number (a weak value)."""

    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        spelling = f"math.{fn.name}" if python_result else fn.name
        if len(args) != fn.arity:
            plural = "s" if fn.arity != 1 else ""
            lo.error(f"{spelling}() takes {fn.arity} argument{plural}, got {len(args)}", node)
        values = [lo.value_of(a, node) for a in args]
        if python_result:
            return _python_math(lo, fn, spelling, values, node)
        if any(is_array(v) for v in values):
            return _array_math(lo, fn, values, node)
        scalar, weak = T.element_scalar(values[0].type), lo.is_weak(values[0])
        shape: Any = None
        for v in values:
            if len(values) > 1:
                scalar, weak = T.promote(scalar, weak, T.element_scalar(v.type), lo.is_weak(v))
            if not isinstance(v.type, T.ScalarType):
                if shape is not None and shape.shape != v.type.shape:
                    lo.error(f"{fn.name}(): shapes differ: {shape} and {v.type}", node)
                shape = v.type
        scalar = _operand_scalar(lo, fn, scalar, node)
        target = scalar if shape is None else T.with_element_scalar(shape, scalar)
        return lo.strong(lo.op(fn.name, *[lo.coerce(v, target, node) for v in values], node=node))

    return handler


def _operand_scalar(lo: FunctionLowering, fn: MathFunction, scalar: T.ScalarType,
                    node: ast.AST) -> T.ScalarType:
    """The scalar type ``fn`` computes in, for operands promoted to ``scalar``."""
    if fn.result is Result.FLOAT and not scalar.is_float:
        return T.f64
    if fn.result is Result.SAME and scalar.is_bool:
        lo.error(f"{fn.name}() needs numbers, got bool", node)
    return scalar


def _python_math(lo: FunctionLowering, fn: MathFunction, spelling: str, values: list[Value],
                 node: ast.AST) -> Value:
    for v in values:
        if not isinstance(v.type, T.ScalarType):
            lo.error(f"{spelling}() needs scalars, got {v.type}", node)
    operands = [lo.coerce(v, T.f64, node) for v in values]
    return lo.mark_weak(lo.strong(lo.op(fn.name, *operands, node=node)))


def _array_math(lo: FunctionLowering, fn: MathFunction, values: list[Value], node: ast.AST) -> Value:
    common = lo._common_element(values, node)
    operand_type = T.with_element_scalar(common, _operand_scalar(lo, fn, T.element_scalar(common), node))
    result = T.with_element_scalar(operand_type, T.bool_) if fn.result is Result.BOOL else operand_type
    return lo.tensor_map(fn.name, values, operand_type, result, node)

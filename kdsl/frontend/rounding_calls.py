"""Python's ``round(x)`` and NumPy's ``np.round(x)`` / ``np.around(x)`` in kernels: the
nearest integer, halves to even (the ``rint`` math builtin). ``round`` of a float gives a
Python int (a weak i64), as in Python; ``np.round`` keeps the operand's type. An integer
is returned unchanged."""

from __future__ import annotations

import ast
import builtins as py
from typing import TYPE_CHECKING

import numpy as np

from kdsl import types as T
from kdsl.frontend.calls import builtin
from kdsl.frontend.math_calls import math_call
from kdsl.frontend.tensors import is_array
from kdsl.ir.core import Value
from kdsl.ir.math_builtins import MATH_FUNCTIONS

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering

_rint = math_call(MATH_FUNCTIONS["rint"])


def _one_operand(lo: FunctionLowering, node: ast.Call, args: list, name: str) -> Value:
    if len(args) != 1 or node.keywords:
        lo.error(f"{name}() takes one argument in kernels (no number of decimals)", node)
    return lo.value_of(args[0], node)


def _is_integer(v: Value) -> bool:
    element = v.type.dtype if is_array(v) else v.type
    element = getattr(element, "element", element)
    return isinstance(element, T.ScalarType) and not element.is_float


@builtin(py.round)
def _python_round(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    v = _one_operand(lo, node, args, "round")
    if not isinstance(v.type, T.ScalarType):
        lo.error(f"round() needs a scalar, got {v.type}; use np.round elementwise", node)
    rounded = v if _is_integer(v) else _rint(lo, node, args)
    return lo.mark_weak(lo.builder.cast(rounded, T.i64))  # a Python int, as Python's


@builtin(np.round, np.around)
def _numpy_round(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    v = _one_operand(lo, node, args, "np.round")
    if _is_integer(v):
        return lo.strong(v) if not is_array(v) else v
    return _rint(lo, node, args)

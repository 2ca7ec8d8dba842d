"""Python's ``round(x)`` and NumPy's ``np.round(x)`` / ``np.around(x)`` in kernels: the
nearest integer, halves to even (the ``rint`` math builtin). ``round`` of a float gives a
Python int (a weak i64), as in Python; ``np.round`` keeps the operand's type, and
``np.round(x, decimals)`` rounds as NumPy does (``rint(x * 10**decimals) / 10**decimals``
in the operand's type). An integer is returned unchanged."""

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
    if len(args) != 1 or node.keywords and name == "round":
        hint = " (use np.round(x, decimals))" if name == "round" else ""
        lo.error(f"{name}() takes one argument in kernels (no number of decimals){hint}", node)
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
    decimals = _decimals(lo, node, args)
    v = _one_operand(lo, node, args[:1], "np.round")
    if _is_integer(v):
        if decimals < 0:
            lo.error("np.round() of an integer to negative decimals is not supported in "
                     "kernels", node)
        return lo.strong(v) if not is_array(v) else v
    if decimals == 0:
        return _rint(lo, node, [v])
    # as NumPy computes it: rint(x * 10**d) / 10**d in x's type (10**-d for d < 0)
    scale = lo.constant(10.0 ** abs(decimals))
    if decimals > 0:
        return lo.binary("div", _rint(lo, node, [lo.binary("mul", v, scale, node)]), scale, node)
    return lo.binary("mul", _rint(lo, node, [lo.binary("div", v, scale, node)]), scale, node)


def _decimals(lo: FunctionLowering, node: ast.Call, args: list) -> int:
    """The ``decimals`` of ``np.round(x, decimals)``: a constant integer (0 if not given)."""
    given = list(args[1:])
    for keyword in node.keywords:
        if keyword.arg != "decimals" or given:
            lo.error(f"np.round() got an unexpected keyword argument '{keyword.arg}'", node)
        given.append(lo.expr(keyword.value))
    if not given:
        return 0
    if len(given) > 1:
        lo.error("np.round() takes an operand and a number of decimals", node)
    value = given[0]
    known = lo.builder.known_constants.get(value) if isinstance(value, Value) else getattr(
        value, "obj", None)
    if type(known) is not int:
        lo.error("np.round()'s decimals must be a constant integer in kernels", node)
    return known

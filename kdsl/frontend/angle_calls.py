"""Angle conversions in kernels: ``math.radians``/``math.degrees`` (a Python float, as
Python computes it: ``x * (pi / 180)`` in double precision) and NumPy's ``np.radians``,
``np.deg2rad``, ``np.degrees``, ``np.rad2deg`` (elementwise on scalars, vectors and
arrays, ``x`` times the factor NumPy uses in ``x``'s float type, so results are NumPy's
bit for bit; an integer becomes float64)."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from kdsl import types as T
from kdsl.frontend.calls import builtin
from kdsl.frontend.tensors import is_array
from kdsl.ir.core import Value

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering

Handler = Callable[["FunctionLowering", ast.Call, list], Value]


def _numpy_factor(to_radians: bool, scalar: T.ScalarType) -> float:
    """The factor NumPy multiplies by, in ``scalar``'s precision (``np.radians(1)``)."""
    one = scalar.numpy_dtype.type(1)
    return float(np.radians(one) if to_radians else np.degrees(one))


def _angle(to_radians: bool, name: str, python_result: bool) -> Handler:
    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        if len(args) != 1 or node.keywords:
            lo.error(f"{name}() takes one argument", node)
        v = lo.value_of(args[0], node)
        element = T.element_scalar(v.type.dtype if is_array(v) else v.type)
        if python_result:
            if not isinstance(v.type, T.ScalarType):
                lo.error(f"{name}() needs a number, got {v.type}", node)
            factor = math.radians(1.0) if to_radians else math.degrees(1.0)
            product = lo.op("mul", lo.coerce(v, T.f64, node), lo.constant(factor, T.f64))
            return lo.mark_weak(product)  # a Python float, as Python's math gives
        scalar = element if element.is_float else T.f64
        factor_value = lo.constant(_numpy_factor(to_radians, scalar), scalar)
        if not is_array(v):
            v = lo.coerce(v, T.with_element_scalar(v.type, scalar), node)
        return lo.strong(lo.binary("mul", v, factor_value, node))  # type: ignore[attr-defined]

    return handler


builtin(math.radians)(_angle(True, "math.radians", python_result=True))
builtin(math.degrees)(_angle(False, "math.degrees", python_result=True))
builtin(np.radians, np.deg2rad)(_angle(True, "np.radians", python_result=False))
builtin(np.degrees, np.rad2deg)(_angle(False, "np.degrees", python_result=False))

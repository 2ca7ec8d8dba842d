"""Comparisons in the plain-Python form of a kernel: as compiled, only scalars compare.

Compiled code refuses ``v > 0.5`` or ``v == w`` for vectors and matrices with a located
``CompileError``; NumPy would give an elementwise array. ``kernel.python`` raises the same
error, so the reference never accepts what the compiler refuses.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.builtins import Matrix, Vector
from kdsl.errors import CompileError
from kdsl.ir.location import SourceLocation

COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}
_SCALAR_NAMES = {np.dtype(t.numpy_dtype): t for t in T.SCALAR_TYPES}


def _type_name(value: Any) -> str:
    if isinstance(value, (Vector, Matrix)):
        element = _SCALAR_NAMES.get(value.dtype)
        if element is not None:
            if isinstance(value, Vector) and value.ndim == 1:
                return str(T.vector_type(element, value.shape[0]))
            if value.ndim == 2:
                return str(T.matrix_type(element, *value.shape))
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "i64"
    if isinstance(value, float):
        return "f64"
    if isinstance(value, np.generic) and value.dtype in _SCALAR_NAMES:
        return str(_SCALAR_NAMES[value.dtype])
    return type(value).__name__


def compared(symbol: str, left: Any, right: Any, where: tuple[str, int, int, str]) -> Any:
    """``left <symbol> right``; a ``CompileError`` at ``where`` (file, line, column,
    function) when either side is a vector or matrix."""
    if isinstance(left, (Vector, Matrix)) or isinstance(right, (Vector, Matrix)):
        raise CompileError(
            f"comparison of {_type_name(left)} and {_type_name(right)}: only scalars compare",
            SourceLocation(*where),
        )
    return COMPARISONS[symbol](left, right)


def small_power(base: Any, exponent: int) -> Any:
    """``base ** exponent`` for a literal exponent from 0 to 8, a float computed by
    squaring as compiled code computes it (``x ** 3`` is ``x * x * x`` rounded after each
    product, where NumPy's power rounds the exact power once); other types as ``**``."""
    if exponent == 0 or not _is_float(base):
        return base ** exponent
    result = None
    square = base
    while exponent:
        if exponent & 1:
            result = square if result is None else result * square
        exponent >>= 1
        if exponent:
            square = square * square
    return result


def _is_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    dtype = getattr(value, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "f"

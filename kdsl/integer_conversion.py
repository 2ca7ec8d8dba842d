"""Converting to an integer type in plain Python exactly as compiled kernels do.

A float becomes an integer by truncation toward zero, saturating at the type's range, NaN
giving 0 (``llvm.fpto[su]i.sat`` on the CPU, ``cvt.rzi.sat`` on CUDA); an integer of
another type wraps to the new width, as NumPy's ``astype`` does. A Python int is an
integer of another type here (a kernel sees an int argument as i64); only an integer
literal written in the conversion (``kd.u8(300)``) that the type cannot hold is an error,
a ``CompileError`` compiled and an ``OverflowError`` in plain Python.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

import numpy as np

_NUMPY_INTEGER_TYPES = (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64
)
# the names under which a kernel may call one of these conversions
CONVERSION_NAMES = frozenset({"int", *(t.__name__ for t in _NUMPY_INTEGER_TYPES)})
# the names of kdsl's integer types (``kd.u8(x)``), which convert as the NumPy ones do
KDSL_INTEGER_NAMES = frozenset({"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"})


def _is_float_data(value: Any) -> bool:
    if isinstance(value, (float, np.floating)):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def saturating_integer(dtype: np.dtype, value: Any) -> Any:
    """``value`` (a float, a NumPy float scalar or array of floats) converted to the integer
    ``dtype``: truncated toward zero, saturated at the type's range, NaN to 0."""
    info = np.iinfo(dtype)
    data = np.trunc(np.asarray(value, dtype=np.float64))
    too_high = data >= float(int(info.max) + 1)  # a power of two, exact in float64
    too_low = data < float(info.min)
    inside = np.where(too_high | too_low | np.isnan(data), 0.0, data).astype(dtype)
    result = np.where(too_high, dtype.type(info.max), np.where(too_low, dtype.type(info.min), inside))
    if isinstance(value, np.ndarray):
        return result.astype(dtype).view(type(value))
    return dtype.type(result)


def wrapping_integer(dtype: np.dtype, value: Any) -> Any:
    """An integer of another type (a NumPy integer scalar or array) converted to ``dtype``
    by keeping its low bits, as compiled code and ``astype`` do."""
    result = np.asarray(value).astype(dtype)
    if isinstance(value, np.ndarray):
        return result.view(type(value))
    return dtype.type(result)


def convert_integer(dtype: np.dtype, value: Any) -> Any:
    """``kd.i32(value)``, ``np.uint8(value)`` and the like, as compiled code gives them."""
    if _is_float_data(value):
        return saturating_integer(dtype, value)
    if isinstance(value, (np.integer, np.bool_)) or (
        isinstance(value, np.ndarray) and value.dtype.kind in "iub"
    ):
        return wrapping_integer(dtype, value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _wrapping_python_int(dtype, value)
    return dtype.type(value)


def _wrapping_python_int(dtype: np.dtype, value: int) -> Any:
    """A Python int keeps the low bits that fit in ``dtype``, as compiled code, where it is
    an i64, does (also for one beyond 64 bits, such as a product that wrapped there)."""
    return wrapping_integer(dtype, np.uint64(value % 2**64))


def checked_literal_conversion(function: Any, value: Any) -> Any:
    """``kd.u8(300)``: a conversion of an integer literal, which the type must hold (the
    compiled kernel refuses it with a ``CompileError`` at the literal)."""
    dtype = _integer_dtype(function)
    if dtype is not None and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            name = getattr(function, "name", None) or dtype.name
            raise OverflowError(f"{value} does not fit in {name} [{info.min}, {info.max}]")
    return converted_call(function, value)


def _integer_dtype(function: Any) -> np.dtype | None:
    """The integer dtype a conversion function produces, or None for any other callable."""
    if any(function is t for t in _NUMPY_INTEGER_TYPES):
        return np.dtype(function)
    numpy_dtype = getattr(function, "numpy_dtype", None)
    if getattr(function, "is_integer", False) and numpy_dtype is not None:
        return np.dtype(numpy_dtype)
    return None


def python_int(value: Any) -> Any:
    """``int(value)`` in a kernel: a float saturates to int64's range (NaN gives 0), a
    NumPy integer wraps to int64; a Python int is unchanged."""
    if _is_float_data(value) and not isinstance(value, np.ndarray):
        return builtins.int(saturating_integer(np.dtype(np.int64), value))
    if isinstance(value, np.integer):
        return builtins.int(wrapping_integer(np.dtype(np.int64), value))
    return builtins.int(value)


def converted_call(function: Any, *args: Any, **keywords: Any) -> Any:
    """``function(*args)`` where ``function`` may be an integer conversion; used by the
    plain-Python form of a kernel so that its conversions match compiled code."""
    if len(args) == 1 and not keywords:
        if function is builtins.int:
            return python_int(args[0])
        if any(function is t for t in _NUMPY_INTEGER_TYPES):
            return convert_integer(np.dtype(function), args[0])
    return function(*args, **keywords)


def integer_literal(node: ast.expr) -> int | None:
    """The value of an integer literal in source (``300``, ``-1``), else None."""
    sign = 1
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -sign if isinstance(node.op, ast.USub) else sign
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return sign * node.value
    return None

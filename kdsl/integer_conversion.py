"""Converting to an integer type in plain Python exactly as compiled kernels do.

A float becomes an integer by truncation toward zero, saturating at the type's range, NaN
giving 0 (``llvm.fpto[su]i.sat`` on the CPU, ``cvt.rzi.sat`` on CUDA); an integer of
another type wraps to the new width, as NumPy's ``astype`` does.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

_NUMPY_INTEGER_TYPES = (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64
)
# the names under which a kernel may call one of these conversions
CONVERSION_NAMES = frozenset({"int", *(t.__name__ for t in _NUMPY_INTEGER_TYPES)})


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
    return dtype.type(value)  # a Python int or bool: NumPy's checks (OverflowError) apply


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

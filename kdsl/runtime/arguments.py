"""Typing a kernel's arguments: the key of the fast dispatch path, the types a
specialisation is compiled for, and the checks annotations ask for."""

from __future__ import annotations

from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.builtins import Matrix, Vector
from kdsl.frontend.scope import VariableType
from kdsl.records import dataclass

_SHORT = T.FIXED_LAST_AXIS_SIZES
MAX_FIXED_MATRIX_BYTES = T.MAX_FIXED_MATRIX_BYTES


def fixed_last_axis(shape: tuple[int, ...], c_contiguous: bool) -> int | None:
    """The size of an array's last axis where a specialisation fixes it (see
    ``ArrayType.last_axis_size``), else None."""
    if c_contiguous and len(shape) >= 2 and shape[-1] in T.FIXED_LAST_AXIS_SIZES:
        return shape[-1]
    return None


def fixed_middle_axis(shape: tuple[int, ...], c_contiguous: bool, itemsize: int) -> int | None:
    """The size of the axis before a fixed last axis where a specialisation fixes it too
    (see ``ArrayType.middle_axis_size``): 2 to 8 elements, and a matrix of at most
    ``MAX_FIXED_MATRIX_BYTES`` (wider ones are streamed faster with a runtime stride).
    Else None. The compiled call path (fast_call.py) classifies arrays the same way."""
    if (c_contiguous and len(shape) >= 3 and shape[-1] in _SHORT and shape[-2] in _SHORT
            and shape[-1] * shape[-2] * itemsize <= MAX_FIXED_MATRIX_BYTES):
        return shape[-2]
    return None


def padded_rows(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int] | None:
    """``(n, pitch)`` for an array that is not C-contiguous whose rows are short and
    padded (see ``ArrayType.row_pitch``): its last axis holds ``n`` (2 to 8) adjacent
    elements, and the axis before it steps ``pitch`` elements (``n`` to 16). Else None.

    The compiled call path (fast_call.py) classifies arrays the same way."""
    if len(shape) < 2 or shape[-1] not in T.FIXED_LAST_AXIS_SIZES or strides[-1] != itemsize:
        return None
    pitch, rest = divmod(strides[-2], itemsize)
    if rest or not shape[-1] <= pitch < T.FIXED_ROW_PITCHES.stop:
        return None
    return shape[-1], pitch


def unit_first_stride(strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether an array that is neither C-contiguous nor of padded rows has a first axis
    that steps one element (see ``ArrayType.unit_first_stride``): a column-major array.

    The compiled call path (fast_call.py) classifies arrays the same way."""
    return len(strides) >= 2 and strides[0] == itemsize


def argument_layout(a: np.ndarray) -> tuple[bool, int | None, int | None, bool, int | None]:
    """Whether a NumPy array is C-contiguous, and the last-axis size, row pitch, unit
    first stride and middle-axis size a specialisation may fix (``ArrayType.specialised``'s
    arguments)."""
    if a.flags.c_contiguous:
        return True, fixed_last_axis(a.shape, True), None, False, fixed_middle_axis(a.shape, True, a.itemsize)
    rows = padded_rows(a.shape, a.strides, a.itemsize)
    if rows is None:
        return False, None, None, unit_first_stride(a.strides, a.itemsize), None
    return False, *rows, False, None


def argument_key(a: Any) -> Any:
    """A cheap, hashable summary of an argument's type (the fast path's key)."""
    t = type(a)
    if t is np.ndarray:
        contiguous = a.flags.c_contiguous
        if contiguous:  # fixed_last_axis and fixed_middle_axis, inline: every slow call
            shape = a.shape
            if len(shape) < 2 or shape[-1] not in _SHORT:
                return (a.dtype, a.ndim, True, None, None)
            middle = shape[-2] if (len(shape) >= 3 and shape[-2] in _SHORT and shape[-1] * shape[-2]
                                   * a.itemsize <= MAX_FIXED_MATRIX_BYTES) else None
            return (a.dtype, a.ndim, True, shape[-1], middle)
        rows = padded_rows(a.shape, a.strides, a.itemsize)
        return (a.dtype, a.ndim, False, rows,
                rows is None and unit_first_stride(a.strides, a.itemsize))
    if t is float or t is int or t is bool:
        return t
    if isinstance(a, np.generic):
        return a.dtype
    if t is Vector or t is Matrix:
        return (t, a.dtype, a.shape)
    if isinstance(a, np.ndarray):  # subclasses (np.memmap, ...)
        return (t, a.dtype, a.ndim, *argument_layout(a))
    if getattr(t, "__kdsl_cuda__", False):
        contiguous = a.flags_c_contiguous
        shape = tuple(a.shape)
        return ("cuda", a.dtype, a.ndim, contiguous, fixed_last_axis(shape, contiguous),
                fixed_middle_axis(shape, contiguous, a.dtype.itemsize))
    unwrap = getattr(a, "__kdsl_array__", None)
    if unwrap is not None:
        return argument_key(unwrap())
    return t


def is_cuda_array(a: Any) -> bool:
    return bool(getattr(type(a), "__kdsl_cuda__", False))


def _typing_stand_in(a: Any) -> np.ndarray:
    """A NumPy array of a CUDA array's dtype, shape and strides (never read): typed
    exactly as the CUDA array is."""
    base = np.empty(1, dtype=a.dtype)
    return np.lib.stride_tricks.as_strided(base, shape=tuple(a.shape), strides=tuple(a.strides),
                                           writeable=False)


@dataclass(frozen=True)
class Parameter:
    """How one argument is passed: its kdsl type, and how it is converted per call."""

    name: str
    type: Any
    weak: bool
    passing: str  # "object" (arrays), "device" (CUDA arrays), "vector", "float", "int"
    trailing_shape: tuple[int, ...] = ()


def _describe_argument(a: Any) -> str:
    if isinstance(a, np.ndarray):
        article = "an" if str(a.dtype)[0] in "aeiou" else "a"  # an int64 array
        return f"{article} {a.dtype} array of shape {a.shape}"
    if isinstance(a, np.generic):
        return f"{a.dtype} {a!r}"
    return f"{type(a).__name__} {a!r}"


def _describe_annotation(t: Any) -> str:
    if isinstance(t, T.ArrayType):
        scalar = T.element_scalar(t.dtype)
        shape = ", ".join(["n"] * t.ndim + [str(s) for s in T.element_shape(t.dtype)])
        return f"{t.dtype} array with {t.ndim} indexed axes ({scalar.numpy_dtype}, shape ({shape}))"
    return str(t)


def parameter_for(name: str, annotation: Any, a: Any) -> Parameter:
    """The parameter an argument binds to; TypeError naming it when it does not fit."""
    if is_cuda_array(a):
        p = parameter_for(name, annotation, _typing_stand_in(a))
        if isinstance(p.type, T.ArrayType) and (p.type.row_pitch is not None
                                                or p.type.unit_first_stride):  # host only
            p = Parameter(p.name, p.type.generalised(), p.weak, p.passing, p.trailing_shape)
        if p.passing != "object":  # a vector, matrix or scalar: a value the host passes
            raise TypeError(f"argument '{name}': expected {_describe_annotation(p.type)} "
                            f"(a value, passed from the host), got a CUDA array of shape "
                            f"{tuple(a.shape)}; pass .numpy() or a tuple")
        return Parameter(p.name, p.type, p.weak, "device", p.trailing_shape)
    unwrap = getattr(a, "__kdsl_array__", None)
    if unwrap is not None:
        a = unwrap()

    def mismatch() -> TypeError:
        return TypeError(
            f"argument '{name}': expected {_describe_annotation(annotation)}, "
            f"got {_describe_argument(a)}"
        )

    if isinstance(annotation, T.ArrayType):
        if not isinstance(a, np.ndarray):
            raise mismatch()
        scalar = T.element_scalar(annotation.dtype)
        trailing = T.element_shape(annotation.dtype)
        if a.dtype != scalar.numpy_dtype or a.ndim != annotation.full_ndim:
            raise mismatch()
        if trailing and tuple(a.shape[a.ndim - len(trailing):]) != trailing:
            raise mismatch()
        specialised = annotation.specialised(*argument_layout(a))
        return Parameter(name, specialised, False, "object", trailing)
    if isinstance(annotation, (T.VectorType, T.MatrixType)):
        vector_argument(name, annotation, a)
        return Parameter(name, annotation, False, "vector")
    if isinstance(annotation, T.ScalarType):
        if isinstance(a, np.ndarray) or not isinstance(a, (bool, int, float, np.generic)):
            raise mismatch()
        if isinstance(a, (bool, int)) and not isinstance(a, np.generic):
            if isinstance(a, float):
                raise mismatch()
        elif not np.can_cast(np.asarray(a).dtype, annotation.numpy_dtype, "same_kind"):
            raise mismatch()
        elif isinstance(a, float) and not annotation.is_float:
            raise mismatch()
        if annotation.is_integer:
            check_integer_range(name, annotation, a)
        return Parameter(name, annotation, False, "float" if annotation.is_float else "int")
    return _unannotated(name, a)


def vector_argument(name: str, t: T.VectorType | T.MatrixType, a: Any) -> np.ndarray:
    """``a`` as a contiguous array of ``t``'s components, or TypeError naming the
    parameter when it has the wrong shape or components (complex, text, ragged lists).

    Every call checks this, the fast path too: a list's type says nothing of its length."""
    dtype = T.element_scalar(t).numpy_dtype
    if type(a) in (Vector, Matrix) and a.shape == t.shape and a.dtype == dtype:
        return np.ascontiguousarray(a)
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError):  # a ragged list
        arr = None
    if arr is None or arr.shape != t.shape or not np.can_cast(arr.dtype, dtype, "same_kind"):
        raise TypeError(f"argument '{name}': expected {_describe_annotation(t)}, "
                        f"got {_describe_argument(a)}")
    return np.ascontiguousarray(arr, dtype=dtype)


def check_integer_range(name: str, t: T.ScalarType, a: Any) -> int:
    """``a`` as a Python int, or OverflowError naming the parameter when ``t`` cannot hold it."""
    value = int(a)
    info = np.iinfo(t.numpy_dtype)
    if not info.min <= value <= info.max:
        raise OverflowError(f"argument '{name}': {value} does not fit in {t} "
                            f"[{info.min}, {info.max}]")
    return value


def _unannotated(name: str, a: Any) -> Parameter:
    if isinstance(a, (Vector, Matrix)):
        scalar = T.scalar_from_numpy(a.dtype)
        t = T.vector_type(scalar, a.shape[0]) if a.ndim == 1 else T.matrix_type(scalar, *a.shape)
        return Parameter(name, t, False, "vector")
    if isinstance(a, np.ndarray):
        if a.ndim == 0:
            return _unannotated(name, a[()])
        try:
            scalar = T.scalar_from_numpy(a.dtype)
        except TypeError:
            raise TypeError(f"argument '{name}': kdsl has no type for {a.dtype} arrays") from None
        array_t = T.ArrayType(scalar, a.ndim).specialised(*argument_layout(a))
        return Parameter(name, array_t, False, "object")
    if isinstance(a, np.generic):  # before float: np.float64 subclasses float
        try:
            scalar = T.scalar_from_numpy(a.dtype)
        except TypeError:
            raise TypeError(f"argument '{name}': kdsl has no type for {a.dtype}") from None
        return Parameter(name, scalar, False, "float" if scalar.is_float else "int")
    if isinstance(a, bool):
        return Parameter(name, T.bool_, True, "int")
    if isinstance(a, int):
        check_integer_range(name, T.i64, a)
        return Parameter(name, T.i64, True, "int")
    if isinstance(a, float):
        return Parameter(name, T.f64, True, "float")
    raise TypeError(f"argument '{name}': kdsl cannot pass {_describe_argument(a)} to a kernel")


def variable_types(params: list[Parameter]) -> list[VariableType]:
    return [VariableType(p.type, p.weak) for p in params]

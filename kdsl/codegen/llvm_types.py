"""How kdsl types are represented in LLVM IR.

Scalars are LLVM scalars (bool is i1 in registers, i8 in memory). Vectors and matrices
are kept as Python lists of scalar LLVM values, one per component, so that the loop
vectoriser sees only scalar code and can vectorise across iterations. Arrays are an
`ArrayView`: a byte pointer, the size of every axis and every byte stride.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from kdsl import types as T
from kdsl.records import dataclass

i1 = ir.IntType(1)
i8 = ir.IntType(8)
i32 = ir.IntType(32)
i64 = ir.IntType(64)
f32 = ir.FloatType()
f64 = ir.DoubleType()
i8_ptr = i8.as_pointer()
void = ir.VoidType()

_SCALARS = {
    "bool": i1, "i8": i8, "u8": i8, "i16": ir.IntType(16), "u16": ir.IntType(16),
    "i32": i32, "u32": i32, "i64": i64, "u64": i64, "f32": f32, "f64": f64,
}


def scalar_type(t: T.ScalarType) -> ir.Type:
    return _SCALARS[t.name]


def memory_type(t: T.ScalarType) -> ir.Type:
    """The in-memory type of a scalar (bool is a byte)."""
    return i8 if t.is_bool else _SCALARS[t.name]


@dataclass
class ArrayView:
    """An array argument in registers: data pointer, sizes and byte strides of all axes."""

    data: ir.Value
    shape: list[ir.Value]
    strides: list[ir.Value]

    def flatten(self) -> list[ir.Value]:
        return [self.data, *self.shape, *self.strides]

    @staticmethod
    def unflatten(values: list[ir.Value], full_ndim: int) -> ArrayView:
        return ArrayView(values[0], list(values[1:1 + full_ndim]), list(values[1 + full_ndim:]))


# an LLVM value (scalar), a list of them (vector, matrix) or an ArrayView; kept as Any
# because the emitter dispatches on the IR type, which mypy cannot follow
Repr = Any


def flatten(value: Repr, t: Any = None) -> list[ir.Value]:
    """A value's LLVM parts. For an array type that implies strides (C-contiguous, or
    padded rows), the strides it implies (of the last free axis and of the fixed axes)
    are left out: they stay constants wherever the array goes (phis, parallel regions),
    which the vectoriser needs. So is the first stride of an array of unit first stride."""
    if isinstance(value, ArrayView):
        if isinstance(t, T.ArrayType) and t.strides_implied:
            free = t.free_ndim
            return [value.data, *value.shape[:free], *value.strides[:free - 1]]
        if isinstance(t, T.ArrayType) and t.unit_first_stride:
            return [value.data, *value.shape, *value.strides[1:]]
        return value.flatten()
    if isinstance(value, list):
        return list(value)
    return [value]


def atomicrmw_operation(kind: str, t: T.ScalarType) -> str:
    """LLVM's ``atomicrmw`` operation for an atomic update (add, sub, min, max) of ``t``."""
    if t.is_float:
        return {"add": "fadd", "sub": "fsub", "min": "fmin", "max": "fmax"}[kind]
    if kind in ("add", "sub") or t.is_signed:
        return kind
    return f"u{kind}"


def row_major_strides(builder: ir.IRBuilder, shape: Sequence[ir.Value], itemsize: int) -> list[ir.Value]:
    """Byte strides of a C-contiguous array of ``shape``; constants where the sizes are."""
    strides: list[ir.Value] = [ir.Constant(i64, itemsize)]
    for size in reversed(shape[1:]):
        inner = strides[0]
        if isinstance(size, ir.Constant) and isinstance(inner, ir.Constant):
            strides.insert(0, ir.Constant(i64, size.constant * inner.constant))
        else:
            strides.insert(0, builder.mul(inner, size))
    return strides


def implied_strides(t: T.ArrayType) -> list[ir.Value]:
    """The constant strides of an array whose type implies them (C-contiguous, or padded
    rows): those of its last free axis and of the axes the type fixes."""
    scalar = T.element_scalar(t.dtype)
    stride = scalar.itemsize
    strides: list[ir.Value] = []
    for size in reversed(t.fixed_shape):
        strides.insert(0, ir.Constant(i64, stride))
        stride *= size
    if t.row_pitch is not None:
        stride = t.row_pitch * scalar.itemsize
    return [ir.Constant(i64, stride)] + strides


def first_stride(t: T.ArrayType) -> ir.Value:
    """The byte stride of the first axis of an array of unit first stride: a constant."""
    return ir.Constant(i64, T.element_scalar(t.dtype).itemsize)


def unflatten(t: Any, values: list[ir.Value]) -> Repr:
    if isinstance(t, T.ArrayType):
        if t.unit_first_stride:
            view = ArrayView.unflatten([*values[:1 + t.full_ndim], ir.Constant(i64, 0),
                                        *values[1 + t.full_ndim:]], t.full_ndim)
            view.strides[0] = first_stride(t)
            return view
        if not t.strides_implied:
            return ArrayView.unflatten(values, t.full_ndim)
        free = t.free_ndim
        fixed_shape = [ir.Constant(i64, s) for s in t.fixed_shape]
        data, shape = values[0], list(values[1:1 + free]) + fixed_shape
        leading = list(values[1 + free:])
        return ArrayView(data, shape, leading + implied_strides(t))
    if isinstance(t, (T.VectorType, T.MatrixType)):
        return list(values)
    (v,) = values
    return v


def flat_types(t: Any) -> list[ir.Type]:
    """The LLVM types of a value's flattened parts (for phis and packing into structs)."""
    if isinstance(t, T.ArrayType):
        if t.strides_implied:
            return [i8_ptr] + [i64] * (2 * t.free_ndim - 1)
        if t.unit_first_stride:
            return [i8_ptr] + [i64] * (2 * t.full_ndim - 1)
        return [i8_ptr] + [i64] * (2 * t.full_ndim)
    if isinstance(t, (T.VectorType, T.MatrixType)):
        return [scalar_type(t.element)] * t.count
    return [scalar_type(t)]

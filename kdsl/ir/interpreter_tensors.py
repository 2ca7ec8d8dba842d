"""The interpreter's rules for whole-array ops and views, so that it runs a module at
every stage, before ``lower-tensors`` as after: NumPy operations on the NumPy arrays that
stand for kdsl arrays (vector and matrix elements as trailing axes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.ir.core import Operation


class InterpreterError(Exception):
    """The program did something the interpreter reports (bad index, failed assert,
    shapes that do not broadcast)."""


def _numpy_dtype(t: Any) -> np.dtype:
    return T.element_scalar(t).numpy_dtype


def _operand_element(t: Any) -> Any:
    return t.dtype if isinstance(t, T.ArrayType) else t


def _aligned(value: Any, t: Any, element_ndim: int) -> np.ndarray:
    """``value`` with axes of size 1 after its own, so that a scalar-element operand
    broadcasts against vector elements."""
    array = np.asarray(value)
    missing = element_ndim - len(T.element_shape(_operand_element(t)))
    return array.reshape(array.shape + (1,) * missing) if missing > 0 else array


_REDUCERS: dict[str, Callable[..., Any]] = {"sum": np.sum, "mean": np.mean, "min": np.min,
                                            "max": np.max}


class TensorOps:
    """Mixed into the interpreter: ``elementwise`` maps an op name to its NumPy rule."""

    elementwise: dict[str, Callable[..., Any]]

    def op_array_view(self, op: Operation, args: list, env: dict) -> list:
        array, parts = args[0], iter(args[1:])
        index: list[Any] = []
        for item in op.attrs["spec"]:
            if item[0] == "index":
                index.append(int(next(parts)))
            elif item[0] == "newaxis":
                index.append(None)
            else:
                start, stop, step = (int(next(parts)) if present else None for present in item[1:])
                if step == 0:
                    raise InterpreterError("slice step cannot be zero")
                index.append(slice(start, stop, step))
        try:
            return [array[tuple(index)]]
        except IndexError as exc:
            raise InterpreterError(str(exc)) from exc

    def op_array_transpose(self, op: Operation, args: list, env: dict) -> list:
        t: T.ArrayType = op.operands[0].type
        element_axes = list(range(t.ndim, args[0].ndim))
        return [np.transpose(args[0], list(reversed(range(t.ndim))) + element_axes)]

    def op_tensor_map(self, op: Operation, args: list, env: dict) -> list:
        result: T.ArrayType = op.result.type
        fn, operand_type = op.attrs["fn"], op.attrs["operand_type"]
        element_ndim = len(T.element_shape(result.dtype))
        values = [_aligned(a, v.type, element_ndim) for a, v in zip(args, op.operands)]
        with np.errstate(all="ignore"):
            if fn == "select":
                cond = values[0].astype(bool)
                converted = [v.astype(_numpy_dtype(operand_type)) for v in values[1:]]
                out = np.where(cond, *converted)
            else:
                converted = [v.astype(_numpy_dtype(operand_type)) for v in values]
                try:
                    np.broadcast_shapes(*[c.shape for c in converted])
                except ValueError as exc:
                    raise InterpreterError(str(exc)) from exc
                out = self.elementwise[fn](*converted)
            return [np.asarray(out).astype(_numpy_dtype(result.dtype))]

    def op_tensor_reduce(self, op: Operation, args: list, env: dict) -> list:
        source: T.ArrayType = op.operands[0].type
        kind, axis, keepdims = op.attrs["kind"], op.attrs["axis"], op.attrs["keepdims"]
        result_type = op.result.type
        element = result_type.dtype if isinstance(result_type, T.ArrayType) else result_type
        data = np.asarray(args[0]).astype(_numpy_dtype(element))
        axes = tuple(range(source.ndim)) if axis is None else axis
        if kind in ("min", "max") and data.size == 0:
            raise InterpreterError(
                f"zero-size array to reduction operation {kind} which has no identity")
        reducer = _REDUCERS[kind]
        with np.errstate(all="ignore"):
            out = np.asarray(reducer(data, axis=axes, keepdims=keepdims))
        out = out.astype(_numpy_dtype(element))
        if isinstance(result_type, T.ArrayType):
            return [out]
        return [out[()] if out.ndim == 0 else out]

    def op_tensor_assign(self, op: Operation, args: list, env: dict) -> list:
        dest, source = args
        accumulate = op.attrs.get("accumulate")
        try:
            if accumulate is not None:  # dest += source (or -=), element by element
                source = np.asarray(source).astype(dest.dtype)
                dest[...] = dest + source if accumulate == "add" else dest - source
                return []
            dest[...] = np.asarray(source).astype(dest.dtype)
        except ValueError as exc:
            raise InterpreterError(str(exc)) from exc
        return []

    def op_tensor_matmul(self, op: Operation, args: list, env: dict) -> list:
        a, b = (np.asarray(x) for x in args)
        dtype = _numpy_dtype(op.result.type.dtype)
        if a.shape[-1] != b.shape[0]:
            raise InterpreterError(f"matmul: sizes {a.shape[-1]} and {b.shape[0]} differ")
        return [np.matmul(a.astype(dtype), b.astype(dtype))]

    def op_gemm(self, op: Operation, args: list, env: dict) -> list:
        a, b, c = args[:3]
        rows = slice(int(args[3]), int(args[3]) + int(args[4])) if len(args) == 5 else slice(None)
        c[rows] = np.matmul(np.asarray(a)[rows], np.asarray(b)).astype(c.dtype)
        return []

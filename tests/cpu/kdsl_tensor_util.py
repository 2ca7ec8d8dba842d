"""Helpers of the tensor-expression tests (API.md section 7): kernels built from lists of
expressions (one compile for many cases), NumPy evaluating the same text as the reference,
and arrays in several memory layouts.

Every compiled result is compared twice: with NumPy (exact dtype and shape; values exact
or within a tolerance) and with ``kernel.python`` (via ``kdsl_cpu_util.check``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kdsl_cuda_testing as cuda_testing
import numpy as np
from kdsl_cpu_util import assert_same, check, clone, kernel_from_source


class NumpyKd:
    """``kd.*`` spelled with NumPy, to evaluate kernel expressions as the reference."""

    sqrt, exp, log, sin, cos, tan, tanh = np.sqrt, np.exp, np.log, np.sin, np.cos, np.tan, np.tanh
    floor, ceil, abs, pow, atan2, where = np.floor, np.ceil, np.abs, np.power, np.arctan2, np.where
    sum, mean = staticmethod(np.sum), staticmethod(np.mean)
    f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64

    @staticmethod
    def min(a: Any, b: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
        return np.min(a, axis=axis, keepdims=keepdims) if b is None else np.minimum(a, b)

    @staticmethod
    def max(a: Any, b: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
        return np.max(a, axis=axis, keepdims=keepdims) if b is None else np.maximum(a, b)

    @staticmethod
    def clamp(x: Any, lo: Any, hi: Any) -> Any:
        return np.minimum(np.maximum(x, lo), hi)


def numpy_namespace(**arrays: Any) -> dict[str, Any]:
    return {"np": np, "kd": NumpyKd, "min": np.minimum, "max": np.maximum, **arrays}


def numpy_eval(exprs: list[str], **arrays: Any) -> tuple:
    """Evaluates each expression with NumPy (``kd.*`` and ``min``/``max`` as NumPy)."""
    namespace = numpy_namespace(**arrays)
    with np.errstate(all="ignore"):
        values = tuple(eval(e, namespace) for e in exprs)
    return values if len(values) > 1 else values[0]


class ExprKernel:
    """A kernel ``k(params)`` returning the tuple of ``exprs`` (source text; a bare value
    for one expression): one compile tests many expressions."""

    def __init__(self, params: str, exprs: list[str], fastmath: bool = True) -> None:
        self.names = [p.strip() for p in params.split(",")]
        self.exprs = list(exprs)
        decorator = "@kd.kernel" if fastmath else "@kd.kernel(fastmath=False)"
        body = "".join(f"    r{k} = {e}\n" for k, e in enumerate(exprs))
        result = ", ".join(f"r{k}" for k in range(len(exprs)))
        self.kernel = kernel_from_source(
            f"{decorator}\ndef k({params}):\n{body}    return {result}\n", prefix="tensor")

    def numpy(self, *args: Any) -> tuple:
        return numpy_eval(self.exprs, **dict(zip(self.names, args)))

    def check(self, *args: Any, rtol: float = 0.0, atol: float = 0.0) -> tuple:
        """Compiled results equal NumPy's evaluation of each expression (same dtype and
        shape) and kernel.python's, within rtol/atol; the arguments are left as they were."""
        expected = self.numpy(*clone(args))
        python_args = clone(args)
        with np.errstate(all="ignore"):
            python = self.kernel.python(*python_args)
        actual = self.kernel(*args)
        compare_tuples(actual, expected, self.exprs, rtol, atol, "compiled vs NumPy")
        compare_tuples(actual, python, self.exprs, rtol, atol, "compiled vs kernel.python")
        for k, (a, e) in enumerate(zip(args, python_args)):
            assert_same(a, e, what=f"argument {k} after the call")
        return expected


def against_numpy(kernel: Any, args: tuple, reference: Callable[..., Any], rtol: float = 0.0,
                  atol: float = 0.0, python: bool = True) -> Any:
    """Runs ``kernel(*args)`` compiled and compares its result and its arguments afterwards
    with ``reference(*copies of args)`` (NumPy code) and, if ``python``, with
    ``kernel.python`` on copies too. Returns the compiled result."""
    numpy_args = clone(args)
    with np.errstate(all="ignore"):
        expected = reference(*numpy_args)
    if python:
        actual = check(kernel, *args, rtol=rtol, atol=atol)
    else:
        device_args = clone(args) if cuda_testing.enabled() else None
        actual = kernel(*args)
        if device_args is not None:
            cuda_testing.check_on_device(kernel, device_args, expected, clone(numpy_args),
                                         rtol, atol)
    assert_same(actual, expected, rtol, atol, what="compiled vs NumPy")
    for k, (a, e) in enumerate(zip(args, numpy_args)):
        if isinstance(e, np.ndarray):
            assert_same(a, e, rtol, atol, what=f"argument {k} after the call vs NumPy")
    return actual


def compare_tuples(actual: Any, expected: Any, exprs: list[str], rtol: float = 0.0,
                   atol: float = 0.0, what: str = "") -> None:
    """``actual`` and ``expected`` (tuples, or bare values for one expression) agree
    expression by expression; failures name the expression."""
    if len(exprs) == 1:
        actual, expected = (actual,), (expected,)
    assert isinstance(actual, tuple) and len(actual) == len(expected), what
    for a, e, text in zip(actual, expected, exprs):
        assert_same(a, e, rtol, atol, what=f"{what}: {text}")


# --- layouts -----------------------------------------------------------------------------


def in_layout(make: Callable[[tuple], np.ndarray], shape: tuple, layout: str) -> np.ndarray:
    """An array of logical ``shape`` made by ``make(shape)`` and viewed so that its memory
    layout is ``layout``: C-contiguous, reversed along every axis (negative strides), every
    other element of a larger array, or the transpose of an array of the reversed shape."""
    shape = tuple(shape)
    if layout == "C":
        return make(shape)
    if layout == "reversed":
        return make(shape)[(slice(None, None, -1),) * len(shape)]
    if layout == "strided":
        big = make(tuple(2 * s + 1 for s in shape))
        return big[(slice(1, None, 2),) * len(shape)][tuple(slice(0, s) for s in shape)]
    if layout == "transposed":
        return make(shape[::-1]).T
    raise ValueError(layout)

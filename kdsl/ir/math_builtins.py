"""The math functions kernels call, one entry each; every layer reads this table.

An entry names the function (the IR op and ``kd.<name>``), its spellings in NumPy and in
Python's ``math`` module, its reference semantics (what plain-Python mode, the IR
interpreter and constant folding compute), how integer operands are promoted, and its
lowering: an LLVM intrinsic or a C library function on the CPU, whose libdevice
counterpart (``__nv_<name>``, with an ``f`` for float32) the GPU calls; a function with
neither is expanded into IR by the scalar code generator (``ScalarEmitter.op_<name>``).

Adding a math builtin is one entry here, plus an ``op_<name>`` method when it is expanded.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kdsl.records import dataclass


class Result(enum.Enum):
    """The element type of the result."""

    FLOAT = "float"  # integer and bool operands become float64; a float keeps its type
    SAME = "same"  # the operands' type, integer or float
    BOOL = "bool"  # a bool per element


@dataclass(frozen=True)
class MathFunction:
    """One math builtin, elementwise over vectors, matrices and arrays."""

    name: str
    reference: Callable[..., Any]
    arity: int = 1
    result: Result = Result.FLOAT
    numpy_names: tuple[str, ...] | None = None  # np.<name> spellings; None: just ``name``
    in_math_module: bool = True  # math.<name> exists and returns a Python number
    intrinsic: str | None = None  # llvm.<intrinsic>.f32 / .f64 on the CPU
    libm: str | None = None  # the C library's double function; the float one adds "f"
    doc: str = ""

    def cpu_symbol(self, single: bool) -> str | None:
        """The function the CPU code calls (None: an IR expansion)."""
        if self.intrinsic is not None:
            return f"llvm.{self.intrinsic}.{'f32' if single else 'f64'}"
        if self.libm is not None:
            return self.libm + ("f" if single else "")
        return None

    def libdevice_symbol(self, single: bool) -> str | None:
        """The libdevice function the GPU code calls (None: an IR expansion)."""
        base = self.intrinsic or self.libm
        return None if base is None else f"__nv_{base}{'f' if single else ''}"


def _per_element(fn: Callable[..., float]) -> Callable[..., Any]:
    """A reference for a function NumPy lacks: ``fn`` of each element in double precision,
    rounded to the operands' float type (float64 for integers)."""

    def reference(*args: Any) -> Any:
        arrays = np.broadcast_arrays(*[np.asarray(a) for a in args])
        dtype = np.result_type(*args)  # NumPy 2: Python numbers are weak (f32 and 0.5: f32)
        if not np.issubdtype(dtype, np.floating):
            dtype = np.dtype(np.float64)
        flat = [a.astype(np.float64).ravel() for a in arrays]
        out = np.array([fn(*map(float, xs)) for xs in zip(*flat)], dtype=np.float64)
        result = out.reshape(arrays[0].shape).astype(dtype)
        return result[()] if result.ndim == 0 else result

    return reference


def _fma(x: float, y: float, z: float) -> float:
    """x * y + z rounded once (Python 3.13's ``math.fma``, else through exact rationals)."""
    exact = getattr(math, "fma", None)
    if exact is not None:
        return float(exact(x, y, z))
    if not all(math.isfinite(v) for v in (x, y, z)):
        return x * y + z
    from fractions import Fraction

    return float(Fraction(x) * Fraction(y) + Fraction(z))


_FUNCTIONS = (
    MathFunction("sqrt", np.sqrt, intrinsic="sqrt"),
    MathFunction("sin", np.sin, intrinsic="sin"),
    MathFunction("cos", np.cos, intrinsic="cos"),
    MathFunction("tan", np.tan, libm="tan"),
    MathFunction("asin", np.arcsin, numpy_names=("arcsin", "asin"), libm="asin"),
    MathFunction("acos", np.arccos, numpy_names=("arccos", "acos"), libm="acos"),
    MathFunction("atan", np.arctan, numpy_names=("arctan", "atan"), libm="atan"),
    MathFunction("atan2", np.arctan2, arity=2, numpy_names=("arctan2", "atan2"), libm="atan2"),
    MathFunction("sinh", np.sinh, libm="sinh"),
    MathFunction("cosh", np.cosh, libm="cosh"),
    MathFunction("tanh", np.tanh, libm="tanh"),
    MathFunction("exp", np.exp, intrinsic="exp"),
    MathFunction("exp2", np.exp2, libm="exp2"),
    MathFunction("expm1", np.expm1, libm="expm1"),
    MathFunction("log", np.log, intrinsic="log"),
    MathFunction("log2", np.log2, libm="log2"),
    MathFunction("log10", np.log10, libm="log10"),
    MathFunction("log1p", np.log1p, libm="log1p"),
    MathFunction("erf", _per_element(math.erf), numpy_names=(), libm="erf"),
    MathFunction("erfc", _per_element(math.erfc), numpy_names=(), libm="erfc"),
    MathFunction("hypot", np.hypot, arity=2, libm="hypot"),
    MathFunction("copysign", np.copysign, arity=2, intrinsic="copysign"),
    MathFunction("fma", _per_element(_fma), arity=3, numpy_names=(),
                 in_math_module=hasattr(math, "fma"), intrinsic="fma",
                 doc="x * y + z rounded once"),
    MathFunction("rint", np.rint, in_math_module=False, intrinsic="rint",
                 doc="the nearest integer, halves to even (np.rint; Python's round)"),
    MathFunction("sign", np.sign, result=Result.SAME, in_math_module=False,
                 doc="-1, 0 or 1 with the operand's type (NaN for NaN)"),
    MathFunction("isnan", np.isnan, result=Result.BOOL),
    MathFunction("isinf", np.isinf, result=Result.BOOL),
    MathFunction("isfinite", np.isfinite, result=Result.BOOL),
)

MATH_FUNCTIONS: dict[str, MathFunction] = {f.name: f for f in _FUNCTIONS}


def numpy_functions(fn: MathFunction) -> list[Any]:
    """The NumPy objects that spell ``fn`` (``np.arcsin`` and ``np.asin``)."""
    names = (fn.name,) if fn.numpy_names is None else fn.numpy_names
    return [getattr(np, n) for n in names if hasattr(np, n)]


def math_module_function(fn: MathFunction) -> Any:
    """``math.<name>``, or None where Python's math module has no such function."""
    return getattr(math, fn.name, None) if fn.in_math_module else None

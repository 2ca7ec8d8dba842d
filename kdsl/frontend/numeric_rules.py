"""Where NumPy 2's rules for Python scalars need more than promotion: literals that do
not fit the integer type they meet, exact comparisons of integers of mixed signedness,
NaN in ``np.minimum``/``np.maximum`` and ``np.fmin``/``np.fmax``, and integer powers with
a negative exponent."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import numpy as np

from kdsl import types as T
from kdsl.errors import LiteralOverflowError
from kdsl.ir.core import Value

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering


def check_literals_fit(lo: FunctionLowering, scalar: T.ScalarType, operands: tuple[Value, ...],
                       node: ast.AST) -> None:
    """``x[0] + 300`` with ``x`` uint8: NumPy 2 raises OverflowError for a Python int that
    the strong integer type cannot hold (rather than wrapping it)."""
    if not scalar.is_integer:
        return
    info = np.iinfo(scalar.numpy_dtype)
    for v in operands:
        literal = lo._defining_constant(v)
        if lo.is_weak(v) and type(literal) is int and not info.min <= literal <= info.max:
            loc = lo.source.location(node)
            raise LiteralOverflowError(f"Python integer {literal} out of bounds for {scalar.numpy_dtype} "
                                       "(as in NumPy 2)", loc)


def comparison_type(lo: FunctionLowering, a: Value, b: Value, promoted: T.ScalarType) -> T.ScalarType:
    """The type two scalars compare in: a weak (Python) int against a strong integer type
    compares exactly, in i64 (``np.uint8(5) > -1`` is True in NumPy 2)."""
    if not promoted.is_integer or _scalar_of(a).is_float or _scalar_of(b).is_float:
        return promoted
    weak = [v for v in (a, b) if lo.is_weak(v)]
    if not weak:
        return promoted
    info = np.iinfo(promoted.numpy_dtype)
    literals = [lo._defining_constant(v) for v in weak]
    if all(type(c) is int and info.min <= c <= info.max for c in literals):
        return promoted  # img[i] > 128 on uint8 stays a uint8 comparison
    return T.i64


_RESULT_BELOW = {"lt": True, "le": True, "ne": True, "gt": False, "ge": False, "eq": False}


def comparison_beyond_int64(lo: FunctionLowering, name: str, a: Value, b: Value) -> Value | None:
    """``x < 0xff51afd7ed558ccd`` with ``x`` an integer narrower than u64, signed or not, or
    a bool: a Python int above i64's range exceeds every such value, so the comparison's result is known (NumPy 2
    compares exactly); None where the comparison must be computed."""
    literals = [lo._defining_constant(v) if lo.is_weak(v) else None for v in (a, b)]
    big = [type(c) is int and c >= 2**63 for c in literals]
    if big[0] == big[1]:
        return None
    other = b if big[0] else a
    if not isinstance(other.type, T.ScalarType) or other.type.is_float or other.type == T.u64:
        return None  # a float or a u64 compares in its own type
    # other OP literal: other < literal; literal OP other: the same with the sides swapped
    holds = _RESULT_BELOW[name] if big[1] or name in ("eq", "ne") else not _RESULT_BELOW[name]
    return lo.builder.constant(holds, T.bool_)


def _scalar_of(v: Value) -> T.ScalarType:
    return T.element_scalar(v.type.dtype if isinstance(v.type, T.ArrayType) else v.type)


def nan_aware(lo: FunctionLowering, result: Value, a: Value, b: Value, ignore_nan: bool,
              node: ast.AST) -> Value:
    """``np.minimum``/``np.maximum`` (and ``kd.min``/``kd.max``) from ``result``, Python's
    ``min``/``max`` of ``a`` and ``b`` (which gives ``a`` when either is NaN): NaN in either
    argument gives NaN. With ``ignore_nan`` (``np.fmin``/``np.fmax``) a NaN argument is
    ignored unless both are."""
    if isinstance(result.type, T.ArrayType) or not T.element_scalar(result.type).is_float:
        return result
    # where Python's choice (a) is wrong, the answer is b: when b is NaN, or (ignoring
    # NaN) when a is
    tested = lo.coerce(a if ignore_nan else b, result.type, node)
    answer = lo.coerce(b, result.type, node)
    if isinstance(result.type, T.ScalarType):
        return lo.op("select", lo.op("ne", tested, tested), answer, result)
    parts = []
    for k in range(result.type.count):
        x, y, r = (lo.op("extract", v, index=k) for v in (tested, answer, result))
        parts.append(lo.op("select", lo.op("ne", x, x), y, r))
    return lo.op("make_vector", *parts, type=result.type)


def array_min_max(lo: FunctionLowering, kind: str, a: Value, b: Value, ignore_nan: bool,
                  node: ast.AST) -> Value:
    """``np.minimum(a, b)`` and friends of arrays: a tensor_map whose function keeps
    NumPy's NaN rule (lowered to min or max and a select)."""
    common = lo._common_element([a, b], node)  # type: ignore[attr-defined]
    fn = ("f" + kind) if ignore_nan else {"min": "minimum", "max": "maximum"}[kind]
    return lo.tensor_map(fn, [a, b], common, common, node)  # type: ignore[attr-defined]


def check_integer_power(lo: FunctionLowering, exponent: Value) -> None:
    """``n ** e`` of integers with ``e`` negative at run time raises NumPy's ValueError
    (a result of the integer type cannot be 0.5)."""
    if not isinstance(exponent.type, T.ScalarType) or not exponent.type.is_signed:
        return
    ok = lo.op("ge", exponent, lo.builder.constant(0, exponent.type))
    lo.builder.create("raise_value_error", [ok, lo.builder.cast(exponent, T.i64)],
                      {"what": "Integers to negative integer powers are not allowed"})


def python_min_max(lo: FunctionLowering, kind: str, a: Value, b: Value,
                   node: ast.AST) -> Value | None:
    """Python's ``min(a, b)``/``max(a, b)`` of a Python number passed as an argument (an
    unannotated parameter, weak as in NumPy 2) and a scalar of another type:
    the arguments compare as Python compares them (NumPy 2: ``0.1 < np.float32(x)`` in
    float32), and the one picked is returned unchanged, in the type that holds both
    exactly (``max(x, a[0])`` with ``x`` a Python float and ``a`` float32 is a float64,
    so ``max(x, a[0]) >= x`` always). None where ordinary promotion gives that already."""
    if not (isinstance(a.type, T.ScalarType) and isinstance(b.type, T.ScalarType)):
        return None
    if a.type == b.type or lo.is_weak(a) == lo.is_weak(b):
        return None
    weak, strong = (a, b) if lo.is_weak(a) else (b, a)
    if weak not in lo.body.args:
        # a literal, or a local that starts as one, is weak: max(x[i], 1e-6) and
        # m = max(m, x[i]) after m = 0.0 stay float32, as in arithmetic
        return None
    union, _ = T.promote(strong.type, False, weak.type, False)
    if union == strong.type:
        return None
    # min: b if b < a else a; max: b if b > a else a (the first wins ties and NaN)
    picks_b = lo.compare("lt" if kind == "min" else "gt", b, a, node)
    return lo.strong(lo.op("select", picks_b, lo.coerce(b, union, node), lo.coerce(a, union, node)))

"""Calls on small matrices and vectors: ``kd.trace``, ``kd.determinant``, ``kd.inverse``,
and method calls such as ``v.norm()`` or ``m.trace()`` (aliases of kd builtins)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from kdsl import builtins as kb
from kdsl import small_matrices
from kdsl import types as T
from kdsl.frontend.calls import BUILTINS, _arity, _values, builtin
from kdsl.frontend.values import VectorMethod
from kdsl.ir.core import Value
from kdsl.records import dataclass

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering


@dataclass(frozen=True)
class _Scalar:
    """An IR scalar with Python operators, so the formulas of kdsl.small_matrices build ops."""

    lo: Any
    value: Value

    def _op(self, name: str, other: _Scalar) -> _Scalar:
        return _Scalar(self.lo, self.lo.op(name, self.value, other.value))

    def __add__(self, other: _Scalar) -> _Scalar:
        return self._op("add", other)

    def __sub__(self, other: _Scalar) -> _Scalar:
        return self._op("sub", other)

    def __mul__(self, other: _Scalar) -> _Scalar:
        return self._op("mul", other)

    def __truediv__(self, other: _Scalar) -> _Scalar:
        return self._op("div", other)

    def __neg__(self) -> _Scalar:
        return _Scalar(self.lo, self.lo.op("neg", self.value))


def _square_rows(lo: FunctionLowering, node: ast.Call, args: list, name: str,
                 floats: bool = True) -> tuple[list[list[_Scalar]], T.MatrixType]:
    _arity(lo, node, args, 1, name)
    (m,) = _values(lo, node, args)
    if not isinstance(m.type, T.MatrixType) or m.type.rows != m.type.cols or m.type.rows > 4:
        lo.error(f"{name}() needs a square matrix (at most 4x4), got {m.type}", node)
    if floats and not m.type.element.is_float:
        m = lo.coerce(m, T.with_element_scalar(m.type, T.f64), node)
    t = m.type
    assert isinstance(t, T.MatrixType)
    rows = [[_Scalar(lo, lo.op("extract", m, index=i * t.cols + j)) for j in range(t.cols)]
            for i in range(t.rows)]
    return rows, t


@builtin(kb.trace)
def _trace(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    rows, _ = _square_rows(lo, node, args, "trace", floats=False)
    return small_matrices.trace(rows).value


@builtin(kb.determinant)
def _determinant(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    rows, _ = _square_rows(lo, node, args, "determinant")
    return small_matrices.determinant(rows).value


@builtin(kb.inverse)
def _inverse(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    rows, t = _square_rows(lo, node, args, "inverse")
    entries = [e.value for row in small_matrices.inverse(rows) for e in row]
    return lo.op("make_vector", *entries, type=t, node=node)


def _norm_sqr(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 1, "norm_sqr")
    return BUILTINS[kb.dot](lo, node, [args[0], args[0]])


def _with_epsilon(lo: FunctionLowering, node: ast.Call, method: VectorMethod,
                  args: list) -> Value:
    """Taichi's ``v.norm(eps)`` (``sqrt(v.dot(v) + eps)``) and ``v.normalized(eps)``
    (``v * (1 / (v.norm() + eps))``)."""
    if len(args) + len(node.keywords) != 1 or any(k.arg != "eps" for k in node.keywords):
        lo.error(f"{method.attr}() takes one argument, eps", node)
    eps = lo.value_of(args[0] if args else lo.expr(node.keywords[0].value), node)
    v = method.receiver
    if method.attr == "norm":
        squared = BUILTINS[kb.dot](lo, node, [v, v])
        return BUILTINS[kb.MATH["sqrt"]](lo, node, [lo.binary("add", squared, eps, node)])
    length = BUILTINS[kb.length](lo, node, [v])
    inverse = lo.binary("div", lo.constant(1.0), lo.binary("add", length, eps, node), node)
    return lo.binary("mul", inverse, v, node)


def call_method(lo: FunctionLowering, node: ast.Call, method: VectorMethod, args: list) -> Any:
    """``v.norm()`` is ``kd.length(v)``: the receiver becomes the first argument."""
    if method.attr in ("norm", "normalized") and (args or node.keywords):
        return _with_epsilon(lo, node, method, args)
    if node.keywords:
        lo.error("keyword arguments are not supported in kernel calls", node)
    handler = _norm_sqr if method.builtin == "norm_sqr" else BUILTINS[getattr(kb, method.builtin)]
    return handler(lo, node, [method.receiver, *args])


def python_cast_message(t: Any, python_type: str) -> str:
    """Why ``int(v)`` of a vector is refused, and what to write instead."""
    if isinstance(t, T.VectorType) and python_type in ("int", "float"):
        name = f"kd.ivec{t.size}(v)" if python_type == "int" else f"kd.vec{t.size}(v)"
        return (f"{python_type}() of a {t} is not elementwise in Python; convert it "
                f"elementwise with {name}")
    return f"cannot convert {t} to a Python {python_type}"

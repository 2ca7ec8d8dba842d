"""Calls of the small-vector builtins: ``kd.dot`` (also of arrays), ``kd.cross``,
``kd.length``, ``kd.normalize``, ``kd.outer``, ``kd.transpose`` and their NumPy names."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import numpy as np

from kdsl import builtins as kb
from kdsl import types as T
from kdsl.frontend.calls import _arity, _values, builtin
from kdsl.frontend.tensors import is_array
from kdsl.ir.core import Value

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering


@builtin(kb.dot, np.dot)
def _dot(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 2, "dot")
    first, second = _values(lo, node, args)
    if is_array(first) or is_array(second):
        return lo.tensor_dot(first, second, node)
    a, b = _same_vectors(lo, node, args, "dot")
    return lo.op("dot", a, b, node=node)


def _same_vectors(lo: FunctionLowering, node: ast.Call, args: list, name: str) -> list[Value]:
    a, b = _values(lo, node, args)
    if not isinstance(a.type, T.VectorType) or not isinstance(b.type, T.VectorType):
        lo.error(f"{name}() needs two vectors, got {a.type} and {b.type}", node)
    if a.type.size != b.type.size:
        lo.error(f"{name}() of vectors of different sizes: {a.type} and {b.type}", node)
    scalar, _ = T.promote_shaped(a.type.element, False, b.type.element, False)
    t = T.vector_type(scalar, a.type.size)
    return [lo.coerce(a, t, node), lo.coerce(b, t, node)]


@builtin(kb.cross, np.cross)
def _cross(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 2, "cross")
    a, b = _same_vectors(lo, node, args, "cross")
    return lo.op("cross", a, b, node=node)


def _one_vector(lo: FunctionLowering, node: ast.Call, args: list, name: str) -> Value:
    """The one argument of ``name``, which must be a vector."""
    _arity(lo, node, args, 1, name)
    (v,) = _values(lo, node, args)
    if not isinstance(v.type, T.VectorType):
        lo.error(f"{name}() needs a vector, got {v.type}", node)
    return v


@builtin(kb.length)
def _length(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    v = _one_vector(lo, node, args, "length")
    return lo.op("sqrt", lo.op("dot", v, v), node=node)


@builtin(kb.normalize)
def _normalize(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    v = _one_vector(lo, node, args, "normalize")
    norm = lo.op("sqrt", lo.op("dot", v, v))
    return lo.op("div", v, lo.coerce(norm, v.type, node), node=node)


@builtin(kb.outer, np.outer)
def _outer(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 2, "outer")
    a, b = _values(lo, node, args)
    return lo.op("outer", a, b, node=node)


@builtin(kb.transpose, np.transpose)
def _transpose(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 1, "transpose")
    (m,) = _values(lo, node, args)
    if isinstance(m.type, T.ArrayType):  # np.transpose(a) of an array is the view a.T
        return m if m.type.ndim == 1 else lo.array_transpose(m, node)
    return lo.op("transpose", m, node=node)

"""Vectors and matrices are values in kernels (``w = v`` copies, as in Taichi and Warp),
but NumPy arrays in the plain-Python form, where ``w = v; w.x = 5.0`` or ``v -= n`` on a
func's parameter would change the caller's vector too. So the plain-Python form updates a
local name's vector or matrix by rebinding the name to an updated copy:

- ``w += e`` becomes ``w = _kd_update_value(w, iadd, e)``;
- ``w.x = e``, ``w[k] = e`` become ``w = _kd_set_in_value(w, key, e)``;
- ``w.x += e``, ``w[k] += e`` become ``w = _kd_update_in_value(w, key, iadd, e)``.

A local keeps one type in a kernel (the join of its assignments), so ``value = 0`` after
``value = kd.i64(...)`` stores an int64 zero there, where Python would rebind the name to a
Python int (and ``value * 10 + c`` with ``c`` uint8 would then wrap in uint8): a number
literal assigned to a local that holds a NumPy scalar of a kind that can take it becomes
that type, ``value = _kd_literal_like(locals().get("value"), 0)``.

Anything else (an array, a number) is updated as Python would (in place where Python
updates in place) and keeps its name. Only names local to the function are rewritten.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import numpy as np

from kdsl.builtins import Matrix, Vector, spread_vector_index

HELPERS = ("_kd_update_value", "_kd_set_in_value", "_kd_update_in_value", "_kd_literal_like")


def _is_value(x: Any) -> bool:
    return isinstance(x, (Vector, Matrix))


def _set(target: Any, key: tuple[Any, bool], value: Any) -> None:
    name, is_attribute = key
    if is_attribute:
        setattr(target, name, value)
    else:
        target[spread_vector_index(name)] = value


def _get(target: Any, key: tuple[Any, bool]) -> Any:
    name, is_attribute = key
    return getattr(target, name) if is_attribute else target[spread_vector_index(name)]


def update_value(target: Any, in_place: Callable[[Any, Any], Any], value: Any) -> Any:
    """``target op= value``; a vector or matrix is copied first."""
    return in_place(target.copy() if _is_value(target) else target, value)


def set_in_value(target: Any, key: tuple[Any, bool], value: Any) -> Any:
    """``target.x = value`` or ``target[k] = value``; a vector or matrix is copied first."""
    updated = target.copy() if _is_value(target) else target
    _set(updated, key, value)
    return updated


def update_in_value(target: Any, key: tuple[Any, bool], in_place: Callable[[Any, Any], Any],
                    value: Any) -> Any:
    """``target.x op= value`` or ``target[k] op= value``, as ``set_in_value`` does."""
    updated = target.copy() if _is_value(target) else target
    _set(updated, key, in_place(_get(updated, key), value))
    return updated


def literal_like(previous: Any, literal: Any) -> Any:
    """``literal`` as the type of the NumPy scalar a local held before, where compiled code
    gives the local that type (an int into an integer or float, a float into a float)."""
    if not isinstance(previous, np.generic) or type(literal) is bool:
        return literal
    kind = previous.dtype.kind
    if kind == "f" or kind in "iu" and type(literal) is int:
        return previous.dtype.type(literal)  # an int the type cannot hold: OverflowError
    return literal


def _number_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def local_names(tree: ast.FunctionDef) -> set[str]:
    """The parameters and the names the function binds (its locals, as Python sees them)."""
    names = {a.arg for a in tree.args.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


class ValueSemantics(ast.NodeTransformer):
    """The rewrite described above; ``operator_names`` names each in-place operator's
    helper (``_kd_op_iadd`` for ``+=``)."""

    def __init__(self, locals_: set[str], operator_names: dict[type, str]) -> None:
        self.locals = locals_
        self.operator_names = operator_names

    def _local_base(self, target: ast.expr) -> tuple[str, ast.expr] | None:
        """``w.x`` or ``w[k]`` (k no slice) with ``w`` a local: (w, key tuple)."""
        if isinstance(target, ast.Attribute):
            key: ast.expr = ast.Constant(target.attr)
            is_attribute = True
        elif isinstance(target, ast.Subscript) and not any(
                isinstance(n, (ast.Slice, ast.Starred)) for n in ast.walk(target.slice)):
            key, is_attribute = target.slice, False
        else:
            return None
        base = target.value
        if not (isinstance(base, ast.Name) and base.id in self.locals):
            return None
        return base.id, ast.Tuple([key, ast.Constant(is_attribute)], ast.Load())

    def _rebind(self, name: str, call: ast.Call, node: ast.AST) -> ast.Assign:
        assign = ast.Assign([ast.Name(name, ast.Store())], call)
        return ast.copy_location(assign, node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        self.generic_visit(node)
        if len(node.targets) != 1:
            return node
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in self.locals and _number_literal(
                node.value):
            previous = ast.Call(ast.Attribute(_call("locals"), "get", ast.Load()),
                                [ast.Constant(target.id)], [])
            return self._rebind(target.id, _call("_kd_literal_like", previous, node.value), node)
        found = self._local_base(target)
        if found is None:
            return node
        name, key = found
        call = _call("_kd_set_in_value", ast.Name(name, ast.Load()), key, node.value)
        return self._rebind(name, call, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        op = ast.Name(self.operator_names[type(node.op)], ast.Load())
        target = node.target
        if isinstance(target, ast.Name):
            call = _call("_kd_update_value", ast.Name(target.id, ast.Load()), op, node.value)
            return self._rebind(target.id, call, node)
        found = self._local_base(target)
        if found is None:
            return node
        name, key = found
        call = _call("_kd_update_in_value", ast.Name(name, ast.Load()), key, op, node.value)
        return self._rebind(name, call, node)


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])

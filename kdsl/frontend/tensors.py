"""Whole-array (tensor) expressions in kernels: NumPy-style elementwise arithmetic with
broadcasting, views (slices, new axes, transposes), reductions, ``@``, and assignment
into arrays and slices. They become tensor ops of the IR, which passes/lower_tensors.py
turns into fused loop nests."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.frontend import numeric_rules
from kdsl.frontend.lowering import LoweringBase
from kdsl.frontend.values import Static
from kdsl.ir.core import Value
from kdsl.ir.reductions import BOOL_ARITHMETIC

_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_INTEGER_ONLY = ("bit_and", "bit_or", "bit_xor", "shl", "shr")


def is_array(v: Any) -> bool:
    return isinstance(v, Value) and isinstance(v.type, T.ArrayType)


class TensorLowering(LoweringBase):
    """Array-valued expressions and statements."""

    def value(self, node: ast.expr) -> Value:  # provided by ExpressionLowering
        raise NotImplementedError

    def expr(self, node: ast.expr) -> Any:  # provided by ExpressionLowering
        raise NotImplementedError

    # --- elementwise ------------------------------------------------------------------

    def _element(self, v: Value) -> tuple[Any, bool]:
        """The element type of an operand (an array's dtype or a scalar's type), and whether
        it is a weak Python scalar."""
        if isinstance(v.type, T.ArrayType):
            return v.type.dtype, False
        return v.type, self.is_weak(v)

    def _common_element(self, values: list[Value], node: ast.AST) -> Any:
        elements = [self._element(v) for v in values]
        shaped = [e for e, _ in elements if not isinstance(e, T.ScalarType)]
        if shaped and any(s.shape != shaped[0].shape for s in shaped):
            self.error(f"element shapes differ: {', '.join(str(s) for s in shaped)}", node)
        scalar, weak = T.element_scalar(elements[0][0]), elements[0][1]
        for e, w in elements[1:]:
            scalar, weak = T.promote(scalar, weak, T.element_scalar(e), w)
        return T.with_element_scalar(shaped[0], scalar) if shaped else scalar

    def _ndim(self, values: list[Value]) -> int:
        return max((v.type.ndim for v in values if is_array(v)), default=0)

    def tensor_map(self, fn: str, operands: list[Value], operand_type: Any, result_element: Any,
                   node: ast.AST) -> Value:
        ndim = self._ndim(operands)
        result = T.ArrayType(result_element, ndim, True)
        return self.op("tensor_map", *operands, fn=fn, type=result, operand_type=operand_type,
                       node=node)

    def tensor_binary(self, name: str, a: Value, b: Value, node: ast.AST) -> Value:
        if name == "matmul":
            return self.tensor_matmul(a, b, node)
        common = self._common_element([a, b], node)
        scalar = T.element_scalar(common)
        if name in _INTEGER_ONLY and scalar.is_float:
            self.error(f"bitwise operations need integer arrays, got {scalar}", node)
        if name in _COMPARISONS:
            if not isinstance(common, T.ScalarType):
                self.error("comparisons of arrays need scalar elements", node)
            common = numeric_rules.comparison_type(self, a, b, common)  # type: ignore[arg-type]
            return self.tensor_map(name, [a, b], common, T.bool_, node)
        numeric_rules.check_literals_fit(self, scalar, (a, b), node)  # type: ignore[arg-type]
        if name == "div" and not scalar.is_float:
            common = T.with_element_scalar(common, T.f64)
        if name in ("add", "mul") and scalar.is_bool:
            name = BOOL_ARITHMETIC[name]
        return self.tensor_map(name, [a, b], common, common, node)

    def tensor_unary(self, fn: str, v: Value, node: ast.AST) -> Value:
        element = v.type.dtype
        if fn == "logical_not":
            element = T.bool_
        return self.tensor_map(fn, [v], element, element, node)

    def tensor_where(self, cond: Value, a: Value, b: Value, node: ast.AST) -> Value:
        common = self._common_element([a, b], node)
        return self.tensor_map("select", [cond, a, b], common, common, node)

    # --- views ----------------------------------------------------------------------------

    def array_view(self, array: Value, index_node: ast.expr, node: ast.AST) -> Value:
        """``a[1:-1, ::2]``, ``a[:, 0]``, ``a[:, None]``, ``a[i]`` of a 2-D array: a view."""
        t: T.ArrayType = array.type
        items = self.index_items(t, index_node)
        spec: list[tuple] = []
        operands: list[Value] = []
        axes_used = 0
        ndim = 0
        for item in items:
            if isinstance(item, ast.Constant) and item.value is None:
                spec.append(("newaxis",))
                ndim += 1
                continue
            axes_used += 1
            if isinstance(item, ast.Slice):
                parts = []
                for part in (item.lower, item.upper, item.step):
                    if part is None:
                        parts.append(False)
                        continue
                    value = self.value(part)
                    if not isinstance(value.type, T.ScalarType) or value.type.is_float:
                        self.error(f"slice bounds must be integers, got {value.type}", part)
                    operands.append(self.builder.cast(value, T.i64))
                    parts.append(True)
                spec.append(("slice", *parts))
                ndim += 1
            else:
                value = self.value(item)
                if not isinstance(value.type, T.ScalarType) or value.type.is_float:
                    if is_array(value) and value.type.dtype == T.bool_:
                        self.error("reading a[mask] (a compressed copy) is not supported; "
                                   "assign through the mask (a[mask] = v) or use kd.where", item)
                    self.error(f"array indices must be integers, got {value.type}", item)
                operands.append(self.builder.cast(value, T.i64))
                spec.append(("index",))
        if axes_used > t.ndim:
            self.error(f"too many indices: this array has {t.ndim} axes", node)
        ndim += t.ndim - axes_used
        if ndim == 0:
            self.error("this index selects a single element; index every axis with integers", node)
        result = T.ArrayType(t.dtype, ndim, False)
        return self.op("array_view", array, *operands, spec=tuple(spec), type=result, node=node)

    def index_items(self, t: T.ArrayType, index_node: ast.expr) -> list[ast.expr]:
        """The items of an index with NumPy's spellings made plain: ``np.newaxis`` is
        ``None``, and ``...`` the full slices of the axes the other items leave."""
        items = list(index_node.elts) if isinstance(index_node, ast.Tuple) else [index_node]
        items = [ast.copy_location(ast.Constant(None), i) if self.is_new_axis(i) else i
                 for i in items]
        ellipses = [k for k, i in enumerate(items) if _is_ellipsis(i)]
        if len(ellipses) > 1:
            self.error("an index can only have a single ellipsis ('...')", items[ellipses[1]])
        if ellipses:
            k = ellipses[0]
            used = sum(1 for i in items if not _is_ellipsis(i) and not (
                isinstance(i, ast.Constant) and i.value is None))
            full = [ast.copy_location(ast.Slice(), items[k]) for _ in range(t.ndim - used)]
            items[k:k + 1] = full
        return items

    def is_new_axis(self, item: ast.expr) -> bool:
        """``None`` or a name for it (``np.newaxis``) in an index."""
        if isinstance(item, ast.Constant):
            return item.value is None
        if isinstance(item, (ast.Name, ast.Attribute)):
            value = self.expr(item)
            return isinstance(value, Static) and value.obj is None
        return False

    def array_transpose(self, array: Value, node: ast.AST) -> Value:
        t: T.ArrayType = array.type
        return self.op("array_transpose", array, type=T.ArrayType(t.dtype, t.ndim, t.ndim == 1 and t.contiguous),
                       node=node)

    # --- reductions and products --------------------------------------------------

    def tensor_reduce(self, kind: str, v: Value, axis: Any, keepdims: bool, node: ast.AST) -> Value:
        t: T.ArrayType = v.type
        scalar = T.element_scalar(t.dtype)
        if kind == "sum" and (scalar.is_bool or scalar.is_integer):
            scalar = T.u64 if not scalar.is_signed and not scalar.is_bool else T.i64
        if kind == "mean" and not scalar.is_float:
            scalar = T.f64
        element = T.with_element_scalar(t.dtype, scalar)
        if axis is None:
            result: Any = element if not keepdims else T.ArrayType(element, t.ndim, True)
        else:
            if not -t.ndim <= axis < t.ndim:
                self.error(f"axis {axis} is out of range for an array of {t.ndim} axes", node)
            axis %= t.ndim
            kept = t.ndim if keepdims else t.ndim - 1
            result = element if kept == 0 else T.ArrayType(element, kept, True)
        return self.op("tensor_reduce", v, kind=kind, axis=axis, keepdims=keepdims, type=result,
                       node=node)

    def tensor_dot(self, a: Value, b: Value, node: ast.AST) -> Value:
        """``np.dot(a, b)``: a product with a scalar, else as ``a @ b``."""
        if not (is_array(a) and is_array(b)):
            return self.tensor_binary("mul", a, b, node)
        return self.tensor_matmul(a, b, node)

    def tensor_matmul(self, a: Value, b: Value, node: ast.AST) -> Value:
        if not (is_array(a) and is_array(b)):
            self.error("@ of an array needs arrays on both sides", node)
        if a.type.ndim not in (1, 2) or b.type.ndim not in (1, 2):
            self.error(f"@ supports 1-D and 2-D arrays, got {a.type.ndim}-D @ {b.type.ndim}-D",
                       node)
        if not isinstance(a.type.dtype, T.ScalarType) or not isinstance(b.type.dtype, T.ScalarType):
            self.error("@ of arrays needs scalar elements", node)
        scalar, _ = T.promote(a.type.dtype, False, b.type.dtype, False)
        if a.type.ndim == 1 and b.type.ndim == 1:  # the inner product, a scalar
            sizes = [self.builder.value("array_dim", v, axis=0) for v in (a, b)]
            self.builder.create("raise_shape_error", [self.op("eq", *sizes), *sizes],
                                {"axis": 0, "what": "dot of 1-D arrays: the sizes"})
            total = self.tensor_reduce("sum", self.tensor_binary("mul", a, b, node), None, False,
                                       node)
            return self.builder.cast(total, scalar)
        if a.type.ndim == 1:  # v @ m == m.T @ v
            return self.tensor_matmul(self.array_transpose(b, node), a, node)
        result = T.ArrayType(scalar, b.type.ndim, True)
        return self.op("tensor_matmul", a, b, type=result, node=node)

    # --- statements -------------------------------------------------------------------

    def tensor_assign(self, dest: Value, value: Any, node: ast.AST) -> None:
        v = self.value_of(value, node)
        if not is_array(v):
            if not isinstance(v.type, (T.ScalarType, T.VectorType, T.MatrixType)):
                self.error(f"cannot assign a value of type {v.type} into an array", node)
        elif v.type.ndim > dest.type.ndim:
            self.error(f"cannot assign an array of {v.type.ndim} axes into one of "
                       f"{dest.type.ndim}", node)
        self.builder.create("tensor_assign", [dest, v])


def reduction_arguments(lo: Any, node: ast.Call, names: tuple[str, ...]) -> dict[str, Any]:
    """The static ``axis`` and ``keepdims`` of a reduction call."""
    values: dict[str, Any] = {"axis": None, "keepdims": False}
    positional = node.args[1:]
    for name, arg in zip(names, positional):
        values[name] = arg
    for keyword in node.keywords:
        if keyword.arg is None or keyword.arg not in names:
            lo.error(f"unsupported keyword argument '{keyword.arg}'", node)
        values[str(keyword.arg)] = keyword.value
    out: dict[str, Any] = {}
    for name in ("axis", "keepdims"):
        given = values[name]
        if isinstance(given, ast.AST):
            static = lo.expr(given)
            if isinstance(static, Static):
                given = static.obj
            elif isinstance(static, Value) and static in lo.builder.known_constants:
                given = lo.builder.known_constants[static]
            elif name == "axis" and isinstance(given, ast.Tuple):
                lo.error("axis must be one integer or None; reduce over several axes one "
                         "at a time (or all with axis=None)", given)
            else:
                lo.error(f"'{name}' must be a constant", given)
        if name == "axis" and given is not None and not isinstance(given, (int, np.integer)):
            lo.error("axis must be an integer or None", node)
        if name == "axis":
            out[name] = None if given is None else int(given)
        else:
            out[name] = bool(given)
    return out


def _is_ellipsis(item: ast.expr) -> bool:
    return isinstance(item, ast.Constant) and item.value is Ellipsis

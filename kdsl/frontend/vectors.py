"""Small vectors and matrices in kernels, beyond the ops themselves: the element type of
mixed float/integer arithmetic (``vec2 - ivec2`` is a vec2) and where a float64 came from
when one causes an error later, list literals as values (``a[i] = [0, 0]``), and the
methods users of Taichi reach for (``v.norm()``, ``m.trace()``, ...)."""

from __future__ import annotations

import ast
from typing import Any

from kdsl import types as T
from kdsl.builtins import swizzle_indices
from kdsl.frontend.lowering import LoweringBase
from kdsl.frontend.values import TupleValue, VectorMethod
from kdsl.ir.core import Value
from kdsl.ir.location import SourceLocation
from kdsl.ir.ops import OpTypeError

SHAPED = (T.VectorType, T.MatrixType)
COMPONENT_NAMES = {"x": 0, "y": 1, "z": 2, "w": 3}

# method name -> the kd builtin it is an alias of (the receiver is its first argument)
VECTOR_METHODS = {
    "norm": "length", "norm_sqr": "norm_sqr", "dot": "dot", "cross": "cross",
    "normalized": "normalize", "outer_product": "outer",
}
MATRIX_METHODS = {
    "trace": "trace", "transpose": "transpose", "determinant": "determinant",
    "inverse": "inverse",
}


class VectorLowering(LoweringBase):
    """Element types of vector arithmetic, and the origin of float64 promotions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.promotion_origins: dict[Value, tuple[SourceLocation, str]] = {}
        self.pending_index: tuple[ast.expr, list[Any]] | None = None
        # locals assigned a promoted value: a loop or branch joining them makes new values
        self.variable_origins: dict[str, tuple[SourceLocation, str]] = {}

    # provided by ExpressionLowering
    def index_values(self, node: ast.expr) -> list[Any]:
        raise NotImplementedError

    def value(self, node: ast.expr) -> Value:
        raise NotImplementedError

    def selects_view(self, t: T.ArrayType, index: ast.expr) -> bool:
        raise NotImplementedError

    def array_indices(self, array: Value, index_node: ast.expr, node: ast.AST) -> list[Value]:
        raise NotImplementedError

    def component_index(self, t: Any, index_node: ast.expr, node: ast.AST) -> int | Value:
        raise NotImplementedError

    def op(self, name: str, *operands: Value, node: ast.AST | None = None, **attrs: Any) -> Value:
        try:
            result = self.builder.value(name, *operands, **attrs)
        except OpTypeError as exc:
            self.error(str(exc) + self.promotion_note(operands), node)
        if self.promotion_origins and _has_f64_elements(result.type):
            for v in operands:
                origin = self.promotion_origins.get(v)
                if origin is not None:
                    self.promotion_origins[result] = origin
                    break
        return result

    # --- where a float64 came from --------------------------------------------------------

    def note_promotion(self, result: Value, operands: tuple[Value, ...], node: ast.AST) -> None:
        """Records ``result`` as a float64 vector made by promoting narrower operands, so
        that an error about it later can name this line."""
        if not isinstance(result.type, SHAPED) or result.type.element != T.f64:
            return
        if result in self.promotion_origins:
            return
        narrower = [v for v in operands if isinstance(v.type, SHAPED) and v.type.element != T.f64]
        if narrower:
            what = " and ".join(str(v.type) for v in operands)
            self.promotion_origins[result] = (self.source.location(node), what)

    def assign(self, name: str, x: Any, node: ast.AST) -> None:
        if isinstance(x, Value) and x in self.promotion_origins:
            self.variable_origins[name] = self.promotion_origins[x]
        super().assign(name, x, node)

    def promotion_note(self, operands: tuple[Value, ...] | list[Value]) -> str:
        for v in operands:
            origin = self.promotion_origins.get(v)
            if origin is None and _has_f64_elements(v.type) and isinstance(v.type, SHAPED):
                origin = self.variable_origins.get(v.name_hint)
            if origin is not None:
                location, what = origin
                text = location.source_line().strip()
                return (f" (the float64 comes from {what} at line {location.line}: `{text}`; "
                        "convert with kd.vec2(...) & co. or use float32 values there)")
        return ""

    # --- arrays indexed by integer vectors ----------------------------------------------

    def indexes_every_axis(self, t: T.ArrayType, index: ast.expr) -> bool:
        """Whether ``index`` has fewer items than ``t`` has axes only because some items are
        integer vectors. Keeps the lowered items for the array access that follows."""
        items = self.index_values(index)
        self.pending_index = (index, items)
        count = len(self.expand_vector_indices(items, check_only=True))
        if count != len(items) and count != t.ndim:
            self.error(f"this array has {t.ndim} axes; the index gives {count} (each integer "
                       "vector counts its components)", index)
        return count == t.ndim

    def pending_index_values(self, index: ast.expr) -> list[Any]:
        pending, self.pending_index = self.pending_index, None
        if pending is not None and pending[0] is index:
            return pending[1]
        return self.index_values(index)

    def expand_vector_indices(self, items: list[Any], check_only: bool = False) -> list[Any]:
        """The items with each integer vector replaced by its components."""
        expanded: list[Any] = []
        for item in items:
            t = getattr(item, "type", None)
            if isinstance(t, T.VectorType) and (t.element.is_integer or t.element.is_bool):
                expanded.extend(
                    item if check_only else self.op("extract", item, index=k)
                    for k in range(t.size))
            else:
                expanded.append(item)
        return expanded

    # --- components of array elements --------------------------------------------------

    def element_of_array(self, node: ast.expr) -> tuple[Value, list[Value]] | None:
        """For ``a[i, j]`` naming one element of an array of vectors or matrices: the array
        and its indices; None for anything else."""
        if not isinstance(node, ast.Subscript):
            return None
        array = self.value(node.value)
        t = array.type
        if not isinstance(t, T.ArrayType) or not isinstance(t.dtype, SHAPED) or (
            self.selects_view(t, node.slice)
        ):
            return None
        return array, self.array_indices(array, node.slice, node)

    def store_array_component(self, base_node: ast.expr, k: Any, value: Any, node: ast.AST) -> bool:
        """``v[i].x = e``, ``v[i][0] = e``, ``m[i][0, 1] = e``: the element is read, the
        component replaced and the element written back. False if ``base_node`` is not an
        element of an array."""
        found = self.element_of_array(base_node)
        if found is None:
            return False
        array, indices = found
        dtype = array.type.dtype
        if k is None or isinstance(k, int) and not 0 <= k < dtype.count:
            self.error(f"{dtype} has no such component to assign", node)
        old = self.op("array_load", array, *indices, node=node)
        element = self.coerce(self.value_of(value, node), dtype.element, node)
        new = self.inserted(old, element, k)
        self.builder.create("array_store", [array, *indices, new])
        return True

    def inserted(self, vector: Value, element: Value, k: int | Value) -> Value:
        """``vector`` with component ``k`` (a constant or a run-time index) replaced."""
        if not isinstance(k, Value):
            return self.op("insert", vector, element, index=k)
        updated = vector
        for c in range(vector.type.count):
            hit = self.op("eq", k, self.builder.constant(c, T.i64))
            updated = self.op("select", hit, self.op("insert", vector, element, index=c), updated)
        return updated

    def atomic_component_update(self, target: ast.expr, op_name: str, value_node: ast.expr,
                                node: ast.AST) -> bool:
        """``grid_v[i, j].y -= g`` in a parallel loop: an atomic update of that component
        (the other components get zero added). False if ``target`` is not a component of
        an array element."""
        if isinstance(target, ast.Attribute):
            base_node, k_node = target.value, None
        elif isinstance(target, ast.Subscript):
            base_node, k_node = target.value, target.slice
        else:
            return False
        found = self.element_of_array(base_node)
        if found is None:
            return False
        array, indices = found
        dtype = array.type.dtype
        if k_node is None:
            assert isinstance(target, ast.Attribute)
            named = COMPONENT_NAMES.get(target.attr)
            if not isinstance(dtype, T.VectorType) or named is None or named >= dtype.size:
                self.error(f"{dtype} has no component '{target.attr}'", target)
            k: int | Value = named
        else:
            k = self.component_index(dtype, k_node, target)
        delta = self.coerce(self.value(value_node), dtype.element, node)
        vector = self.inserted(self.zero(dtype), delta, k)
        self.op("atomic_rmw", array, *indices, vector, kind=op_name, implicit=True, node=node)
        return True

    # --- mixed element types ----------------------------------------------------------------

    def vector_matmul(self, a: Value, b: Value, node: ast.AST) -> Value:
        """``m @ v``; as in NumPy, ``v @ m`` is the row vector ``v`` times ``m`` and
        ``v @ w`` the dot product. An integer operand takes the float operand's element
        type."""
        if isinstance(a.type, SHAPED) and isinstance(b.type, SHAPED):
            ea, eb = a.type.element, b.type.element
            if ea.is_float != eb.is_float:
                target = ea if ea.is_float else eb
                a = self.coerce(a, T.with_element_scalar(a.type, target), node)
                b = self.coerce(b, T.with_element_scalar(b.type, target), node)
            if isinstance(a.type, T.VectorType) and isinstance(b.type, T.VectorType):
                return self.op("dot", a, b, node=node)
            if isinstance(a.type, T.VectorType) and isinstance(b.type, T.MatrixType):
                return self.op("matmul", self.op("transpose", b, node=node), a, node=node)
        return self.op("matmul", a, b, node=node)

    # --- methods and list literals -----------------------------------------------------------

    def swizzle(self, v: Value, attr: str, node: ast.AST) -> Value | None:
        """``v.xy``, ``v.zyx``, ``c.rgb``, ``c.r`` (GLSL's and Taichi's swizzles): a vector
        of the named components; None where ``attr`` is no swizzle."""
        indices = swizzle_indices(attr)
        if indices is None or not isinstance(v.type, T.VectorType):
            return None
        t = v.type
        if max(indices) >= t.size:
            self.error(f"{t} has no component '{attr[indices.index(max(indices))]}' "
                       f"(in '.{attr}')", node)
        parts = [self.op("extract", v, index=k) for k in indices]
        if len(parts) == 1:
            return parts[0]
        return self.op("make_vector", *parts, type=T.vector_type(t.element, len(parts)))

    def vector_method(self, v: Value, attr: str) -> VectorMethod | None:
        """``v.norm`` and friends: the builtin a method call stands for, or None."""
        table = VECTOR_METHODS if isinstance(v.type, T.VectorType) else (
            MATRIX_METHODS if isinstance(v.type, T.MatrixType) else {})
        name = table.get(attr)
        return VectorMethod(name, v, attr) if name is not None else None

    def unpacked_parts(self, value: Any) -> Any:
        """``u, v = p`` of a vector unpacks its components, of a matrix its rows (as
        Python unpacks them); any other value is returned unchanged."""
        if not isinstance(value, Value) or not isinstance(value.type, SHAPED):
            return value
        t = value.type
        if isinstance(t, T.VectorType):
            return TupleValue(tuple(self.op("extract", value, index=k) for k in range(t.count)))
        row_type = T.vector_type(t.element, t.cols)
        return TupleValue(tuple(
            self.op("make_vector", *(self.op("extract", value, index=r * t.cols + c)
                                     for c in range(t.cols)), type=row_type)
            for r in range(t.rows)))

    def literal_value(self, items: TupleValue, t: Any, node: ast.AST) -> Value:
        """A list or tuple literal (``[0, 0]``, ``[[s, 0], [0, s]]``) as a value of the
        vector or matrix type ``t``."""
        scalars = [self.value_of(x, node) for x in flatten(items)]
        if not isinstance(t, SHAPED):
            self.error(f"a list or tuple cannot be stored as a value of type {t}", node)
        if len(scalars) != t.count:
            self.error(f"{t} takes {t.count} components, got a list of {len(scalars)}", node)
        for s in scalars:
            if not isinstance(s.type, T.ScalarType):
                self.error(f"a list literal for {t} needs numbers, got {s.type}", node)
        return self.op("make_vector", *(self.coerce(s, t.element, node) for s in scalars), type=t,
                       node=node)


def flatten(x: Any) -> list[Any]:
    """The leaves of nested tuple values, in order."""
    if isinstance(x, TupleValue):
        return [leaf for item in x.items for leaf in flatten(item)]
    return [x]


def _has_f64_elements(t: Any) -> bool:
    return isinstance(t, (T.ScalarType, *SHAPED)) and T.element_scalar(t) == T.f64


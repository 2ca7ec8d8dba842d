"""Small vectors and matrices in kernels, beyond the ops themselves: the element type of
mixed float/integer arithmetic (``vec2 - ivec2`` is a vec2) and where a float64 came from
when one causes an error later, list literals as values (``a[i] = [0, 0]``), and the
methods users of Taichi reach for (``v.norm()``, ``m.trace()``, ...)."""

from __future__ import annotations

import ast
from typing import Any

from kdsl import types as T
from kdsl.frontend.lowering import LoweringBase
from kdsl.frontend.values import TupleValue, VectorMethod
from kdsl.ir.core import Value
from kdsl.ir.location import SourceLocation
from kdsl.ir.ops import OpTypeError

SHAPED = (T.VectorType, T.MatrixType)

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

    def promotion_note(self, operands: tuple[Value, ...] | list[Value]) -> str:
        for v in operands:
            origin = self.promotion_origins.get(v)
            if origin is not None:
                location, what = origin
                text = location.source_line().strip()
                return (f" (the float64 comes from {what} at line {location.line}: `{text}`; "
                        "convert with kd.vec2(...) & co. or use float32 values there)")
        return ""

    # --- mixed element types ----------------------------------------------------------------

    def vector_matmul(self, a: Value, b: Value, node: ast.AST) -> Value:
        """``m @ v``: an integer operand takes the float operand's element type."""
        if isinstance(a.type, SHAPED) and isinstance(b.type, SHAPED):
            ea, eb = a.type.element, b.type.element
            if ea.is_float != eb.is_float:
                target = ea if ea.is_float else eb
                a = self.coerce(a, T.with_element_scalar(a.type, target), node)
                b = self.coerce(b, T.with_element_scalar(b.type, target), node)
        return self.op("matmul", a, b, node=node)

    # --- methods and list literals -----------------------------------------------------------

    def vector_method(self, v: Value, attr: str) -> VectorMethod | None:
        """``v.norm`` and friends: the builtin a method call stands for, or None."""
        table = VECTOR_METHODS if isinstance(v.type, T.VectorType) else (
            MATRIX_METHODS if isinstance(v.type, T.MatrixType) else {})
        name = table.get(attr)
        return VectorMethod(name, v, attr) if name is not None else None

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

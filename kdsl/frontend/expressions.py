"""Lowering of Python expressions to IR values, with NumPy 2 typing and weak literals."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.frontend import numeric_rules
from kdsl.frontend.tensors import TensorLowering, is_array
from kdsl.frontend.unsupported import unsupported_message
from kdsl.frontend.values import FormattedText, Static, TupleValue
from kdsl.frontend.vectors import COMPONENT_NAMES, VectorLowering
from kdsl.ir.core import Block, Value
from kdsl.ir.reductions import BOOL_ARITHMETIC

_BINOPS: dict[type, str] = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "bit_and", ast.BitOr: "bit_or",
    ast.BitXor: "bit_xor", ast.LShift: "shl", ast.RShift: "shr", ast.MatMult: "matmul",
}
_COMPARE: dict[type, str] = {
    ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge",
}
_SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**",
    "bit_and": "&", "bit_or": "|", "bit_xor": "^", "shl": "<<", "shr": ">>", "matmul": "@",
}


class ExpressionLowering(VectorLowering, TensorLowering):
    """Turns expression nodes into IR values (or static objects, tuples)."""

    def expr(self, node: ast.expr) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            self.error(unsupported_message(node, "expression"), node)
        with self.at(node):
            return method(node)

    def value(self, node: ast.expr) -> Value:
        return self.value_of(self.expr(node), node)

    # --- leaves ---------------------------------------------------------------------------

    def expr_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float)):
            try:
                return self.constant(node.value)
            except OverflowError as exc:
                self.error(str(exc), node)
        return Static(node.value)

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> TupleValue:
        return TupleValue(tuple(self.expr(e) for e in node.elts))

    expr_List = expr_Tuple

    # --- arithmetic -----------------------------------------------------------------------

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        name = _BINOPS.get(type(node.op))
        if name is None:
            self.error(f"unsupported operator {type(node.op).__name__}", node)
        left, right = self.expr(node.left), self.expr(node.right)
        if isinstance(left, Static) and isinstance(right, Static) and name != "matmul":
            return self.binary(name, self.value_of(left, node), self.value_of(right, node), node)
        return self.binary(name, self.value_of(left, node), self.value_of(right, node), node)

    def binary(self, name: str, a: Value, b: Value, node: ast.AST) -> Value:
        """``a <op> b`` with NumPy's promotion, weak literals, and vector broadcasting."""
        if is_array(a) or is_array(b):
            return self.tensor_binary(name, a, b, node)
        if name == "matmul":
            return self.vector_matmul(a, b, node)
        sa, sb = T.element_scalar(a.type), T.element_scalar(b.type)
        weak_a, weak_b = self.is_weak(a), self.is_weak(b)
        if weak_a and weak_b:
            folded = self._fold_python_ints(name, a, b, node)
            if folded is not None:
                return folded
        shaped = isinstance(a.type, (T.VectorType, T.MatrixType)) or isinstance(
            b.type, (T.VectorType, T.MatrixType))
        scalar, weak = (T.promote_shaped if shaped else T.promote)(sa, weak_a, sb, weak_b)
        if name in ("bit_and", "bit_or", "bit_xor", "shl", "shr"):
            if scalar.is_float:
                self.error(f"operator {_SYMBOLS[name]} needs integers or bools, got {scalar}", node)
        elif name == "div" and not scalar.is_float:
            scalar = T.f64
        elif name == "pow" and scalar.is_bool:
            scalar = T.i64
        if name == "pow" and scalar.is_integer and isinstance(self._defining_constant(b), int) and (
            self._defining_constant(b) < 0
        ):
            if not weak:
                self.error("integers to negative integer powers are not allowed (as in NumPy); "
                           "use a float", node)
            scalar = T.f64  # Python: 2 ** -1 == 0.5
        elif name in ("add", "sub", "mul", "floordiv", "mod") and scalar.is_bool:
            if weak:  # Python's True + True == 2
                scalar = T.i64
            elif name in ("add", "mul"):  # NumPy's bool + bool is or, bool * bool is and
                logical = BOOL_ARITHMETIC[name]
                return self.op(logical, self.coerce(a, T.bool_, node), self.coerce(b, T.bool_, node),
                               node=node)
            else:
                self.error(f"operator {_SYMBOLS[name]} on bools is not supported (as in NumPy); "
                           "convert them with int()", node)
        if not weak:
            numeric_rules.check_literals_fit(self, scalar, (a, b), node)  # type: ignore[arg-type]
        shape_type = self._broadcast_shape(a.type, b.type, node)
        target = scalar if shape_type is None else T.with_element_scalar(shape_type, scalar)
        if name == "pow" and self._is_small_int_constant(b):
            return self.mark_weak(self._power_by_squaring(self.coerce(a, target, node), b), weak)
        if name == "pow" and scalar.is_integer:
            numeric_rules.check_integer_power(self, self.coerce(b, target, node))  # type: ignore[arg-type]
        result = self.op(name, self.coerce(a, target, node), self.coerce(b, target, node), node=node)
        if shaped:
            self.note_promotion(result, (a, b), node)
        return self.mark_weak(result, weak)

    _EXACT_INT_OPS = {
        "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
        "floordiv": lambda x, y: x // y, "mod": lambda x, y: x % y,
        "pow": lambda x, y: x**y, "shl": lambda x, y: x << y,
    }

    def _fold_python_ints(self, name: str, a: Value, b: Value, node: ast.AST) -> Value | None:
        """Arithmetic on Python int literals is exact, as in Python; a result that does not
        fit in 64 bits is an error rather than a silent wrap-around."""
        x, y = self._defining_constant(a), self._defining_constant(b)
        fn = self._EXACT_INT_OPS.get(name)
        if fn is None or type(x) is not int or type(y) is not int:
            return None
        if name in ("floordiv", "mod") and y == 0:
            return None
        if (name == "pow" and (y < 0 or y > 4096)) or (name == "shl" and not 0 <= y < 4096):
            return None
        value = fn(x, y)
        if not -(2**63) <= value < 2**64:
            self.error(f"integer arithmetic on literals overflows 64 bits (the result is {value})",
                       node)
        return self.constant(value)

    def _broadcast_shape(self, ta: Any, tb: Any, node: ast.AST) -> Any:
        shaped = [t for t in (ta, tb) if isinstance(t, (T.VectorType, T.MatrixType))]
        if not shaped:
            return None
        if len(shaped) == 2 and ta.shape != tb.shape:
            self.error(f"shapes differ: {ta} and {tb}", node)
        return shaped[0]

    def _is_small_int_constant(self, v: Value) -> bool:
        owner = self._defining_constant(v)
        return owner is not None and isinstance(owner, int) and not isinstance(owner, bool) and (
            0 <= owner <= 8
        )

    def _defining_constant(self, v: Value) -> Any:
        return self.builder.known_constants.get(v)

    def _power_by_squaring(self, base: Value, exponent: Value) -> Value:
        n = self._defining_constant(exponent)
        if n == 0:
            return self.coerce(self.constant(1, T.element_scalar(base.type)), base.type, None)
        result: Value | None = None
        square = base
        while n:
            if n & 1:
                result = square if result is None else self.op("mul", result, square)
            n >>= 1
            if n:
                square = self.op("mul", square, square)
        assert result is not None
        return result

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.value(node.operand)
        weak = self.is_weak(v)
        if is_array(v):
            if isinstance(node.op, ast.UAdd):
                return v
            fn = {ast.USub: "neg", ast.Invert: "bit_not" if v.type.dtype != T.bool_ else "logical_not",
                  ast.Not: None}[type(node.op)]
            if fn is None:
                self.error("'not' of an array has no single truth value; use ~ for elementwise", node)
            return self.tensor_unary(fn, v, node)
        if isinstance(node.op, ast.Not):
            return self.op("logical_not", self.truth(v, node), node=node)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            if v.type == T.bool_:
                self.error("negating a bool is not supported; convert it with int()", node)
            literal = self._defining_constant(v)
            if isinstance(literal, (int, float)) and isinstance(v.type, T.ScalarType):
                if weak and type(literal) is int and literal > 2**63:
                    self.error(f"the integer literal -{literal} does not fit in 64 bits", node)
                # a negative literal stays a known constant (a[-1] counts from the end)
                folded = self.builder.constant(-literal, v.type)
                return self.mark_weak(folded, weak)
            return self.mark_weak(self.op("neg", v, node=node), weak)
        if isinstance(node.op, ast.Invert):
            if v.type == T.bool_:
                return self.op("logical_not", v, node=node)
            if isinstance(v.type, T.VectorType) and v.type.element.is_integer:
                return self.binary("bit_xor", v, self.constant(-1), node)  # ~iv, as NumPy
            if not isinstance(v.type, T.ScalarType) or v.type.is_float:
                self.error(f"operator ~ needs an integer, got {v.type}", node)
            return self.mark_weak(self.op("bit_not", v, node=node), weak)
        self.error(f"unsupported unary operator {type(node.op).__name__}", node)

    def compare(self, name: str, a: Value, b: Value, node: ast.AST) -> Value:
        if is_array(a) or is_array(b):
            return self.tensor_binary(name, a, b, node)
        if not isinstance(a.type, T.ScalarType) or not isinstance(b.type, T.ScalarType):
            self.error(f"comparison of {a.type} and {b.type}: only scalars compare", node)
        known = numeric_rules.comparison_beyond_int64(self, name, a, b)  # type: ignore[arg-type]
        if known is not None:
            return known
        scalar, _ = T.promote(a.type, self.is_weak(a), b.type, self.is_weak(b))
        scalar = numeric_rules.comparison_type(self, a, b, scalar)  # type: ignore[arg-type]
        return self.op(name, self.coerce(a, scalar, node), self.coerce(b, scalar, node), node=node)

    def expr_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            first = self.expr(node.left)
            if isinstance(first, TupleValue) or isinstance(first, Static) and isinstance(
                    first.obj, tuple):
                return self._compare_tuples(first, self.expr(node.comparators[0]),
                                            isinstance(node.ops[0], ast.NotEq), node)
        # a < b < c is (a < b) and (b < c), with b evaluated once and c only if needed
        left = self.value(node.left)
        pieces = list(zip(node.ops, node.comparators))
        return self._compare_chain(left, pieces, node)

    def _compare_tuples(self, a: Any, b: Any, negated: bool, node: ast.Compare) -> Value:
        """``a.shape == b.shape``: tuples are equal where their lengths and items are."""
        items = []
        for side in (a, b):
            if isinstance(side, Static) and isinstance(side.obj, tuple):
                side = TupleValue(tuple(Static(item) for item in side.obj))
            if not isinstance(side, TupleValue):
                self.error("a tuple compares only with a tuple", node)
            items.append(side.items)
        if len(items[0]) != len(items[1]):
            return self.constant(negated, T.bool_)
        equal = self.constant(True, T.bool_)
        for x, y in zip(*items):
            same = self.compare("eq", self.value_of(x, node), self.value_of(y, node), node)
            equal = self.op("bit_and", equal, same, node=node)
        return self.op("logical_not", equal, node=node) if negated else equal

    def _compare_chain(self, left: Value, pieces: list, node: ast.Compare) -> Value:
        op, right_node = pieces[0]
        if isinstance(op, (ast.In, ast.NotIn)):
            right, result = membership(self, left, right_node, isinstance(op, ast.NotIn), node)
        else:
            name = _COMPARE.get(type(op))
            if name is None:  # is, is not
                self.error("'is' and 'is not' are not supported in kernels: compare numbers "
                           "with == and !=", node)
            right = self.value(right_node)
            result = self.compare(name, left, right, node)
        if len(pieces) == 1:
            return result
        return self.conditional_value(
            result, lambda: self._compare_chain(right, pieces[1:], node),
            lambda: self.constant(False, T.bool_), node,
        )

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)

        def chain(values: list[ast.expr]) -> Value:
            first = self.value(values[0])
            if not isinstance(first.type, T.ScalarType):
                self.error(
                    f"'{'and' if is_and else 'or'}' needs scalar operands, got {first.type}",
                    values[0],
                )
            if len(values) == 1:
                return first
            rest = lambda: chain(values[1:])  # noqa: E731
            # as in Python: the first operand itself where it decides (a number, or a bool)
            fixed = lambda: (self.constant(not is_and, T.bool_)  # noqa: E731
                             if first.type == T.bool_ else first)
            truth = self.truth(first, values[0])
            if is_and:
                return self.conditional_value(truth, rest, fixed, node)
            return self.conditional_value(truth, fixed, rest, node)

        return chain(node.values)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.truth(self.value(node.test), node.test)
        return self.conditional_value(
            cond, lambda: self.value(node.body), lambda: self.value(node.orelse), node
        )

    def conditional_value(self, cond: Value, then_fn: Any, else_fn: Any, node: ast.AST) -> Value:
        """An ``if`` op with one result; each branch is lowered only into its own region."""
        from kdsl.frontend import random_draws

        then_block, else_block = Block(), Block()
        draws = self.env.get(random_draws.DRAW)
        with self.builder.at(then_block):
            then_value = then_fn()
        random_draws.check_no_draw_in(self, draws, node)
        with self.builder.at(else_block):
            else_value = else_fn()
        random_draws.check_no_draw_in(self, draws, node)
        weak_then, weak_else = self.is_weak(then_value), self.is_weak(else_value)
        if isinstance(then_value.type, T.ScalarType) and isinstance(else_value.type, T.ScalarType):
            t, weak = T.promote(then_value.type, weak_then, else_value.type, weak_else)
        elif then_value.type == else_value.type:
            t, weak = then_value.type, False
        else:
            from kdsl.frontend.scope import TypeConflict, VariableType, join

            try:
                t, weak = join(VariableType(then_value.type), VariableType(else_value.type)).type, False
            except TypeConflict:
                self.error(f"branches give different types: {then_value.type} and "
                           f"{else_value.type}", node)
        with self.builder.at(then_block):
            self.builder.create("yield", [self.coerce(then_value, t, node)])
        with self.builder.at(else_block):
            self.builder.create("yield", [self.coerce(else_value, t, node)])
        op = self.builder.create("if", [cond], {"types": [t]}, [then_block, else_block], [t])
        return self.mark_weak(op.result, weak)

    # --- attributes and subscripts ---------------------------------------------------

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, Static):
            try:
                return Static(getattr(base.obj, attr))
            except AttributeError:
                owner = getattr(base.obj, "__name__", None) or repr(base.obj)
                if owner == "kdsl":
                    owner = "kd"
                self.error(f"{owner}.{attr} does not exist", node)
        v = self.value_of(base, node)
        t = v.type
        if isinstance(t, T.ArrayType):
            if attr == "shape":
                return TupleValue(tuple(self.array_dim(v, k) for k in range(t.ndim)))
            if attr == "ndim":
                return self.constant(t.ndim)
            if attr == "T":
                return v if t.ndim == 1 else self.array_transpose(v, node)
            if attr == "size":  # as NumPy: the number of elements (of vectors, for Array[vec3])
                size = self.array_dim(v, 0)
                for k in range(1, t.ndim):
                    size = self.binary("mul", size, self.array_dim(v, k), node)
                return size
            if attr == "dtype":  # np.zeros(n, a.dtype)
                dtype = t.dtype
                return Static(np.dtype(dtype.numpy_dtype) if isinstance(dtype, T.ScalarType)
                              else dtype)
            self.error(f"arrays have no attribute '{attr}' in kernels", node)
        if isinstance(t, T.VectorType) and attr in COMPONENT_NAMES:
            index = COMPONENT_NAMES[attr]
            if index >= t.size:
                self.error(f"{t} has no component '{attr}'", node)
            return self.op("extract", v, index=index)
        if isinstance(t, T.MatrixType) and attr == "T":
            return self.op("transpose", v)
        swizzled = self.swizzle(v, attr, node)
        if swizzled is not None:
            return swizzled
        method = self.vector_method(v, attr)
        if method is not None:
            return Static(method)
        self.error(f"a value of type {t} has no attribute '{attr}'", node)

    def array_dim(self, array: Value, axis: int) -> Value:
        return self.mark_weak(self.op("array_dim", array, axis=axis))

    def index_values(self, node: ast.expr) -> list[Any]:
        elements = node.elts if isinstance(node, ast.Tuple) else [node]
        if any(isinstance(e, ast.List) for e in elements):
            self.error("an index list (NumPy's fancy indexing) is not supported in kernels; "
                       "index with integers, slices or an integer vector", node)
        if isinstance(node, ast.Tuple):
            return [self.expr(e) for e in node.elts]
        index = self.expr(node)
        if isinstance(index, TupleValue):
            return list(index.items)
        return [index]

    def array_indices(self, array: Value, index_node: ast.expr, node: ast.AST) -> list[Value]:
        t = array.type
        assert isinstance(t, T.ArrayType)
        items = self.expand_vector_indices(self.pending_index_values(index_node))
        if any(isinstance(i, Static) and isinstance(i.obj, slice) for i in items) or isinstance(
            index_node, ast.Slice
        ):
            self.error("array slices are not supported in this position", node)
        if len(items) != t.ndim:
            self.error(f"this array has {t.ndim} axes; index all {t.ndim} of them, got {len(items)}", node)
        indices = []
        for axis, item in enumerate(items):
            v = self.value_of(item, index_node)
            if not isinstance(v.type, T.ScalarType) or v.type.is_float:
                self.error(f"array index on axis {axis} must be an integer, got {v.type}", index_node)
            literal = self._defining_constant(v)
            v = self.builder.cast(v, T.i64)
            if isinstance(literal, int) and literal < 0:
                v = self.op("add", v, self.array_dim(array, axis))
            elif not isinstance(literal, int):  # passes/drop_index_wraps.py removes most
                v = self.op("wrap_index", v, self.array_dim(array, axis))
            indices.append(v)
        return indices

    def selects_view(self, t: T.ArrayType, index: ast.expr) -> bool:
        """Whether ``a[index]`` is a view (slices, new axes, fewer indices than axes)."""
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        special = any(isinstance(i, ast.Slice) or self.is_new_axis(i) or (
            isinstance(i, ast.Constant) and i.value is Ellipsis) for i in items)
        if isinstance(index, ast.Name) and isinstance(self.env.get(index.id), TupleValue):
            return False  # a tuple of indices held in a local
        if not special and len(items) < t.ndim:  # grid[base + offset], with an ivec2
            return not self.indexes_every_axis(t, index)
        return special

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if isinstance(base, Static) and isinstance(base.obj, (tuple, list)):  # a global tuple
            base = TupleValue(tuple(Static(x) for x in base.obj))
        if isinstance(base, TupleValue):
            index = self.expr(node.slice)
            literal = self._static_int(index)
            if literal is None:
                self.error("a tuple can only be indexed by a constant", node)
            try:
                return base.items[literal]
            except IndexError:
                self.error(f"tuple index {literal} out of range", node)
        v = self.value_of(base, node)
        t = v.type
        if isinstance(t, T.ArrayType):
            if self.selects_view(t, node.slice):
                return self.array_view(v, node.slice, node)
            indices = self.array_indices(v, node.slice, node)
            return self.op("array_load", v, *indices, node=node)
        if isinstance(t, (T.VectorType, T.MatrixType)):
            return self.component(v, node.slice, node)
        self.error(f"a value of type {t} cannot be indexed", node)

    def _static_int(self, x: Any) -> int | None:
        if isinstance(x, Static) and isinstance(x.obj, (int, np.integer)):
            return int(x.obj)
        if isinstance(x, Value):
            c = self._defining_constant(x)
            if isinstance(c, int) and not isinstance(c, bool):
                return c
        return None

    def component_index(self, t: Any, index_node: ast.expr, node: ast.AST) -> int | Value:
        items = self.index_values(index_node)
        if isinstance(t, T.VectorType):
            if len(items) != 1:
                self.error(f"{t} takes one index", node)
            k = self._static_int(items[0])
            if k is None:  # a negative index counts from the end
                index = self.builder.cast(self.value_of(items[0], node), T.i64)
                return self._checked_component(
                    index, self.op("wrap_index", index, self.constant(t.size, T.i64)), t.size, 0,
                    node)
            if not -t.size <= k < t.size:
                self.error(f"index {k} is out of range for {t}", node)
            return k % t.size
        if len(items) != 2:
            self.error(f"{t} takes two indices [row, column]", node)
        i, j = (self._static_int(x) for x in items)
        if i is None or j is None:  # m[i, j] at run time: the flat index of the component
            row = self._matrix_axis_index(items[0], i, t.rows, node, 0)
            column = self._matrix_axis_index(items[1], j, t.cols, node, 1)
            return self.op("add", self.op("mul", row, self.constant(t.cols, T.i64)), column)
        if not (-t.rows <= i < t.rows and -t.cols <= j < t.cols):
            self.error(f"index [{i}, {j}] is out of range for {t}", node)
        return (i % t.rows) * t.cols + j % t.cols

    def _matrix_axis_index(self, item: Any, known: int | None, size: int,
                           node: ast.AST, axis: int) -> Value:
        """One index of a matrix component as an i64 value (negative counts from the end)."""
        if known is not None:
            if not -size <= known < size:
                self.error(f"index {known} is out of range for an axis of size {size}", node)
            return self.constant(known % size, T.i64)
        index = self.builder.cast(self.value_of(item, node), T.i64)
        return self._checked_component(
            index, self.op("wrap_index", index, self.constant(size, T.i64)), size, axis, node)

    def _checked_component(self, written: Value, index: Value, size: int, axis: int,
                           node: ast.AST) -> Value:
        """``index`` of a vector's or matrix's component; in debug mode an index out of
        range, even counting from the end, is an ``IndexError`` naming ``written``."""
        if self.context.debug:
            zero, bound = self.constant(0, T.i64), self.constant(size, T.i64)
            ok = self.op("bit_and", self.op("ge", index, zero), self.op("lt", index, bound))
            base = node.value if isinstance(node, ast.Subscript) else None
            name = base.id if isinstance(base, ast.Name) else ""
            self.builder.create("raise_index_error", [written, bound, ok],
                                {"axis": axis, "array": name})
        return index

    def component(self, v: Value, index_node: ast.expr, node: ast.AST) -> Value:
        t = v.type
        if isinstance(t, T.MatrixType) and not isinstance(index_node, ast.Tuple):  # a row
            item = self.expr(index_node)
            row = self._matrix_axis_index(item, self._static_int(item), t.rows, node, 0)
            known = self._defining_constant(row)
            parts = []
            for c in range(t.cols):
                if isinstance(known, int):
                    parts.append(self.op("extract", v, index=known * t.cols + c))
                    continue
                part = self.op("extract", v, index=c)
                for r in range(1, t.rows):
                    hit = self.op("eq", row, self.constant(r, T.i64))
                    part = self.op("select", hit, self.op("extract", v, index=r * t.cols + c),
                                   part)
                parts.append(part)
            return self.op("make_vector", *parts, type=T.vector_type(t.element, t.cols))
        k = self.component_index(t, index_node, node)
        if isinstance(k, int):
            return self.op("extract", v, index=k)
        result = self.op("extract", v, index=0)
        for c in range(1, t.count):
            hit = self.op("eq", k, self.constant(c, T.i64))
            result = self.op("select", hit, self.op("extract", v, index=c), result)
        return result

    # --- calls --------------------------------------------------------------------------

    def expr_Call(self, node: ast.Call) -> Any:
        from kdsl.frontend.calls import lower_call

        return lower_call(self, node)  # type: ignore[arg-type]

    def expr_JoinedStr(self, node: ast.JoinedStr) -> Any:
        """``f"step {i}: {e}"``, which print() takes (values as print() shows them)."""
        pieces: list[Any] = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                pieces.append(str(part.value))
                continue
            assert isinstance(part, ast.FormattedValue)
            if part.conversion != -1 or part.format_spec is not None:
                self.error("format specifications and conversions (!r, :.3f) in f-strings "
                           "are not supported in kernels", node)
            value = self.expr(part.value)
            if isinstance(value, Static) and isinstance(value.obj, str):
                value = value.obj
            pieces.append(value)
        return FormattedText(tuple(pieces))


def is_python_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, np.generic))


def membership(lo: Any, left: Value, right_node: ast.expr, negated: bool,
               node: ast.AST) -> tuple[Any, Value]:
    """``x in (1, 2, 3)``, ``x not in OFFSETS``: Python's ``in`` over a tuple or list of
    scalars (written in the kernel, local or global), ``x == item`` for any item.
    Returns the right operand (for a chained comparison) and the result."""
    container = lo.expr(right_node)
    if isinstance(container, TupleValue):
        items = list(container.items)
    elif isinstance(container, Static) and isinstance(container.obj, (tuple, list)):
        items = list(container.obj)
    else:
        lo.error("'in' in a kernel needs a tuple or list of numbers on its right "
                 "(x in (1, 2, 3)); compare array elements explicitly", right_node)
    result = lo.constant(False, T.bool_)
    for item in items:
        if isinstance(item, (bool, int, float, np.generic)):
            item = lo.constant(item)
        value = lo.value_of(item, right_node)
        if not isinstance(value.type, T.ScalarType):
            lo.error(f"'in' compares numbers; the tuple holds a {value.type}", right_node)
        result = lo.op("bit_or", result, lo.compare("eq", left, value, node))
    if negated:
        result = lo.op("logical_not", result)
    return container, result

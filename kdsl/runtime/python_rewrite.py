"""The plain-Python form of a kernel: its own function with the subscripts that kdsl
gives a meaning Python lacks routed through helpers (kdsl/runtime/python_mode.py):

- an integer vector as an index (``grid[base + offset]`` with an ivec2) indexes as many
  axes as it has components;
- a component of an array element is assigned in place (``v[i].x = 0``,
  ``grid_v[i, j].y -= g``, ``v[i][0] = 1``), where Python would assign into a copy;
- ``int(x)`` and ``np.int32(x)`` (any NumPy integer type) convert as compiled code does:
  a float saturates at the type's range, NaN gives 0 (kdsl/integer_conversion.py);
- a local vector or matrix is updated as a value: ``w = v; w.x = 5.0`` leaves ``v``
  as it was (kdsl/runtime/python_values.py);
- a comparison of a vector or matrix raises the ``CompileError`` compiled code gives
  (kdsl/runtime/python_compare.py), where NumPy would compare elementwise.

Everything else runs as written. The rewritten function keeps the original's globals,
closure cells, file and line numbers, so tracebacks point at the user's source.
"""

from __future__ import annotations

import ast
import copy
import operator
import types
import weakref
from collections.abc import Callable
from typing import Any

from kdsl.integer_conversion import CONVERSION_NAMES, KDSL_INTEGER_NAMES, integer_literal
from kdsl.runtime.python_values import HELPERS as VALUE_HELPERS
from kdsl.runtime.python_values import (
    ValueSemantics,
    literal_like,
    local_names,
    set_in_value,
    update_in_value,
    update_value,
)

_IN_PLACE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.iadd, ast.Sub: operator.isub, ast.Mult: operator.imul,
    ast.Div: operator.itruediv, ast.FloorDiv: operator.ifloordiv, ast.Mod: operator.imod,
    ast.Pow: operator.ipow, ast.BitAnd: operator.iand, ast.BitOr: operator.ior,
    ast.BitXor: operator.ixor, ast.LShift: operator.ilshift, ast.RShift: operator.irshift,
    ast.MatMult: operator.imatmul,
}
_OPERATOR_NAMES = {op: f"_kd_op_{op.__name__}" for op in _IN_PLACE}
HELPERS = ("_kd_getitem", "_kd_setitem", "_kd_augitem", "_kd_setcomponent", "_kd_augcomponent",
           "_kd_convert", "_kd_convert_literal", "_kd_compare", "_kd_power")


def _plain_index(node: ast.expr) -> bool:
    """An index without slices (those stay Python's: views, never vector indices)."""
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return not any(isinstance(i, (ast.Slice, ast.Starred)) for i in items)


_LOOP_FUNCTIONS = ("range", "prange", "ndrange")
_INTEGER_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def _bound_names(target: ast.expr) -> set[str]:
    """The names an assignment target binds (not those inside ``a[i] = ...``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_bound_names(e) for e in target.elts))
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return set()


def integer_loop_variables(tree: ast.FunctionDef) -> set[str]:
    """Names only ever bound as variables of range/prange/ndrange loops: always ints (or
    tuples of ints), so subscripts by them need no vector-index helper."""
    loop_names: set[str] = set()
    other_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.For):
            func = node.iter.func if isinstance(node.iter, ast.Call) else None
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            plain = isinstance(node.target, ast.Name) or isinstance(node.target, ast.Tuple) and all(
                isinstance(t, ast.Name) for t in node.target.elts)
            bucket = loop_names if name in _LOOP_FUNCTIONS and plain else other_names
            bucket.update(_bound_names(node.target))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                other_names.update(_bound_names(t))
    parameters = {a.arg for a in tree.args.args}
    return loop_names - other_names - parameters


def _surely_integer(node: ast.expr, integers: set[str]) -> bool:
    """An index made of integer literals, loop variables and integer arithmetic."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Name):
        return node.id in integers
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _surely_integer(node.operand, integers)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _INTEGER_OPS):
        return _surely_integer(node.left, integers) and _surely_integer(node.right, integers)
    if isinstance(node, ast.Tuple):
        return all(_surely_integer(e, integers) for e in node.elts)
    return False


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


class _RouteSubscripts(ast.NodeTransformer):
    def __init__(self, integers: set[str]) -> None:
        self.integers = integers

    def _routed(self, index: ast.expr) -> bool:
        """Whether ``x[index]`` goes through a helper: it may hold an integer vector."""
        return _plain_index(index) and not _surely_integer(index, self.integers)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        function = node.func
        name = function.id if isinstance(function, ast.Name) else (
            function.attr if isinstance(function, ast.Attribute) else None)
        single = len(node.args) == 1 and not node.keywords
        literal = integer_literal(node.args[0]) if single else None
        if name in CONVERSION_NAMES | KDSL_INTEGER_NAMES and literal is not None:
            call = ast.Call(ast.Name("_kd_convert_literal", ast.Load()), [function, *node.args], [])
            return ast.copy_location(call, node)
        if name in CONVERSION_NAMES:
            call = ast.Call(ast.Name("_kd_convert", ast.Load()), [function, *node.args],
                            node.keywords)
            return ast.copy_location(call, node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        if isinstance(node.ctx, ast.Load) and self._routed(node.slice):
            return ast.copy_location(_call("_kd_getitem", node.value, node.slice), node)
        return node

    def _component_target(self, target: ast.expr) -> tuple[ast.expr, ast.expr, ast.expr] | None:
        """``E[I].attr`` or ``E[I][K]``: (E, I, key), key a string constant or K."""
        if isinstance(target, ast.Attribute):
            inner, key = target.value, ast.Constant(target.attr)
        elif isinstance(target, ast.Subscript) and _plain_index(target.slice):
            inner, key = target.value, self.visit(target.slice)
        else:
            return None
        if not (isinstance(inner, ast.Subscript) and _plain_index(inner.slice)):
            return None
        attr = ast.Constant(isinstance(target, ast.Attribute))
        return self.visit(inner.value), self.visit(inner.slice), ast.Tuple([key, attr], ast.Load())

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if len(node.targets) != 1:
            return self.generic_visit(node)
        target = node.targets[0]
        component = self._component_target(target)
        if component is not None:
            value = self.visit(node.value)
            return ast.copy_location(ast.Expr(_call("_kd_setcomponent", value, *component)), node)
        if isinstance(target, ast.Subscript) and self._routed(target.slice):
            value = self.visit(node.value)
            call = _call("_kd_setitem", value, self.visit(target.value), self.visit(target.slice))
            return ast.copy_location(ast.Expr(call), node)
        return self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        op = ast.Name(_OPERATOR_NAMES[type(node.op)], ast.Load())
        component = self._component_target(node.target)
        if component is not None:
            call = _call("_kd_augcomponent", *component, op, self.visit(node.value))
            return ast.copy_location(ast.Expr(call), node)
        target = node.target
        if isinstance(target, ast.Subscript) and self._routed(target.slice):
            call = _call("_kd_augitem", self.visit(target.value), self.visit(target.slice), op,
                         self.visit(node.value))
            return ast.copy_location(ast.Expr(call), node)
        return self.generic_visit(node)


_COMPARISON_SYMBOLS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                       ast.NotEq: "!="}


class _CheckComparisons(ast.NodeTransformer):
    """``a < b`` becomes ``_kd_compare("<", a, b, where)``, ``where`` its location in the
    user's file (lines counted from ``first_line``, the function's first)."""

    def __init__(self, file: str, first_line: int, function: str) -> None:
        self.file, self.first_line, self.function = file, first_line, function

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        symbol = _COMPARISON_SYMBOLS.get(type(node.ops[0]))
        if len(node.ops) != 1 or symbol is None:
            return node
        where = (self.file, node.lineno + self.first_line - 1, node.col_offset, self.function)
        where_node = ast.Tuple([ast.Constant(part) for part in where], ast.Load())
        call = _call("_kd_compare", ast.Constant(symbol), node.left, node.comparators[0],
                     where_node)
        return ast.copy_location(call, node)


class _SmallPowers(ast.NodeTransformer):
    """``x ** 3`` (a literal exponent from 0 to 8) becomes ``_kd_power(x, 3)``: products by
    squaring, as compiled code computes it (NumPy's power of a float rounds otherwise)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        exponent = node.right
        if not (isinstance(node.op, ast.Pow) and isinstance(exponent, ast.Constant)
                and type(exponent.value) is int and 0 <= exponent.value <= 8):
            return node
        return ast.copy_location(_call("_kd_power", node.left, exponent), node)


# per function: the code object it was rewritten for (a reload swaps it) and the result
_REWRITTEN: weakref.WeakKeyDictionary[Callable[..., Any], tuple[Any, Callable[..., Any]]] = (
    weakref.WeakKeyDictionary())


def plain_python_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` rewritten as described above (cached); ``fn`` itself where its source cannot
    be read."""
    try:
        cached = _REWRITTEN.get(fn)
    except TypeError:  # not weakly referenceable
        return fn
    if cached is not None and cached[0] is fn.__code__:
        return cached[1]
    try:
        rewritten = _rewrite(fn)
    except Exception:  # noqa: BLE001 - no source, or a construct the rewrite does not know
        rewritten = fn
    _REWRITTEN[fn] = (fn.__code__, rewritten)
    return rewritten


def _rewrite(fn: Callable[..., Any]) -> Callable[..., Any]:
    from kdsl.frontend.source import read_function
    from kdsl.runtime import python_mode

    source = read_function(fn)
    tree = copy.deepcopy(source.tree)
    tree.decorator_list = []
    integers = integer_loop_variables(tree)
    tree = ValueSemantics(local_names(tree), _OPERATOR_NAMES).visit(tree)
    tree = _RouteSubscripts(integers).visit(tree)
    tree = _CheckComparisons(source.file, source.first_line, tree.name).visit(tree)
    tree = _SmallPowers().visit(tree)
    original_free = fn.__code__.co_freevars
    helper_names = list(HELPERS) + list(VALUE_HELPERS) + list(_OPERATOR_NAMES.values())
    # a factory whose parameters become the rewritten function's free variables
    parameters = [ast.arg(n) for n in (*original_free, *helper_names)]
    factory = ast.FunctionDef(
        name="_kd_factory",
        args=ast.arguments(posonlyargs=[], args=parameters, kwonlyargs=[], kw_defaults=[],
                           defaults=[]),
        body=[tree, ast.Return(ast.Name(tree.name, ast.Load()))], decorator_list=[],
    )
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, source.first_line - 1)
    namespace: dict[str, Any] = {}
    exec(compile(module, source.file, "exec"), fn.__globals__, namespace)  # noqa: S102
    code = namespace["_kd_factory"](*([None] * len(parameters))).__code__
    helpers = {name: getattr(python_mode, name) for name in HELPERS}
    helpers.update(zip(VALUE_HELPERS, (update_value, set_in_value, update_in_value,
                                       literal_like)))
    helpers.update({name: op for op, name in ((_IN_PLACE[t], n) for t, n in _OPERATOR_NAMES.items())})
    cells = []
    for name in code.co_freevars:
        if name in original_free:
            assert fn.__closure__ is not None
            cells.append(fn.__closure__[original_free.index(name)])
        else:
            cells.append(types.CellType(helpers[name]))
    result = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                                tuple(cells) or None)
    result.__kwdefaults__ = fn.__kwdefaults__
    result.__qualname__ = fn.__qualname__
    return result

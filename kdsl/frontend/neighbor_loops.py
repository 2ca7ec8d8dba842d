"""``kd.NeighborGrid`` in kernels: the constructor builds the grid (a generated func,
kdsl/primitives/grid_source.py) and ``for j in grid.neighbors(q, radius):`` lowers to a
loop nest over the cells within reach, around the loop's own body."""

from __future__ import annotations

import ast
import itertools
from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.frontend.analysis import may_break_or_continue
from kdsl.frontend.calls import KEYWORD_BUILTINS, builtin
from kdsl.frontend.neighbor_positions import body_reading_the_copy
from kdsl.frontend.tensors import is_array
from kdsl.frontend.values import Static, TupleValue
from kdsl.ir.core import Value
from kdsl.primitives.grid_source import AXES, MAX_CELLS, build_func, cells_func, query_source
from kdsl.primitives.neighbor_grid import NeighborGrid
from kdsl.records import dataclass

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering

_QUERY_NAMES = itertools.count()


@dataclass(frozen=True)
class GridInKernel:
    """A grid built in the kernel being lowered: its arrays and sizes as IR values."""

    dim: int
    periodic: bool
    vector: T.VectorType
    values: dict[str, Value]  # start, order, sorted_x, lower, inverse, extent, nx, ny(, nz)
    positions: Value  # the array it was built from


def _as_vector(lo: FunctionLowering, given: Any, t: T.VectorType, name: str,
               node: ast.Call) -> Value:
    if isinstance(given, TupleValue):
        if len(given.items) != t.size:
            lo.error(f"NeighborGrid(): {name} needs {t.size} components, got {len(given.items)}",
                     node)
        return lo.literal_value(given, t, node)
    v = lo.value_of(given, node)
    if v.type != t and not (isinstance(v.type, T.VectorType) and v.type.size == t.size):
        lo.error(f"NeighborGrid(): {name} must be a {t} (or a tuple), got {v.type}", node)
    return lo.coerce(v, t, node)


def _periodic(lo: FunctionLowering, node: ast.Call, args: list) -> bool:
    given: Any = args[4] if len(args) == 5 else None
    for keyword in node.keywords:
        if keyword.arg != "periodic":
            lo.error(f"NeighborGrid() got an unexpected keyword argument '{keyword.arg}'", node)
        given = keyword.value
    if given is None:
        return False
    if isinstance(given, ast.Constant):
        return bool(given.value)
    value = lo.expr(given) if isinstance(given, ast.expr) else given
    if isinstance(value, Static):
        return bool(value.obj)
    if isinstance(value, Value) and value in lo.builder.known_constants:
        return bool(lo.builder.known_constants[value])
    lo.error("NeighborGrid(): 'periodic' must be a constant", node)


@builtin(NeighborGrid)
def _build(lo: FunctionLowering, node: ast.Call, args: list) -> Static:
    if not 4 <= len(args) <= 5:
        lo.error("NeighborGrid() takes positions, cell_size, lower, upper (and periodic=)", node)
    x = lo.value_of(args[0], node)
    element = x.type.dtype if is_array(x) else None
    if not (isinstance(element, T.VectorType) and element.size in (2, 3) and x.type.ndim == 1
            and element.element.is_float):
        lo.error("NeighborGrid() needs positions as a 1-D array of float vectors "
                 f"(kd.Array[kd.vec3] or kd.Array[kd.vec2]), got {x.type}", node)
    assert isinstance(element, T.VectorType)
    periodic = _periodic(lo, node, args)
    cell = lo.coerce(lo.value_of(args[1], node), element.element, node)
    lower = _as_vector(lo, args[2], element, "lower", node)
    upper = _as_vector(lo, args[3], element, "upper", node)
    _check_cells(lo, lo.call_func(cells_func(element.size), [cell, lower, upper], node))
    built = lo.call_func(build_func(element.size, element.element, periodic),
                         [x, cell, lower, upper], node)
    names = ["start", "order", "sorted_x", "lower", "inverse", "extent",
             *(f"n{a}" for a in AXES[:element.size])]
    return Static(GridInKernel(element.size, periodic, element, dict(zip(names, built.items)), x))


def _check_cells(lo: FunctionLowering, cells: Value) -> None:
    """ValueErrors at run time, as the grid in plain Python raises them, for a grid whose
    cells cannot be counted or are too many to number."""
    lo.builder.create("raise_value_error", [lo.op("ge", cells, lo.constant(0)), cells], {
        "what": "NeighborGrid(): cell_size must be positive and upper must exceed lower "
                "along every axis"})
    lo.builder.create("raise_value_error", [lo.op("lt", cells, lo.constant(MAX_CELLS)), cells], {
        "what": f"NeighborGrid(): too many cells (each at least cell_size wide; at most "
                f"{MAX_CELLS - 1}); choose a larger cell_size or a smaller domain"})


KEYWORD_BUILTINS.append(NeighborGrid)


def grid_of_loop(lo: Any, node: ast.For) -> GridInKernel | None:
    """The grid of ``for j in grid.neighbors(...)``, or None for any other loop."""
    call = node.iter
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "neighbors" and isinstance(call.func.value, ast.Name)):
        return None
    base = lo.expr(call.func.value)
    return base.obj if isinstance(base, Static) and isinstance(base.obj, GridInKernel) else None


def lower_neighbor_loop(lo: Any, node: ast.For, grid: GridInKernel) -> None:
    """``for j in grid.neighbors(q, radius): body`` as the loop nest of ``query_source``."""
    call = node.iter
    assert isinstance(call, ast.Call)
    if len(call.args) != 2 or call.keywords:
        lo.error("grid.neighbors() takes a position and a radius", call)
    target = node.target
    if not isinstance(target, ast.Name):
        lo.error("for ... in grid.neighbors(...) needs one loop variable", target)
    assert isinstance(target, ast.Name)
    if may_break_or_continue(node.body)[0]:
        lo.error("'break' in a loop over neighbours is not supported", node)
    prefix = f"__kdsl_grid{next(_QUERY_NAMES)}_"
    q = _as_vector(lo, lo.expr(call.args[0]), grid.vector, "the position", call)
    radius = lo.coerce(lo.value_of(lo.expr(call.args[1]), call), grid.vector.element, call)
    for name, value in {**grid.values, "q": q, "radius": radius}.items():
        lo.assign(prefix + name, value, node)
    statements = ast.parse(query_source(grid.dim, grid.periodic, target.id, prefix)).body
    for stmt in statements:
        for part in ast.walk(stmt):
            if isinstance(part, (ast.stmt, ast.expr)):
                ast.copy_location(part, node)
                part.end_lineno, part.end_col_offset = node.end_lineno, node.end_col_offset
    positions = [name for name, value in lo.env.items() if value is grid.positions]
    body = body_reading_the_copy(node.body, lo.source.tree, positions, target.id,
                                 prefix + "sorted_x", prefix + "k")
    _innermost_if(statements[-1]).body[-1:] = body
    for stmt in statements:
        lo.stmt(stmt)


def _innermost_if(loop: ast.stmt) -> ast.If:
    """The ``if`` around the body in the query's loop nest."""
    current: ast.stmt = loop
    while isinstance(current, ast.For):
        current = current.body[-1]
    assert isinstance(current, ast.If)
    return current

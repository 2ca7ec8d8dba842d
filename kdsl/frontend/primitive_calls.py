"""The parallel primitives in kernels (``kd.cumsum``, ``kd.sort``, ``kd.argsort``,
``kd.sort_by_key``, ``kd.searchsorted``, ``kd.segment_sum``): each call lowers to a
generated func (kdsl/primitives/), inlined like the user's funcs, so it runs in parallel
where it is called outside a parallel loop, and serially inside one."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl import primitives
from kdsl import types as T
from kdsl.frontend.calls import KEYWORD_BUILTINS, _new_array, builtin
from kdsl.frontend.scan_axes import flatten_func, scan_axis_func
from kdsl.frontend.tensors import is_array
from kdsl.frontend.values import Static
from kdsl.ir.core import Value
from kdsl.primitives import kernels
from kdsl.primitives.api import sum_type
from kdsl.primitives.bits import bits, float_from_bits
from kdsl.primitives.device import device_scan
from kdsl.primitives.scan_source import scan_func
from kdsl.primitives.search_source import search_funcs, segment_sum_func
from kdsl.primitives.sort_source import radix_sort_func, sort_func

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering

Handler = Callable[["FunctionLowering", ast.Call, list], Any]


def _keyword_builtin(fn: Any) -> Callable[[Handler], Handler]:
    KEYWORD_BUILTINS.append(fn)
    return builtin(fn)


def _keywords(lo: FunctionLowering, node: ast.Call, name: str, allowed: tuple[str, ...]
              ) -> dict[str, ast.expr]:
    given = {}
    for keyword in node.keywords:
        if keyword.arg not in allowed:
            lo.error(f"{name}() got an unexpected keyword argument '{keyword.arg}'", node)
        given[str(keyword.arg)] = keyword.value
    return given


def _constant(lo: FunctionLowering, given: Any, name: str, node: ast.Call) -> Any:
    """The value of a constant argument, given as source (a keyword) or lowered."""
    if isinstance(given, ast.Constant):
        return given.value
    value = lo.expr(given) if isinstance(given, ast.expr) else given
    if isinstance(value, Static):
        return value.obj
    if isinstance(value, Value) and value in lo.builder.known_constants:
        return lo.builder.known_constants[value]
    lo.error(f"'{name}' must be a constant", node)


def _vector(lo: FunctionLowering, node: ast.Call, arg: Any, name: str, what: str) -> Value:
    """``arg`` as a 1-D array of scalars, or a located error naming ``what``."""
    v = lo.value_of(arg, node)
    if not is_array(v):
        lo.error(f"{name}() needs an array for {what}, got {v.type}", node)
    if not isinstance(v.type.dtype, T.ScalarType):
        lo.error(f"{name}() needs an array of scalars for {what}, got {v.type}", node)
    if v.type.ndim != 1:
        lo.error(f"{name}() in kernels takes a 1-D array for {what}, got {v.type.ndim} axes", node)
    return v


def _positional(lo: FunctionLowering, node: ast.Call, args: list, name: str, low: int,
                high: int) -> None:
    if not low <= len(args) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        lo.error(f"{name}() takes {expected} positional arguments, got {len(args)}", node)


def _same_length(lo: FunctionLowering, a: Value, b: Value, what: str) -> None:
    """A ValueError at run time (as NumPy's) unless 1-D ``a`` and ``b`` have one length:
    the primitive would read or write past the shorter one."""
    sizes = [lo.array_dim(a, 0), lo.array_dim(b, 0)]
    lo.builder.create("raise_shape_error", [lo.op("eq", *sizes), *sizes],
                      {"axis": 0, "what": what})


@builtin(bits)
def _bits(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    v = lo.value_of(args[0], node)
    if not isinstance(v.type, T.ScalarType) or v.type.bits not in (32, 64):
        lo.error(f"bits() takes a 4- or 8-byte scalar, got {v.type}", node)
    return lo.strong(lo.op("bitcast", v, type=T.u64 if v.type.bits == 64 else T.u32, node=node))


@builtin(float_from_bits)
def _float_from_bits(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    v = lo.value_of(args[0], node)
    if v.type not in (T.u32, T.u64):
        lo.error(f"float_from_bits() takes a u32 or a u64, got {v.type}", node)
    return lo.strong(lo.op("bitcast", v, type=T.f64 if v.type == T.u64 else T.f32, node=node))


@builtin(device_scan)
def _device_scan(lo: FunctionLowering, node: ast.Call, args: list) -> Any:
    """``device_scan(a, out, exclusive)``, called by the CUDA versions of the primitives."""
    _positional(lo, node, args, "device_scan", 3, 3)
    a = _vector(lo, node, args[0], "device_scan", "a")
    out = _vector(lo, node, args[1], "device_scan", "out")
    exclusive = bool(_constant(lo, args[2], "exclusive", node))
    lo.builder.create("device_scan", [a, out], {"exclusive": exclusive})
    return Static(None)


@_keyword_builtin(primitives.cumsum)
def _cumsum(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _positional(lo, node, args, "cumsum", 1, 2)
    keywords = _keywords(lo, node, "cumsum", ("axis", "exclusive"))
    axis_node = args[1] if len(args) == 2 else keywords.get("axis")
    axis = None if axis_node is None else _constant(lo, axis_node, "axis", node)
    exclusive = keywords.get("exclusive")
    is_exclusive = bool(_constant(lo, exclusive, "exclusive", node)) if exclusive is not None else False
    given = lo.value_of(args[0], node)
    if is_array(given) and isinstance(given.type.dtype, T.ScalarType) and given.type.ndim > 1:
        return _cumsum_of_axes(lo, node, given, axis, is_exclusive)
    a = _vector(lo, node, args[0], "cumsum", "a")
    if axis not in (None, 0, -1):
        lo.error(f"axis {axis} is out of range for a 1-D array", node)
    result = T.scalar_from_numpy(sum_type(a.type.dtype.numpy_dtype))
    out = _new_array(lo, node, [lo.array_dim(a, 0)], result, "empty", None)
    lo.call_func(scan_func(result, is_exclusive), [a, out], node)
    return out


_keyword_builtin(np.cumsum)(_cumsum)


def _cumsum_of_axes(lo: FunctionLowering, node: ast.Call, a: Value, axis: Any,
                    exclusive: bool) -> Value:
    """``kd.cumsum`` of an array of several axes: along ``axis``, or flattened (None)."""
    ndim = a.type.ndim
    if ndim > 4:
        lo.error(f"cumsum() in kernels takes arrays of at most 4 axes, got {ndim}", node)
    result = T.scalar_from_numpy(sum_type(a.type.dtype.numpy_dtype))
    dims = [lo.array_dim(a, k) for k in range(ndim)]
    if axis is None:  # NumPy's: the array flattened in C order
        size = dims[0]
        for d in dims[1:]:
            size = lo.binary("mul", size, d, node)
        flat = _new_array(lo, node, [size], a.type.dtype, "empty", None)
        lo.call_func(flatten_func(ndim), [a, flat], node)
        out = _new_array(lo, node, [size], result, "empty", None)
        lo.call_func(scan_func(result, exclusive), [flat, out], node)
        return out
    if not isinstance(axis, int) or not -ndim <= axis < ndim:
        lo.error(f"axis {axis} is out of range for an array of {ndim} axes", node)
    out = _new_array(lo, node, dims, result, "empty", None)
    lo.call_func(scan_axis_func(ndim, axis % ndim, result, exclusive), [a, out], node)
    return out


@builtin(primitives.sort)
def _sort(lo: FunctionLowering, node: ast.Call, args: list) -> Any:
    _positional(lo, node, args, "sort", 1, 1)
    a = _vector(lo, node, args[0], "sort", "a")
    return lo.call_func(sort_func(a.type.dtype), [a], node)


@_keyword_builtin(primitives.argsort)
def _argsort(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _positional(lo, node, args, "argsort", 1, 2)
    keywords = _keywords(lo, node, "argsort", ("out",))
    keys = _vector(lo, node, args[0], "argsort", "keys")
    out_arg = args[1] if len(args) == 2 else (
        lo.expr(keywords["out"]) if "out" in keywords else None)
    if out_arg is None:
        out = _new_array(lo, node, [lo.array_dim(keys, 0)], T.i64, "empty", None)
    else:
        out = _vector(lo, node, out_arg, "argsort", "out")
        if out.type.dtype != T.i64:
            lo.error(f"argsort() writes int64 indices; out is {out.type}", node)
        _same_length(lo, keys, out, "argsort(keys, out=): the lengths of keys and out")
    lo.call_func(kernels.argsort_func(keys.type.dtype), [keys, out], node)
    return out


@builtin(primitives.sort_by_key)
def _sort_by_key(lo: FunctionLowering, node: ast.Call, args: list) -> Any:
    _positional(lo, node, args, "sort_by_key", 2, 2)
    keys = _vector(lo, node, args[0], "sort_by_key", "keys")
    values = _vector(lo, node, args[1], "sort_by_key", "values")
    _same_length(lo, keys, values, "sort_by_key(keys, values): the lengths of keys and values")
    return lo.call_func(radix_sort_func(keys.type.dtype, values.type.dtype), [keys, values], node)


@_keyword_builtin(primitives.searchsorted)
def _searchsorted(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _positional(lo, node, args, "searchsorted", 2, 3)
    keywords = _keywords(lo, node, "searchsorted", ("side",))
    a = _vector(lo, node, args[0], "searchsorted", "a")
    side_node = args[2] if len(args) == 3 else keywords.get("side")
    side = "left" if side_node is None else _constant(lo, side_node, "side", node)
    if side not in ("left", "right"):
        lo.error(f"side must be 'left' or 'right', got {side!r}", node)
    v = lo.value_of(args[1], node)
    if is_array(v):
        v = _vector(lo, node, v, "searchsorted", "v")
        _, many = search_funcs(_search_type(lo, node, a.type.dtype, v.type.dtype), side)
        out = _new_array(lo, node, [lo.array_dim(v, 0)], T.i64, "empty", None)
        lo.call_func(many, [a, v, out], node)
        return out
    if not isinstance(v.type, T.ScalarType):
        lo.error(f"searchsorted() needs a scalar or an array for v, got {v.type}", node)
    common = _search_type(lo, node, a.type.dtype, v.type)
    one, _ = search_funcs(common, side)
    # strong: a Python number keeps its NumPy type in the comparisons, as in NumPy's
    x = lo.strong(lo.coerce(v, common, node))
    return lo.strong(lo.builder.cast(lo.call_func(one, [a, x], node), T.i64))


def _search_type(lo: FunctionLowering, node: ast.Call, a: T.ScalarType, v: T.ScalarType
                 ) -> T.ScalarType:
    """The type ``searchsorted`` compares in, as NumPy's: the common type of ``a``'s and
    ``v``'s (a Python number as NumPy makes it: an int64 or a float64), so an int ``a``
    searched for ``2.5`` is not searched for 2. The elements of ``a`` are promoted as
    they are compared."""
    if a == v:
        return a
    try:
        return T.scalar_from_numpy(np.result_type(a.numpy_dtype, v.numpy_dtype))
    except Exception:  # noqa: BLE001
        lo.error(f"searchsorted() cannot compare {a} and {v}", node)


@builtin(primitives.segment_sum)
def _segment_sum(lo: FunctionLowering, node: ast.Call, args: list) -> Any:
    _positional(lo, node, args, "segment_sum", 2, 2)
    keys = _vector(lo, node, args[0], "segment_sum", "keys")
    values = _vector(lo, node, args[1], "segment_sum", "values")
    total = T.scalar_from_numpy(sum_type(values.type.dtype.numpy_dtype))
    return lo.call_func(segment_sum_func(keys.type.dtype, total), [keys, values], node)


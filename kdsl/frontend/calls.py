"""Calls in kernels: builtins (one table, mapping each Python object to its lowering),
type constructors and casts, and calls of ``@kd.func`` functions."""

from __future__ import annotations

import ast
import builtins as py
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl import builtins as kb
from kdsl import searching
from kdsl import types as T
from kdsl.frontend import numeric_rules
from kdsl.frontend.math_calls import math_call
from kdsl.frontend.tensors import is_array, reduction_arguments
from kdsl.frontend.values import Static, TupleValue, VectorMethod
from kdsl.integer_conversion import integer_literal
from kdsl.ir.core import Value
from kdsl.ir.math_builtins import MATH_FUNCTIONS, math_module_function, numpy_functions

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering

Handler = Callable[["FunctionLowering", ast.Call, list], Any]
BUILTINS: dict[Any, Handler] = {}


def builtin(*objects: Any) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for obj in objects:
            BUILTINS[obj] = handler
        return handler

    return register


def _arity(lo: FunctionLowering, node: ast.Call, args: list, n: int, name: str) -> None:
    if len(args) != n:
        lo.error(f"{name}() takes {n} argument{'s' if n != 1 else ''}, got {len(args)}", node)


def _values(lo: FunctionLowering, node: ast.Call, args: list) -> list[Value]:
    return [lo.value_of(a, node) for a in args]


def _unary_math(op_name: str, python_result: bool = False) -> Handler:
    """abs, floor and ceil, which keep an integer's type. ``python_result``: it returns a
    Python number for a Python number (builtin ``abs``), so the result stays weak;
    NumPy's and kdsl's return NumPy scalars (strong)."""

    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        _arity(lo, node, args, 1, op_name)
        (v,) = _values(lo, node, args)
        if is_array(v):
            return lo.tensor_unary(op_name, v, node)
        weak = lo.is_weak(v) and python_result
        result = lo.op(op_name, v, node=node)
        return lo.mark_weak(result, weak) if weak else lo.strong(result)

    return handler


for _name in ("floor", "ceil"):
    builtin(getattr(kb, _name), getattr(np, _name))(_unary_math(_name))
for _fn in MATH_FUNCTIONS.values():
    builtin(kb.MATH[_fn.name], *numpy_functions(_fn))(math_call(_fn))
    if math_module_function(_fn) is not None:
        builtin(math_module_function(_fn))(math_call(_fn, python_result=True))
builtin(kb.abs, np.abs, np.absolute)(_unary_math("abs"))
builtin(py.abs)(_unary_math("abs", python_result=True))


@builtin(math.fabs)
def _fabs(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 1, "math.fabs")
    (v,) = _values(lo, node, args)
    if not isinstance(v.type, T.ScalarType):
        lo.error(f"math.fabs() needs a scalar, got {v.type}", node)
    return lo.mark_weak(lo.strong(lo.op("abs", lo.coerce(v, T.f64, node), node=node)))


@builtin(math.floor, math.ceil, math.trunc)
def _python_rounding(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 1, "math rounding")
    (v,) = _values(lo, node, args)
    fn = lo.expr(node.func)
    name = {math.floor: "floor", math.ceil: "ceil", math.trunc: None}[fn.obj]
    x = lo.coerce(v, T.f64, node)
    if name:
        x = lo.op(name, x, node=node)
    return lo.mark_weak(lo.builder.cast(x, T.i64))


def _fold_pairwise(op_name: str, python_result: bool = False, ignore_nan: bool = False) -> Handler:
    """Python's ``min``/``max`` (``python_result``: a NaN is kept only where Python's
    comparisons keep it), or NumPy's ``minimum``/``maximum`` (NaN wins) and ``fmin``/
    ``fmax`` (NaN loses)."""

    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        if len(args) == 1 and not python_result:
            return _reduce(op_name)(lo, node, args)
        if len(args) == 1 and isinstance(args[0], TupleValue):  # max((a, b, c))
            args = list(args[0].items)
        elif len(args) == 1 and is_array(args[0]) and args[0].type.ndim == 1:  # max(a)
            return lo.tensor_reduce(op_name, args[0], None, False, node)
        if len(args) < 2:
            lo.error(f"{op_name}() needs at least two arguments", node)
        values = _values(lo, node, args)
        result = values[0]
        for v in values[1:]:
            picked = (numeric_rules.python_min_max(lo, op_name, result, v, node)
                      if python_result else None)
            if picked is not None:
                result = picked
                continue
            if not python_result and (is_array(result) or is_array(v)):
                result = numeric_rules.array_min_max(lo, op_name, result, v, ignore_nan, node)
                continue
            pairwise = lo.binary(op_name, result, v, node)
            if not python_result:
                pairwise = numeric_rules.nan_aware(lo, pairwise, result, v, ignore_nan, node)
            result = pairwise
        return result if python_result else lo.strong(result)

    return handler


@builtin(py.sum)
def _python_sum(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    """Python's ``sum``: of an array, over its first axis (as iterating it gives); of a
    tuple, of its items; with a start value added first, as Python adds it."""
    if not 1 <= len(args) <= 2:
        lo.error(f"sum() takes one or two arguments, got {len(args)}", node)
    items = args[0]
    if isinstance(items, TupleValue):  # 0 + items[0] + items[1] ..., as Python adds them
        total = lo.value_of(args[1] if len(args) == 2 else Static(0), node)
        for v in _values(lo, node, list(items.items)):
            total = lo.binary("add", total, v, node)
        return total
    v = lo.value_of(items, node)
    if not is_array(v):
        lo.error(f"sum() needs an array or a tuple, got {v.type}", node)
    total = lo.tensor_reduce("sum", v, 0, False, node)
    return lo.binary("add", lo.value_of(args[1], node), total, node) if len(args) == 2 else total


def _logical(op_name: str) -> Handler:
    """``np.logical_and``, ``np.logical_or``, ``np.logical_xor`` of scalars or arrays."""

    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        _arity(lo, node, args, 2, f"logical_{op_name.removeprefix('bit_')}")
        a, b = (_as_bool(lo, v, node) for v in _values(lo, node, args))
        return lo.binary(op_name, a, b, node)

    return handler


def _as_bool(lo: FunctionLowering, v: Value, node: ast.Call) -> Value:
    if is_array(v):
        return v if v.type.dtype == T.bool_ else lo.binary("ne", v, lo.constant(0), node)
    return lo.truth(v, node)


builtin(np.logical_and)(_logical("bit_and"))
builtin(np.logical_or)(_logical("bit_or"))
builtin(np.logical_xor)(_logical("bit_xor"))


@builtin(np.logical_not)
def _logical_not(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 1, "logical_not")
    (v,) = _values(lo, node, args)
    if is_array(v):
        return lo.tensor_unary("logical_not", _as_bool(lo, v, node), node)
    return lo.op("logical_not", lo.truth(v, node), node=node)


def _reduce(kind: str) -> Handler:
    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        if not args:
            lo.error(f"{kind}() needs an array", node)
        v = lo.value_of(args[0], node)
        if not is_array(v):
            lo.error(f"{kind}() of one value needs an array, got {v.type}", node)
        options = reduction_arguments(lo, node, ("axis", "keepdims"))
        return lo.tensor_reduce(kind, v, options["axis"], options["keepdims"], node)

    return handler


builtin(kb.sum, np.sum)(_reduce("sum"))
builtin(kb.mean, np.mean)(_reduce("mean"))
builtin(np.min, np.amin)(_reduce("min"))
builtin(np.max, np.amax)(_reduce("max"))
builtin(kb.min, np.minimum)(_fold_pairwise("min"))
builtin(kb.max, np.maximum)(_fold_pairwise("max"))
builtin(np.fmin)(_fold_pairwise("min", ignore_nan=True))
builtin(np.fmax)(_fold_pairwise("max", ignore_nan=True))
builtin(py.min)(_fold_pairwise("min", python_result=True))
builtin(py.max)(_fold_pairwise("max", python_result=True))


@builtin(kb.pow, py.pow, np.power)
def _pow(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 2, "pow")
    a, b = _values(lo, node, args)
    return lo.binary("pow", a, b, node)


@builtin(math.pow)
def _math_pow(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    """Python's math.pow: both operands converted to float, a float result."""
    _arity(lo, node, args, 2, "math.pow")
    values = _values(lo, node, args)
    if not all(isinstance(v.type, T.ScalarType) for v in values):
        lo.error(f"math.pow() needs scalars, got {', '.join(str(v.type) for v in values)}", node)
    a, b = (lo.coerce(v, T.f64, node) for v in values)
    return lo.mark_weak(lo.strong(lo.binary("pow", a, b, node)))


@builtin(kb.clamp, np.clip)
def _clamp(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 3, "clamp")
    x, low, high = _values(lo, node, args)
    return lo.strong(lo.binary("min", lo.binary("max", x, low, node), high, node))


@builtin(kb.where, np.where)
def _where(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 3, "where")
    c, a, b = _values(lo, node, args)
    if is_array(c) or is_array(a) or is_array(b):
        return lo.tensor_where(c, a, b, node)
    c = lo.truth(c, node)
    if isinstance(a.type, T.ScalarType) and isinstance(b.type, T.ScalarType):
        t, weak = T.promote(a.type, lo.is_weak(a), b.type, lo.is_weak(b))
    elif a.type == b.type:
        t, weak = a.type, False
    else:
        shaped = a.type if not isinstance(a.type, T.ScalarType) else b.type
        t, weak = shaped, False
    return lo.mark_weak(lo.op("select", c, lo.coerce(a, t, node), lo.coerce(b, t, node), node=node), weak)


def _parse_number_string(lo: FunctionLowering, node: ast.Call, arg: Any, target: Any) -> Any:
    """``float("inf")``, ``int("3")``, ``kd.f32("nan")``: a string literal converted while
    compiling, as Python converts it; any other argument unchanged."""
    if not (isinstance(arg, Static) and isinstance(arg.obj, str)):
        return arg
    convert = int if target.is_integer else bool if target == T.bool_ else float
    try:
        return Static(convert(arg.obj))
    except ValueError as exc:
        lo.error(f"{exc}", node)


@builtin(np.square)
def _square(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 1, "square")
    (v,) = _values(lo, node, args)
    return lo.binary("mul", v, v, node)


def _python_cast(target: T.ScalarType) -> Handler:
    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        if not args:
            return lo.constant({T.f64: 0.0, T.i64: 0, T.bool_: False}[target])
        _arity(lo, node, args, 1, target.name)
        args = [_parse_number_string(lo, node, args[0], target)]
        (v,) = _values(lo, node, args)
        if not isinstance(v.type, T.ScalarType):
            lo.error(python_cast_message(v.type, {T.f64: "float", T.i64: "int"}.get(target, "bool")),
                     node)
        if target == T.bool_:
            return lo.truth(v, node)
        if v.type == target and v not in lo.weak:
            # a value of its own: marking ``v`` weak would change every later use of it
            return lo.mark_weak(lo.builder.value("cast", v, type=target))
        return lo.mark_weak(lo.builder.cast(v, target))

    return handler


builtin(py.float)(_python_cast(T.f64))
builtin(py.int)(_python_cast(T.i64))
builtin(py.bool)(_python_cast(T.bool_))


@builtin(py.len)
def _len(lo: FunctionLowering, node: ast.Call, args: list) -> Any:
    _arity(lo, node, args, 1, "len")
    (x,) = args
    if isinstance(x, TupleValue):
        return lo.constant(len(x.items))
    if isinstance(x, Static) and isinstance(x.obj, (tuple, list, str)):
        return lo.constant(len(x.obj))  # a global or closure constant: len(OFFSETS)
    v = lo.value_of(x, node)
    if isinstance(v.type, T.ArrayType):
        return lo.array_dim(v, 0)
    if isinstance(v.type, T.VectorType):
        return lo.constant(v.type.size)
    lo.error(f"len() of a value of type {v.type}", node)


def _atomic(kind: str) -> Handler:
    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        if len(args) == 2 and isinstance(node.args[0], ast.Subscript):  # Taichi's spelling
            element = node.args[0]
            lo.error(f"kd.atomic_{kind}() takes the array and the index apart: write "
                     f"kd.atomic_{kind}({ast.unparse(element.value)}, "
                     f"{ast.unparse(element.slice)}, value)", node)
        _arity(lo, node, args, 3, f"atomic_{kind}")
        array = lo.value_of(args[0], node)
        if not isinstance(array.type, T.ArrayType):
            lo.error(f"atomic_{kind}() needs an array first, got {array.type}", node)
        indices = lo.array_indices(array, node.args[1], node)
        value = lo.coerce(lo.value_of(args[2], node), array.type.dtype, node)
        return lo.op("atomic_rmw", array, *indices, value, kind=kind, implicit=False, node=node)

    return handler


for _kind in ("add", "sub", "min", "max"):
    builtin(getattr(kb, f"atomic_{_kind}"))(_atomic(_kind))


@builtin(py.range, kb.prange, kb.ndrange)
def _range_outside_for(lo: FunctionLowering, node: ast.Call, args: list) -> Any:
    lo.error("range(), kd.prange() and kd.ndrange() may only be iterated by a for loop", node)


def _construct(lo: FunctionLowering, node: ast.Call, t: Any, args: list) -> Value:
    values = _values(lo, node, [leaf for a in args for leaf in flatten(a)])  # kd.vec3([x, y, z])
    if len(values) == 1 and isinstance(values[0].type, T.ScalarType):
        return lo.op("splat", lo.coerce(values[0], t.element, node), type=t)
    if len(values) == 1 and isinstance(values[0].type, (T.VectorType, T.MatrixType)):
        return lo.coerce(values[0], t, node)
    scalars: list[Value] = []
    for v in values:
        if isinstance(v.type, T.ScalarType):
            scalars.append(lo.coerce(v, t.element, node))
        elif isinstance(v.type, T.VectorType):
            scalars.extend(
                lo.coerce(lo.op("extract", v, index=k), t.element, node) for k in range(v.type.size)
            )
        else:
            lo.error(f"cannot build {t} from a value of type {v.type}", node)
    if len(scalars) != t.count:
        lo.error(f"{t} takes {t.count} components or one value, got {len(scalars)}", node)
    return lo.op("make_vector", *scalars, type=t)


_REDUCERS = (kb.sum, kb.mean, kb.min, kb.max, np.sum, np.mean, np.min, np.max, np.amin, np.amax,
             searching.argmin, searching.argmax, np.argmin, np.argmax)
# builtins whose handlers read the call's keyword arguments themselves (kd.cumsum's
# exclusive=, kd.searchsorted's side=, ...)
KEYWORD_BUILTINS: list[Any] = [py.print, np.round, np.around]

# --- new arrays ----------------------------------------------------------------------

_NUMPY_ALLOCATORS: dict[Any, str] = {
    np.zeros: "zeros", np.ones: "ones", np.empty: "empty", np.full: "full",
    np.zeros_like: "zeros_like", np.ones_like: "ones_like", np.empty_like: "empty_like",
    np.full_like: "full_like",
}
# kdsl's own allocators (kdsl/runtime/arrays.py) carry their kind in ``__kdsl_allocator__``
_DEFAULT_DTYPE = {"numpy": T.f64, "kdsl": T.f32}


def _allocator_kind(fn: Any) -> tuple[str, Any] | None:
    """``("zeros", default dtype)`` for ``kd.zeros``/``np.zeros`` and friends (``"zeros_like"``
    and so on for the ``_like`` forms), None for anything else."""
    mark = getattr(fn, "__kdsl_allocator__", None)
    if isinstance(mark, str):
        return mark, _DEFAULT_DTYPE["kdsl"]
    try:
        kind = _NUMPY_ALLOCATORS.get(fn)
    except TypeError:  # unhashable
        return None
    return None if kind is None else (kind, _DEFAULT_DTYPE["numpy"])


def _allocate(lo: FunctionLowering, node: ast.Call) -> Value:
    """``kd.zeros(shape, dtype)`` and friends: a new array owned by the call."""
    fn = lo.expr(node.func).obj
    if any(k.arg is None for k in node.keywords):
        lo.error("**kwargs are not supported in kernel calls", node)
    keywords: dict[str, ast.expr] = {str(k.arg): k.value for k in node.keywords}
    unknown = set(keywords) - {"dtype", "device", "fill_value", "shape"}
    if unknown:
        lo.error(f"unsupported keyword argument(s) {sorted(unknown)}", node)
    device = keywords.pop("device", None)
    if device is not None:
        d = lo.expr(device)
        if not (isinstance(d, Static) and d.obj == "cpu"):
            lo.error("arrays made in a kernel live on the kernel's device; only 'cpu' here", node)
    positional = list(node.args)
    kind, default = _allocator_kind(fn) or ("", None)
    if kind.endswith("_like"):
        fill = kind.removesuffix("_like")
        fill_value = None
        if fill == "full":  # np.full_like(a, fill_value, dtype=None)
            if len(positional) == 3 and "dtype" not in keywords:
                keywords["dtype"] = positional.pop()
            if len(positional) == 2 and "fill_value" not in keywords:
                keywords["fill_value"] = positional.pop()
            if "fill_value" not in keywords:
                lo.error("full_like() needs an array and a fill value", node)
            fill_value = lo.value(keywords.pop("fill_value"))
        if len(positional) != 1:
            lo.error(f"{kind}() takes one array", node)
        like = lo.value(positional[0])
        if not isinstance(like.type, T.ArrayType):
            lo.error(f"zeros_like() needs an array, got {like.type}", node)
        dims = [lo.array_dim(like, k) for k in range(like.type.ndim)]
        dtype: Any = like.type.dtype
        if "dtype" in keywords:
            dtype = _dtype(lo, keywords.pop("dtype"), node)
        return _new_array(lo, node, dims, dtype, fill, fill_value)
    fill = kind
    names = ["shape", "fill_value", "dtype"] if fill == "full" else ["shape", "dtype"]
    given = dict(zip(names, positional))
    for name, value in keywords.items():
        if name in given:
            lo.error(f"argument '{name}' given twice", node)
        given[name] = value
    if "shape" not in given or (fill == "full" and "fill_value" not in given):
        lo.error(f"{fill}() needs a shape" + (" and a fill value" if fill == "full" else ""), node)
    shape = lo.expr(given["shape"])
    items = list(shape.items) if isinstance(shape, TupleValue) else [shape]
    dims = []
    for item in items:
        v = lo.value_of(item, given["shape"])
        if not isinstance(v.type, T.ScalarType) or v.type.is_float:
            lo.error(f"array sizes must be integers, got {v.type}", node)
        dims.append(lo.builder.cast(v, T.i64))
    dtype = _dtype(lo, given["dtype"], node) if "dtype" in given else default
    fill_value = lo.value(given["fill_value"]) if fill == "full" else None
    return _new_array(lo, node, dims, dtype, fill, fill_value)


def _dtype(lo: FunctionLowering, node: ast.expr, call: ast.Call) -> Any:
    d = lo.expr(node)
    try:
        return T.as_element_type(d.obj if isinstance(d, Static) else None)
    except TypeError:
        lo.error("dtype must be a kdsl or NumPy type", call)


def _new_array(lo: FunctionLowering, node: ast.Call, dims: list[Value], dtype: Any, fill: str,
               fill_value: Value | None) -> Value:
    if not dims:
        lo.error("arrays made in kernels need at least one axis", node)
    operands = list(dims)
    if fill_value is not None:
        if not isinstance(fill_value.type, T.ScalarType):
            lo.error(f"the fill value must be a scalar, got {fill_value.type}", node)
        if isinstance(dtype, T.ScalarType) and dtype.is_integer and fill_value.type.is_integer:
            fill_value = lo.coerce(fill_value, dtype, node)  # kd.full(n, 300, kd.u8): NumPy's OverflowError
        operands.append(fill_value)
    last = lo.builder.known_constants.get(dims[-1])  # kd.zeros((n, 3)): a fixed last axis
    fixed = last if type(last) is int and last in T.FIXED_LAST_AXIS_SIZES else None
    t = T.ArrayType(dtype, len(dims)).specialised(True, fixed)
    return lo.op("array_new", *operands, type=t, fill=fill, node=node)


_ARRAY_METHODS = {"sum": kb.sum, "mean": kb.mean, "min": kb.min, "max": kb.max,
                  "argmin": searching.argmin, "argmax": searching.argmax}
"""NumPy's reduction methods: ``a.sum(axis=0)`` is ``kd.sum(a, axis=0)``."""


def _copy(lo: FunctionLowering, node: ast.Call, array: Value, dtype: Any = None) -> Value:
    """``a.copy()``, ``np.copy(a)``, ``a.astype(dtype)``: a new C-contiguous array of
    ``a``'s elements (converted to ``dtype``, as NumPy converts them)."""
    dims = [lo.array_dim(array, k) for k in range(array.type.ndim)]
    new = _new_array(lo, node, dims, dtype or array.type.dtype, "empty", None)
    lo.tensor_assign(new, array, node)
    return new


@builtin(np.copy)
def _numpy_copy(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 1, "copy")
    (v,) = _values(lo, node, args)
    if not is_array(v):
        return v  # a scalar, vector or matrix is a value already
    return _copy(lo, node, v)


@builtin(py.divmod)
def _divmod(lo: FunctionLowering, node: ast.Call, args: list) -> TupleValue:
    _arity(lo, node, args, 2, "divmod")
    a, b = _values(lo, node, args)
    return TupleValue((lo.binary("floordiv", a, b, node), lo.binary("mod", a, b, node)))


def _array_method(lo: FunctionLowering, node: ast.Call) -> Any:
    """``a.sum(...)`` and the other reduction methods of an array, ``a.copy()`` (or the
    method of that name of a vector or matrix), or None where the base is a module or
    type."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in (*_ARRAY_METHODS, "copy",
                                                                "astype", "cumsum", "fill"):
        return None
    base = lo.expr(func.value)
    if isinstance(base, (Static, TupleValue)):
        return None  # kd.sum(...), np.max(...): evaluated again, with no side effects
    if func.attr == "fill" and is_array(base):  # a.fill(v) is a[...] = v
        if len(node.args) != 1 or node.keywords:
            lo.error("a.fill() takes one value", node)
        target = ast.Subscript(func.value, ast.Constant(Ellipsis), ast.Store())
        lo.stmt(ast.fix_missing_locations(ast.copy_location(
            ast.Assign([ast.copy_location(target, node)], node.args[0]), node)))
        return Static(None)
    if func.attr == "cumsum" and is_array(base):  # a.cumsum(axis) is np.cumsum(a, axis)
        axis = [ast.keyword("axis", a) for a in node.args]
        call = ast.copy_location(ast.Call(func.value, [func.value], [*axis, *node.keywords]),
                                 node)
        return BUILTINS[np.cumsum](lo, call, [base])
    if func.attr == "copy" and is_array(base):
        if node.args or node.keywords:
            lo.error("a.copy() takes no arguments in kernels", node)
        return _copy(lo, node, base)
    if func.attr == "astype" and is_array(base):
        if len(node.args) != 1 or node.keywords:
            lo.error("a.astype() takes one argument (the dtype) in kernels", node)
        return _copy(lo, node, base, _dtype(lo, node.args[0], node))
    if is_array(base):  # lowered as the call kd.sum(a, axis=...): its handler reads node
        if len(node.args) > 1:
            lo.error(f"a.{func.attr}() takes one positional argument (axis), "
                     f"got {len(node.args)}", node)
        axis = [ast.keyword("axis", a) for a in node.args]
        call = ast.copy_location(ast.Call(func.value, [func.value], [*axis, *node.keywords]),
                                 node)
        return BUILTINS[_ARRAY_METHODS[func.attr]](lo, call, [base])
    v = lo.value_of(base, node)
    method = lo.vector_method(v, func.attr)
    if method is None:
        lo.error(f"a value of type {v.type} has no method '{func.attr}' in kernels", node)
    return call_method(lo, node, method, [lo.expr(a) for a in node.args])


def _bound_arguments(lo: FunctionLowering, node: ast.Call, fn: Any) -> list[Any]:
    """The arguments of a call of a ``@kd.func`` in the order of its parameters, as Python
    binds them: keywords matched by name, missing ones taking the func's default values
    (compile-time constants, as the func's globals are)."""
    import inspect

    if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords):
        lo.error("*args and **kwargs are not supported in kernel calls", node)
    args = [lo.expr(a) for a in node.args]
    keywords = {str(k.arg): lo.expr(k.value) for k in node.keywords}
    signature = inspect.signature(fn.py_function)
    try:
        bound = signature.bind(*args, **keywords)
    except TypeError as exc:
        count = len(signature.parameters)
        lo.error(f"{fn.py_function.__name__}() takes {count} argument{'s' if count != 1 else ''}"
                 f", got {len(args) + len(keywords)}: {exc}", node)
    given = set(bound.arguments)
    bound.apply_defaults()
    return [value if name in given else Static(value) for name, value in bound.arguments.items()]


def lower_call(lo: FunctionLowering, node: ast.Call) -> Any:
    """Lowers ``f(args)``: a builtin, a cast or constructor, or a ``@kd.func``."""
    method = _array_method(lo, node)
    if method is not None:
        return method
    callee = lo.expr(node.func)
    if not isinstance(callee, Static):
        lo.error("only builtins, types and @kd.func functions can be called in kernels", node)
    fn = callee.obj
    if isinstance(fn, VectorMethod):  # v.norm(), m.trace()
        return call_method(lo, node, fn, [lo.expr(a) for a in node.args])
    if _allocator_kind(fn) is not None:
        return _allocate(lo, node)
    if any(fn is r for r in (*_REDUCERS, *KEYWORD_BUILTINS)):  # reductions take axis=, ...
        args = [lo.expr(a) for a in node.args]
        return BUILTINS[fn](lo, node, args)
    if getattr(fn, "__kdsl_func__", False):
        return lo.call_func(fn, _bound_arguments(lo, node, fn), node)
    if node.keywords:
        lo.error("keyword arguments are not supported in kernel calls", node)
    args = [lo.expr(a) for a in node.args]
    if any(isinstance(a, ast.Starred) for a in node.args):
        lo.error("*args in calls are not supported in kernels", node)
    if isinstance(fn, type) and issubclass(fn, np.generic):  # np.float32(x), as in Numba
        try:
            fn = T.scalar_from_numpy(np.dtype(fn))
        except TypeError as exc:
            lo.error(str(exc), node)
    if isinstance(fn, T.ScalarType):
        _arity(lo, node, args, 1, fn.name)
        v = lo.value_of(_parse_number_string(lo, node, args[0], fn), node)
        if not isinstance(v.type, T.ScalarType):
            lo.error(f"cannot cast a value of type {v.type} to {fn}", node)
        literal = integer_literal(node.args[0])  # kd.u8(300); a value of any other kind wraps
        if fn.is_integer and literal is not None:
            info = np.iinfo(fn.numpy_dtype)
            if not info.min <= literal <= info.max:
                lo.error(f"{literal} does not fit in {fn} [{info.min}, {info.max}]", node)
        return lo.strong(lo.builder.cast(v, fn))
    if isinstance(fn, (T.VectorType, T.MatrixType)):
        return _construct(lo, node, fn, args)
    try:
        handler = BUILTINS.get(fn)
    except TypeError:
        handler = None
    if handler is not None:
        return handler(lo, node, args)
    if getattr(fn, "__kdsl_func__", False):
        return lo.call_func(fn, args, node)
    if getattr(fn, "__kdsl_kernel__", False):
        lo.error(f"kernel '{fn.__name__}' cannot be called from a kernel; make it a @kd.func", node)
    name = getattr(fn, "__name__", repr(fn))
    module = getattr(fn, "__module__", None) or ""
    if module.split(".")[0] in ("numpy", "builtins", "math", "kdsl") or module == "" or isinstance(
        fn, type
    ):
        prefix = {"numpy": "np.", "math": "math.", "kdsl": "kd."}.get(module.split(".")[0], "")
        written = ast.unparse(node.func) if "." in ast.unparse(node.func) else f"{prefix}{name}"
        lo.error(f"'{written}' is not supported in kernels", node)
    lo.error(f"'{name}' cannot be called in a kernel: decorate it with @kd.func", node)


# these register their builtins (kd.argmin, kd.argmax; kd.random, kd.randn, kd.randint)
from kdsl.frontend import arg_extremes, random_draws  # noqa: E402, F401
from kdsl.frontend.matrix_calls import call_method, python_cast_message  # noqa: E402
from kdsl.frontend.vectors import flatten  # noqa: E402


@builtin(kb.stop_gradient)
def _stop_gradient(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _arity(lo, node, args, 1, "stop_gradient")
    (v,) = _values(lo, node, args)
    if is_array(v):
        return lo.tensor_unary("stop_gradient", v, node)  # type: ignore[attr-defined]
    result = lo.op("stop_gradient", v, node=node)
    return lo.mark_weak(result, True) if lo.is_weak(v) else lo.strong(result)
# kd.cumsum & co., round, math.radians & co., kd.dot & co., print
from kdsl.frontend import (  # noqa: E402, F401
    angle_calls,
    primitive_calls,
    print_calls,
    rounding_calls,
    vector_calls,
)

"""The op registry: every IR operation is declared once here.

An entry gives the op's traits, its result-type rule (used by the builder and checked
by the verifier), its effects on the memory of each array operand and, where it has
them, its constant folder and derivative rules. Codegen and passes look ops up here
(passes ask about effects through ``kdsl.ir.effects``); adding an op is one entry plus
its lowering.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.ir.math_builtins import MATH_FUNCTIONS, Result
from kdsl.ir.structured import FOR_BOUNDS
from kdsl.records import dataclass


class Trait(enum.Flag):
    NONE = 0
    PURE = enum.auto()  # no effects and reads no memory: removable when unused, CSE-able
    COMMUTATIVE = enum.auto()
    TERMINATOR = enum.auto()
    SIDE_EFFECT = enum.auto()  # an effect beyond memory: output, an error, leaving the function
    ELEMENTWISE = enum.auto()  # applies per component to vectors and matrices
    # operand 0 is an array, one element of it is accessed at the indices that follow,
    # and the value written (when the op writes) is the last operand
    ELEMENT_ACCESS = enum.auto()


class Memory(enum.Flag):
    """What an op does to the memory of one array operand (or, ALLOCATE, its result)."""

    NONE = 0
    READ = enum.auto()
    WRITE = enum.auto()
    FREE = enum.auto()
    ALIAS = enum.auto()  # the result refers to this operand's memory (a view)
    ALLOCATE = enum.auto()  # the result is newly allocated memory


TypeRule = Callable[[Sequence[Any], dict], list]
Folder = Callable[[Sequence[Any], dict, Any], Any]
# Derivative rules, filled in by the automatic differentiation package: the registry
# only holds them, so that each op's rules sit with its other facts.
DerivativeRule = Callable[..., Any]


@dataclass(frozen=True)
class OpDef:
    """How one op is typed, what it may do, and how it folds on constants."""

    name: str
    traits: Trait
    result_types: TypeRule
    fold: Folder | None = None
    doc: str = ""
    # effect on each array operand by position; the last entry also covers every operand
    # after it (operands that are not arrays are never affected)
    memory: tuple[Memory, ...] = ()
    result_memory: Memory = Memory.NONE
    adjoint: DerivativeRule | None = None  # reverse mode
    tangent: DerivativeRule | None = None  # forward mode

    def has(self, trait: Trait) -> bool:
        return bool(self.traits & trait)

    def operand_memory(self, position: int) -> Memory:
        """The effect on the array operand at ``position``."""
        if not self.memory:
            return Memory.NONE
        return self.memory[min(position, len(self.memory) - 1)]


REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    assert op.name not in REGISTRY, op.name
    REGISTRY[op.name] = op
    return op


def lookup(name: str) -> OpDef:
    return REGISTRY[name]


def set_derivative_rules(
    name: str, adjoint: DerivativeRule | None = None, tangent: DerivativeRule | None = None
) -> None:
    """Attaches the reverse-mode (adjoint) and forward-mode (tangent) rules of op ``name``;
    a rule left out keeps the one already set."""
    op = REGISTRY[name]
    REGISTRY[name] = replace(
        op, adjoint=adjoint if adjoint is not None else op.adjoint,
        tangent=tangent if tangent is not None else op.tangent,
    )


class OpTypeError(TypeError):
    """Raised by a type rule; the frontend turns it into a located CompileError."""


# --- type rules ---------------------------------------------------------------------


def _same_as_operands(types: Sequence[Any], attrs: dict) -> list:
    first = types[0]
    for t in types[1:]:
        if t != first:
            raise OpTypeError(f"operands differ in type: {first} and {t}")
    return [first]


def _to_bool(types: Sequence[Any], attrs: dict) -> list:
    _same_as_operands(types, attrs)
    if not isinstance(types[0], T.ScalarType):
        raise OpTypeError(f"comparison needs scalars, got {types[0]}")
    return [T.bool_]


def _to_bool_elementwise(types: Sequence[Any], attrs: dict) -> list:
    (t,) = _same_as_operands(types, attrs)
    return [T.with_element_scalar(t, T.bool_)]


def _from_attr(key: str) -> TypeRule:
    return lambda types, attrs: [attrs[key]]


def _from_attr_list(key: str) -> TypeRule:
    return lambda types, attrs: list(attrs[key])


def _none(types: Sequence[Any], attrs: dict) -> list:
    return []


def _element_of_first(types: Sequence[Any], attrs: dict) -> list:
    t = types[0]
    if isinstance(t, T.ArrayType):
        return [t.dtype]
    if isinstance(t, (T.VectorType, T.MatrixType)):
        return [t.element]
    raise OpTypeError(f"{t} has no elements")


def _select(types: Sequence[Any], attrs: dict) -> list:
    if types[0] != T.bool_:
        raise OpTypeError(f"select needs a bool condition, got {types[0]}")
    return _same_as_operands(types[1:], attrs)


def _loop_carried(skip: Callable[[dict], int]) -> TypeRule:
    return lambda types, attrs: list(types[skip(attrs):])


def _matmul(types: Sequence[Any], attrs: dict) -> list:
    a, b = types
    if not isinstance(a, T.MatrixType):
        raise OpTypeError(f"@ needs a matrix on the left, got {a}")
    if a.element != T.element_scalar(b):
        raise OpTypeError(f"@ needs matching element types, got {a} and {b}")
    if isinstance(b, T.VectorType):
        if b.size != a.cols:
            raise OpTypeError(f"@ of {a} with {b}: sizes differ")
        return [T.vector_type(a.element, a.rows)]
    if isinstance(b, T.MatrixType):
        if b.rows != a.cols:
            raise OpTypeError(f"@ of {a} with {b}: inner sizes differ")
        return [T.matrix_type(a.element, a.rows, b.cols)]
    raise OpTypeError(f"@ needs a vector or matrix on the right, got {b}")


def _transpose(types: Sequence[Any], attrs: dict) -> list:
    m = types[0]
    if not isinstance(m, T.MatrixType):
        raise OpTypeError(f"transpose needs a matrix, got {m}")
    return [T.matrix_type(m.element, m.cols, m.rows)]


def _outer(types: Sequence[Any], attrs: dict) -> list:
    a, b = types
    if not (isinstance(a, T.VectorType) and isinstance(b, T.VectorType)) or a.element != b.element:
        raise OpTypeError(f"outer needs two vectors of one element type, got {a} and {b}")
    return [T.matrix_type(a.element, a.size, b.size)]


def _cross(types: Sequence[Any], attrs: dict) -> list:
    _same_as_operands(types, attrs)
    if not (isinstance(types[0], T.VectorType) and types[0].size == 3):
        raise OpTypeError(f"cross needs two 3-vectors, got {types[0]}")
    return [types[0]]


def _dot(types: Sequence[Any], attrs: dict) -> list:
    _same_as_operands(types, attrs)
    if not isinstance(types[0], T.VectorType):
        raise OpTypeError(f"dot needs two vectors, got {types[0]}")
    return [types[0].element]


# --- folders ------------------------------------------------------------------------


def _np_value(value: Any, t: T.ScalarType) -> Any:
    return t.numpy_dtype.type(value)


def _python_value(value: Any, t: T.ScalarType) -> Any:
    if t.is_bool:
        return bool(value)
    if t.is_integer:
        return int(value)
    return float(value)


def _fold_numpy(fn: Callable[..., Any]) -> Folder:
    """Folds a scalar op by running it on NumPy scalars of the operands' exact type."""

    def fold(values: Sequence[Any], attrs: dict, result_type: Any) -> Any:
        if not isinstance(result_type, T.ScalarType):
            return None
        operand_type = attrs.get("_operand_type", result_type)
        with np.errstate(all="ignore"):
            out = fn(*[_np_value(v, operand_type) for v in values])
        return _python_value(np.asarray(out).astype(result_type.numpy_dtype)[()], result_type)

    return fold


def _fold_guarded(fn: Callable[..., Any]) -> Folder:
    inner = _fold_numpy(fn)

    def fold(values: Sequence[Any], attrs: dict, result_type: Any) -> Any:
        if isinstance(result_type, T.ScalarType) and not result_type.is_float and values[1] == 0:
            return None  # integer division by zero is decided at run time
        return inner(values, attrs, result_type)

    return fold


def _fold_cast(values: Sequence[Any], attrs: dict, result_type: Any) -> Any:
    if not isinstance(result_type, T.ScalarType):
        return None
    v = values[0]
    if result_type.is_bool:
        return bool(v)
    if result_type.is_integer and isinstance(v, float):
        if not math.isfinite(v):
            return None
        v = int(v)
    with np.errstate(all="ignore"):
        out = np.array(v).astype(result_type.numpy_dtype)[()]
    return _python_value(out, result_type)


# --- declarations -------------------------------------------------------------------

PURE = Trait.PURE
EW = Trait.PURE | Trait.ELEMENTWISE
COMM = Trait.PURE | Trait.ELEMENTWISE | Trait.COMMUTATIVE

register(OpDef("constant", PURE, _from_attr("type"), doc="a literal; attrs value, type"))

_BINARY: dict[str, tuple[Trait, Callable[..., Any]]] = {
    "add": (COMM, lambda a, b: a + b),
    "sub": (EW, lambda a, b: a - b),
    "mul": (COMM, lambda a, b: a * b),
    "div": (EW, lambda a, b: a / b),
    "floordiv": (EW, lambda a, b: a // b),
    "mod": (EW, lambda a, b: a % b),
    "pow": (EW, lambda a, b: a**b),
    "min": (COMM, np.minimum),
    "max": (COMM, np.maximum),
    "bit_and": (COMM, lambda a, b: a & b),
    "bit_or": (COMM, lambda a, b: a | b),
    "bit_xor": (COMM, lambda a, b: a ^ b),
    "shl": (EW, lambda a, b: a << b),
    "shr": (EW, lambda a, b: a >> b),
}
for _name, (_traits, _fn) in _BINARY.items():
    _folder = _fold_guarded(_fn) if _name in ("floordiv", "mod", "div") else _fold_numpy(_fn)
    register(OpDef(_name, _traits, _same_as_operands, _folder))

_COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}
COMPARISONS = tuple(_COMPARE)
for _name, _fn in _COMPARE.items():
    _cmp_fold = _fold_numpy(_fn)
    register(OpDef(
        _name, PURE, _to_bool,
        (lambda f: lambda vals, attrs, rt: f(vals, attrs, T.bool_))(_cmp_fold),
    ))

_UNARY: dict[str, Callable[..., Any]] = {
    "neg": lambda a: -a, "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "logical_not": np.logical_not, "bit_not": np.invert,
}
for _name, _fn in _UNARY.items():
    register(OpDef(_name, EW, _same_as_operands, _fold_numpy(_fn)))

# The math builtins (sqrt, erf, isnan, ...), declared in kdsl/ir/math_builtins.py.
for _math in MATH_FUNCTIONS.values():
    register(OpDef(
        _math.name, EW, _to_bool_elementwise if _math.result is Result.BOOL else _same_as_operands,
        _fold_numpy(_math.reference), doc=_math.doc,
    ))

register(OpDef("select", EW, _select, doc="select %cond, %a, %b"))
register(OpDef("cast", EW, _from_attr("type"), _fold_cast, memory=(Memory.ALIAS,),
               doc="a conversion; of an array, a view converting each element read"))
register(OpDef("bitcast", PURE, _from_attr("type"),
               doc="a scalar's bits as another scalar type of the same width"))
register(OpDef("stop_gradient", PURE, _same_as_operands,
               doc="its operand, through which no gradient flows (removed after autodiff)"))
register(OpDef("splat", PURE, _from_attr("type"), doc="a vector or matrix of one scalar"))
register(OpDef("make_vector", PURE, _from_attr("type"), doc="a vector or matrix of components"))
register(OpDef("extract", PURE, _element_of_first, doc="one component; attrs index"))
register(OpDef("insert", PURE, lambda ts, a: [ts[0]], doc="a copy with one component set"))
register(OpDef("dot", PURE, _dot))
register(OpDef("cross", PURE, _cross))
register(OpDef("matmul", PURE, _matmul))
register(OpDef("transpose", PURE, _transpose))
register(OpDef("outer", PURE, _outer))

# Arrays. Indices are i64, one per indexed axis.
READ, WRITE, NO_MEMORY = Memory.READ, Memory.WRITE, Memory.NONE
ACCESS = Trait.ELEMENT_ACCESS
register(OpDef(
    "array_new", Trait.NONE, _from_attr("type"), result_memory=Memory.ALLOCATE,
    doc="a new C-contiguous array; operands: the size of each axis, then the fill value "
        "when attrs.fill is 'full'",
))
register(OpDef("array_free", Trait.NONE, _none, memory=(Memory.FREE,),
               doc="releases an array made by array_new that nothing uses any more"))
register(OpDef("array_null", PURE, _from_attr("type"),
               doc="an array value that is never read (a return value before any return)"))
register(OpDef("array_dim", PURE, lambda ts, a: [T.i64], doc="size of axis attrs.axis"))
register(OpDef(
    "wrap_index", EW, lambda ts, a: [T.i64],
    _fold_numpy(lambda index, size: index + size if index < 0 else index),
    doc="wrap_index %index, %size: a negative index counts from the end, as in Python",
))
register(OpDef("array_load", ACCESS, _element_of_first, memory=(READ, NO_MEMORY)))
register(OpDef("array_store", ACCESS, _none, memory=(WRITE, NO_MEMORY)))
register(OpDef(
    "atomic_rmw", ACCESS, _element_of_first, memory=(READ | WRITE, NO_MEMORY),
    doc="attrs kind (add, sub, min, max), implicit; returns the old value",
))

# Whole-array (tensor) ops. Views are zero-copy; the others are lowered to loop nests
# by passes/lower_tensors.py, which fuses elementwise chains into their consumers.
register(OpDef(
    "array_view", PURE, _from_attr("type"), memory=(Memory.ALIAS, NO_MEMORY),
    doc="a view: operands array, then the runtime parts of attrs.spec (one entry per index "
        "item: ('index',), ('slice', has_start, has_stop, has_step) or ('newaxis',))",
))
register(OpDef("array_transpose", PURE, _from_attr("type"), memory=(Memory.ALIAS,),
               doc="the view with axes reversed"))
register(OpDef(
    "tensor_map", Trait.NONE, _from_attr("type"), memory=(READ,),
    doc="elementwise attrs.fn over broadcast operands (arrays and scalars), each element "
        "converted to attrs.operand_type first; read where it stands",
))
register(OpDef(
    "tensor_reduce", Trait.NONE, _from_attr("type"), memory=(READ,),
    result_memory=Memory.ALLOCATE,
    doc="attrs kind (sum, mean, min, max), axis (None or an axis), keepdims",
))
register(OpDef("tensor_assign", Trait.NONE, _none, memory=(WRITE, READ),
               doc="dest[...] = src, broadcast; with attrs accumulate ('add' or 'sub'), "
                   "dest[...] += src element by element, atomically (in parallel loops)"))
register(OpDef("tensor_matmul", Trait.NONE, _from_attr("type"), memory=(READ,),
               result_memory=Memory.ALLOCATE, doc="a @ b, 2-D by 2-D or 1-D"))
register(OpDef("gemm", Trait.NONE, _none, memory=(READ, READ, WRITE),
               doc="gemm %a, %b, %c[, %first, %count]: c[...] = a @ b (or only rows first to "
                   "first + count of c and a), 2-D arrays of one float type, c with contiguous "
                   "rows (the CPU's packed, register-blocked product)"))
register(OpDef("device_scan", Trait.NONE, _none, memory=(READ, WRITE),
               doc="device_scan %a, %out: out[i] = a[0] + ... + a[i] (attrs exclusive: up to "
                   "a[i - 1]) in out's type, 1-D arrays of one length; a CUDA device's block "
                   "scan, made only at the top level of CUDA kernels"))
register(OpDef("raise_value_error", Trait.SIDE_EFFECT, _none,
               doc="operands ok, the offending value; attrs what"))
register(OpDef("raise_shape_error", Trait.SIDE_EFFECT, _none,
               doc="operands ok, size, other size; attrs axis, what"))



def _fold_range_length(values: Sequence[Any], attrs: dict, result_type: Any) -> Any:
    start, stop, step = (int(v) for v in values)
    if step == 0:
        return None  # a ValueError, raised at run time
    return min(max((stop - start + step - (1 if step > 0 else -1)) // step, 0), 2**63 - 1)


register(OpDef("range_length", PURE, lambda ts, a: [T.i64], _fold_range_length,
               doc="len(range(start, stop, step)) of i64 operands, without overflow at "
                   "extreme bounds (at most 2**63 - 1); step != 0"))

# Structured control flow.
register(OpDef(
    "for", Trait.NONE, _loop_carried(lambda a: FOR_BOUNDS),
    doc="for (start, stop, step, *init) body(iv, *carried) -> carried; step > 0",
))
register(OpDef(
    "parallel_for", Trait.NONE, _loop_carried(lambda a: a["ndim"]),
    doc="parallel_for (*extents, *init) body(*ivs, *partials); attrs reductions",
))
register(OpDef("if", Trait.NONE, _from_attr_list("types")))
register(OpDef(
    "while", Trait.NONE, _loop_carried(lambda a: 0),
    doc="while (*init) before(*carried) -> condition; body(*carried) -> yield",
))
register(OpDef("yield", Trait.TERMINATOR, _none))
register(OpDef("condition", Trait.TERMINATOR, _none, doc="condition %cond, *carried"))
register(OpDef("return", Trait.TERMINATOR | Trait.SIDE_EFFECT, _none))
register(OpDef("call", Trait.SIDE_EFFECT, _from_attr_list("types"), memory=(READ | WRITE,),
               doc="attrs callee"))

# Effects visible to the user.
register(OpDef("print", Trait.SIDE_EFFECT, _none, doc="attrs parts: text or None per operand"))
register(OpDef("assert", Trait.SIDE_EFFECT, _none, doc="attrs message, site"))
register(OpDef("raise_index_error", Trait.SIDE_EFFECT, _none, doc="operands index, size"))

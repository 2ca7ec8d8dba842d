"""State and helpers shared by the expression and statement lowering of one function."""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import field
from typing import Any, NoReturn

import numpy as np

from kdsl import types as T
from kdsl.builtins import _SmallValue
from kdsl.errors import CompileError, LiteralOverflowError
from kdsl.frontend.captures import bound_names, is_array_object
from kdsl.frontend.scope import TypeConflict, TypeTable, VariableType
from kdsl.frontend.source import MISSING, FunctionSource
from kdsl.frontend.values import IterationSpace, Static, TupleValue
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Value
from kdsl.ir.ops import OpTypeError
from kdsl.records import dataclass


@dataclass
class LoopFrame:
    """The loop being lowered: its flag names and whether it runs in parallel."""

    break_flag: str | None
    continue_flag: str | None
    parallel: bool
    depth: int


@dataclass
class CompileContext:
    """Shared by every function lowered for one kernel specialisation."""

    debug: bool = False
    funcs: dict[Any, Function] = field(default_factory=dict)
    func_results: dict[Any, list[VariableType]] = field(default_factory=dict)
    in_progress: set[Any] = field(default_factory=set)
    sources: dict[str, str] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)
    captures: list[Any] = field(default_factory=list)  # ArrayCapture, hidden parameters
    capture_types: list[VariableType] = field(default_factory=list)
    uses_random: bool = False  # the kernel draws random numbers: it takes their stream
    target: str = "cpu"  # "cuda": calls of primitives also lower their device versions


class LoweringBase:
    """Variables, weak typing and the helpers every lowering mixin uses."""

    def __init__(
        self,
        source: FunctionSource,
        context: CompileContext,
        types: TypeTable,
        is_kernel: bool,
    ) -> None:
        self.source = source
        self.context = context
        self.types = types
        self.is_kernel = is_kernel
        self.body = Block()
        self.builder = IRBuilder(self.body)
        self.env: dict[str, Any] = {}
        self.weak: set[Value] = set()
        self.placeholders: set[Value] = set()
        self.loops: list[LoopFrame] = []
        self.parallel_depth = 0
        self.uses_return_flag = False
        self.needs_rebuild = False
        self.assumptions: list[tuple[str, VariableType]] = []
        self.loop_depth_counter = 0
        self.serial_axes: dict[int, IterationSpace] = {}  # for-nodes made for a nested ndrange
        self.return_arity: int | None = None
        self.returns_tuple = False
        self.loaded_counts: Counter[str] = Counter()
        self.local_names: set[str] = set()

    # --- errors and locations --------------------------------------------------------

    def error(self, message: str, node: ast.AST | None) -> NoReturn:
        loc = self.source.location(node) if node is not None else None
        raise CompileError(message, loc)

    def at(self, node: ast.AST) -> Any:
        return self.builder.located(self.source.location(node))

    def op(self, name: str, *operands: Value, node: ast.AST | None = None, **attrs: Any) -> Value:
        try:
            return self.builder.value(name, *operands, **attrs)
        except OpTypeError as exc:
            self.error(str(exc), node)

    # --- constants and weak values ---------------------------------------------------

    def constant(self, value: Any, type: T.ScalarType | None = None) -> Value:
        """A literal. Python numbers without a type are weak, as in NumPy 2."""
        if type is not None:
            return self.builder.constant(value, type)
        if isinstance(value, (bool, np.bool_)):
            v = self.builder.constant(bool(value), T.bool_)
        elif isinstance(value, int):
            if not -(2**63) <= value < 2**64:
                raise OverflowError(f"integer literal {value} does not fit in 64 bits")
            # a hash constant such as 0xff51afd7ed558ccd is a weak u64, as NumPy 2 takes it
            v = self.builder.constant(value, T.i64 if value < 2**63 else T.u64)
        elif isinstance(value, float):
            v = self.builder.constant(value, T.f64)
        elif isinstance(value, np.generic):
            return self.builder.constant(value.item(), T.scalar_from_numpy(value.dtype))
        else:
            raise TypeError(f"not a number: {value!r}")
        self.weak.add(v)
        return v

    def small_value_constant(self, obj: np.ndarray, node: ast.AST) -> Value:
        """A vector or matrix read from Python (``DIRECTIONS[k]`` of a global tuple of
        ``kd.vec2``) as a constant of its type."""
        try:
            element = T.scalar_from_numpy(obj.dtype)
        except (KeyError, TypeError, ValueError):
            self.error(f"a vector of {obj.dtype} cannot be used in a kernel", node)
        if obj.ndim == 1:
            t: Any = T.vector_type(element, obj.shape[0])
        else:
            t = T.matrix_type(element, obj.shape[0], obj.shape[1])
        components = [self.builder.constant(x, element) for x in obj.ravel().tolist()]
        return self.builder.create("make_vector", components, {"type": t}, result_types=[t]).result

    def is_weak(self, v: Value) -> bool:
        return v in self.weak

    def strong(self, v: Value) -> Value:
        """``v`` as a strongly typed value (a NumPy scalar rather than a Python number)."""
        if v not in self.weak:
            return v
        return self.builder.create("cast", [v], {"type": v.type}, result_types=[v.type]).result

    def mark_weak(self, v: Value, weak: bool = True) -> Value:
        if weak:
            self.weak.add(v)
        return v

    def value_of(self, x: Any, node: ast.AST) -> Value:
        """An IR value for a lowered expression, or a located error if it is not one."""
        if isinstance(x, Value):
            return x
        if isinstance(x, Static):
            obj = x.obj
            if isinstance(obj, (bool, int, float, np.generic)) and not isinstance(obj, str):
                try:
                    return self.constant(obj)
                except (OverflowError, TypeError) as exc:
                    self.error(str(exc), node)
            if isinstance(obj, _SmallValue):  # an item of a global tuple of vectors
                return self.small_value_constant(obj, node)
            if is_array_object(obj):
                self.error("kernels take arrays as arguments or read them from global and "
                           "closure variables by name; bind this one to a global name or "
                           "pass it as an argument", node)
            self.error(f"{_describe(obj)} cannot be used as a value in a kernel", node)
        if isinstance(x, TupleValue):
            self.error("a tuple cannot be used as a single value here", node)
        self.error(f"unsupported value {x!r}", node)

    def variable_type(self, v: Value) -> VariableType:
        return VariableType(v.type, self.is_weak(v))

    # --- conversions ------------------------------------------------------------------

    def zero(self, t: Any) -> Value:
        if isinstance(t, T.ScalarType):
            return self.builder.constant(0, t)
        if isinstance(t, (T.VectorType, T.MatrixType)):
            return self.builder.value("splat", self.builder.constant(0, t.element), type=t)
        if isinstance(t, T.ArrayType):
            return self.builder.value("array_null", type=t)
        raise TypeError(f"no zero of type {t}")

    def coerce(self, v: Value, t: Any, node: ast.AST | None) -> Value:
        """Converts ``v`` to ``t`` (a cast, or a splat of a scalar into a vector)."""
        if v in self.placeholders:
            return self.zero(t)
        if v.type == t:
            return v
        if isinstance(t, T.ScalarType) and isinstance(v.type, T.ScalarType):
            if node is not None and t.is_integer and v in self.weak:
                self._check_literal_fits(v, t, node)
            return self.builder.cast(v, t)
        if isinstance(t, (T.VectorType, T.MatrixType)):
            if isinstance(v.type, T.ScalarType):
                return self.builder.value("splat", self.builder.cast(v, t.element), type=t)
            if isinstance(v.type, (T.VectorType, T.MatrixType)) and v.type.shape == t.shape:
                return self.builder.cast(v, t)
        if isinstance(t, T.ArrayType) and isinstance(v.type, T.ArrayType) and t.holds(v.type):
            return self.builder.cast(v, t)  # forgets what t does not say of the layout
        self.error(f"cannot convert a value of type {v.type} to {t}", node)

    def _check_literal_fits(self, v: Value, t: T.ScalarType, node: ast.AST) -> None:
        """``x[i] = 300`` or ``s = 300`` where ``x`` or ``s`` is uint8: NumPy 2 raises
        OverflowError for a Python int the integer type cannot hold, rather than wrap it."""
        literal = self.builder.known_constants.get(v)
        info = np.iinfo(t.numpy_dtype)
        if type(literal) is int and not info.min <= literal <= info.max:
            raise LiteralOverflowError(f"Python integer {literal} out of bounds for "
                                       f"{t.numpy_dtype} (as in NumPy 2)", self.source.location(node))

    def truth(self, v: Value, node: ast.AST) -> Value:
        """Python truthiness of a scalar as a bool."""
        if v.type == T.bool_:
            return v
        if isinstance(v.type, T.ScalarType):
            return self.op("ne", v, self.builder.constant(0, v.type), node=node)
        self.error(f"a value of type {v.type} has no truth value; compare it explicitly", node)

    # --- variables ----------------------------------------------------------------------

    def assign(self, name: str, x: Any, node: ast.AST) -> None:
        if isinstance(x, (Static, TupleValue)) and not isinstance(
            getattr(x, "obj", None), (bool, int, float, np.generic)
        ):
            if name in self.types.observed or name in self.env and isinstance(self.env[name], Value):
                self.error(f"'{name}' is assigned both a value and {_describe_frontend(x)}", node)
            self.env[name] = x
            return
        v = self.value_of(x, node)
        declared = self.types.declared(name)
        if v not in self.placeholders:
            try:
                self.types.observe(name, self.variable_type(v))
            except TypeConflict as exc:
                self.error(
                    conflicting_types(name, str(exc)) + ("" if name.startswith("$")
                                                          else "; a local keeps one type"), node
                )
        if declared is not None:
            if isinstance(declared.type, T.ScalarType) != isinstance(v.type, T.ScalarType) and (
                v not in self.placeholders
            ):
                self.error(
                    conflicting_types(name, f"{declared.type} and {v.type}"), node
                )
            try:
                v = self.coerce(v, declared.type, node)
            except CompileError:
                raise
            if declared.weak:
                self.weak.add(v)
            else:
                self.weak.discard(v)
        self.env[name] = v

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.env:
            return self.env[name]
        obj = self.source.lookup(name)
        if name in self.local_names and (obj is MISSING or name in bound_names(self.source.tree)):
            # (a name only written through, as in grid[i] = v, may be a global)
            self.error(f"local '{name}' may be used before it is assigned", node)
        if obj is MISSING:
            self.error(f"name '{name}' is not defined", node)
        if isinstance(obj, (bool, int, float, np.generic)):
            self.context.constants[f"{self.source.name}.{name}"] = obj
        return Static(obj)

    def placeholder(self, name: str, t: Any | None = None) -> Value:
        """The value a local has before any assignment on this path (zero of its type)."""
        vt = VariableType(t) if t is not None else self.types.declared(name)
        if vt is not None:
            v = self.zero(vt.type)
            if vt.weak:
                self.weak.add(v)
            return v
        self.needs_rebuild = True
        v = self.builder.constant(0, T.i64)
        self.placeholders.add(v)
        return v

    def merged_type(self, name: str, values: list[Value], node: ast.AST) -> tuple[Any, bool]:
        """The one type a local has where control flow joins, from its values on each path."""
        declared = self.types.declared(name)
        if declared is not None:
            return declared.type, declared.weak
        real = [v for v in values if v not in self.placeholders]
        if not real:
            return T.i64, True
        vt = self.variable_type(real[0])
        from kdsl.frontend.scope import join

        for v in real[1:]:
            try:
                vt = join(vt, self.variable_type(v))
            except TypeConflict as exc:
                self.error(conflicting_types(name, str(exc)), node)
        return vt.type, vt.weak


def conflicting_types(name: str, types: str) -> str:
    """The message for a local given two types, naming it as the user knows it (the
    compiler's own locals, ``$result0``..., by their role)."""
    if name.startswith("$result"):
        position = int(name[len("$result"):]) + 1
        return f"the returns give conflicting types for return value {position}: {types}"
    if name.startswith("$"):
        return f"conflicting types where control flow joins: {types}"
    return f"conflicting types for local '{name}': {types}"


def _describe(obj: Any) -> str:
    name = getattr(obj, "__name__", None)
    if name:
        return f"'{name}'"
    return f"a {type(obj).__name__}"


def _describe_frontend(x: Any) -> str:
    if isinstance(x, Static):
        return _describe(x.obj)
    return "a tuple"

"""Lowering a whole kernel or func: parameters, body, returns, and type inference.

Locals' types are inferred by lowering until the assumed types agree with the types
assignments produce (usually once; a second time when a local such as ``s = 0``
later receives an f32).
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Any

from kdsl import types as T
from kdsl.errors import CompileError
from kdsl.frontend import random_draws
from kdsl.frontend.analysis import always_returns, assigned_names, scanned_once
from kdsl.frontend.annotations import annotation_of
from kdsl.frontend.captures import capture_for, free_array_names
from kdsl.frontend.dependencies import scan_dependencies
from kdsl.frontend.lowering import CompileContext
from kdsl.frontend.scope import TypeTable, VariableType
from kdsl.frontend.source import FunctionSource, read_function
from kdsl.frontend.statements import RETURN_FLAG, StatementLowering
from kdsl.frontend.values import Static, TupleValue
from kdsl.ir.core import Function, Value
from kdsl.ir.passes.drop_index_wraps import drop_index_wraps

MAX_TYPE_ROUNDS = 6


def _lowering_scan(tree: ast.FunctionDef) -> tuple[Counter[str], frozenset[str], bool]:
    """What lowering a function needs to know of its whole tree first: how often each
    name is read, its locals, and whether it returns from anywhere but its end."""
    loaded_counts = Counter(
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    )
    local_names = frozenset(assigned_names(tree.body)) | {a.arg for a in tree.args.args}
    body = tree.body
    uses_return_flag = any(
        isinstance(n, ast.Return) for s in body[:-1] for n in ast.walk(s)
    ) or (bool(body) and not isinstance(body[-1], ast.Return) and any(
        isinstance(n, ast.Return) for n in ast.walk(body[-1])
    ))
    return loaded_counts, local_names, uses_return_flag


class FunctionLowering(StatementLowering):
    """Lowers one function's AST to an IR ``Function``."""

    def __init__(
        self, source: FunctionSource, context: CompileContext, types: TypeTable, is_kernel: bool
    ) -> None:
        super().__init__(source, context, types, is_kernel)
        loaded_counts, local_names, self.uses_return_flag = scanned_once(
            source.tree, "lowering", _lowering_scan)
        self.loaded_counts = Counter(loaded_counts)
        self.local_names = set(local_names)
        self.capture_values: list[Value] = []

    def lower(self, params: list[VariableType], name: str) -> Function:
        tree = self.source.tree
        args = tree.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            self.error("kernels take plain positional parameters only", tree)
        for p, vt in zip(args.args, params):
            v = Value(vt.type, p.arg)
            self.body.args.append(v)
            self.mark_weak(v, vt.weak)
            self.env[p.arg] = v
        self.bind_captures(params[len(args.args):])
        self.builder.location = self.source.location(tree)
        if self.uses_return_flag:
            self.env[RETURN_FLAG] = self.constant(False, T.bool_)
            arity = self._return_arity()
            for k in range(arity):
                self.env[f"$result{k}"] = self.placeholder(f"$result{k}")
        self.block(tree.body)
        if self.return_arity and not always_returns(tree.body):
            kind = "kernel" if self.is_kernel else "func"
            self.error(f"{kind} '{tree.name}' returns a value on some paths but can reach its "
                       "end without one (where Python returns None); end it with a return",
                       tree.body[-1])
        results = self._collect_results(tree)
        self.builder.location = self.source.location(tree.body[-1] if tree.body else tree)
        self.builder.create("return", results)
        return Function(
            name, self.body, [v.type for v in results], self.is_kernel,
            self.source.location(tree),
            [a.arg for a in args.args] + [c.name for c in self.context.captures],
            {"returns_tuple": self.returns_tuple},
        )

    def bind_captures(self, hidden: list[VariableType]) -> None:
        """The hidden parameters: the kernel's captured arrays, bound to the free names of
        this function that refer to them, then (in a kernel that draws random numbers) the
        random stream's key and call number."""
        captures = self.context.captures
        stream = hidden[len(captures):]
        assert len(stream) in (0, random_draws.STREAM_PARAMETERS if self.is_kernel
                               else random_draws.FUNC_STREAM_PARAMETERS), "hidden parameters"
        self.capture_values = [Value(vt.type, c.name) for c, vt in zip(captures, hidden)]
        self.body.args.extend(self.capture_values)
        if stream:
            stream_values = [Value(vt.type, name) for vt, name in
                             zip(stream, ("rng_key0", "rng_key1", "rng_call"))]
            self.body.args.extend(stream_values)
            random_draws.bind_stream(self, stream_values)
        index = {c.identity: k for k, c in enumerate(captures)}
        for name, _ in free_array_names(self.source):
            k = index.get(capture_for(self.source, name).identity)
            if k is None:
                self.error(f"the global array '{name}' was not found when the kernel was "
                           "prepared; bind it before the first call", self.source.tree)
            self.env[name] = self.capture_values[k]

    def _return_arity(self) -> int:
        for n in ast.walk(self.source.tree):
            if isinstance(n, ast.Return) and n.value is not None:
                return len(n.value.elts) if isinstance(n.value, ast.Tuple) else 1
        return 0

    def _collect_results(self, tree: ast.FunctionDef) -> list[Value]:
        results = []
        k = 0
        while f"$result{k}" in self.env:
            v = self.env[f"$result{k}"]
            if v in self.placeholders:
                self.needs_rebuild = True
            results.append(v)
            k += 1
        return results

    def result_types(self) -> list[VariableType]:
        types = []
        k = 0
        while f"$result{k}" in self.env:
            v = self.env[f"$result{k}"]
            types.append(self.types.observed.get(f"$result{k}") or self.variable_type(v))
            k += 1
        return types

    def settled(self) -> bool:
        """Whether every type this lowering assumed is the type its assignments need."""
        if self.needs_rebuild:
            return False
        observed = self.types.observed
        for name, vt in self.types.assumed.items():
            if name in observed and observed[name] != vt and name not in self.types.fixed:
                return False
        for name, vt in self.assumptions:
            if observed.get(name, vt) != vt:
                return False
        return True

    # --- calls of funcs -------------------------------------------------------------

    def _lower_custom_gradient(self, fn: Any, values: list[Value],
                               result_types: list[VariableType], node: ast.Call) -> str:
        return _lower_custom_gradient_into(self, fn, values, result_types, node)

    def _lowered_func(self, fn: Any, source: Any, values: list[Value], draws: bool,
                      node: ast.Call) -> tuple[Any, list[VariableType]]:
        return _lowered_func_into(self, fn, source, values, draws, node)

    def call_func(self, fn: Any, args: list[Any], node: ast.Call) -> Any:
        source = read_function(fn.py_function)
        params = source.tree.args.args
        signature = source.tree.args
        if signature.vararg or signature.kwarg or signature.kwonlyargs or signature.posonlyargs:
            self.error(f"{source.name}() cannot be called in a kernel: a func takes plain "
                       "parameters only (no *args, **kwargs, keyword-only or positional-only "
                       "ones)", node)
        if len(args) != len(params):
            self.error(f"{source.name}() takes {len(params)} arguments, got {len(args)}", node)
        values = []
        for a, p in zip(args, params):
            v = self.value_of(a, node)
            annotation = annotation_of(source, p)
            if annotation is not None:
                if isinstance(annotation, T.ArrayType):
                    if not isinstance(v.type, T.ArrayType) or v.type.dtype != annotation.dtype or (
                        v.type.ndim != annotation.ndim
                    ):
                        hint = ""
                        if not isinstance(annotation.dtype, T.ScalarType):
                            hint = (f" (an array of {annotation.dtype} made in a kernel: "
                                    f"kd.zeros(n, kd.{annotation.dtype}))")
                        self.error(
                            f"argument '{p.arg}' of {source.name}() expects {annotation}, got "
                            f"{v.type}{hint}", node,
                        )
                else:
                    v = self.coerce(v, annotation, node)
                    self.weak.discard(v)
            values.append(v)
        draws = scan_dependencies(fn.py_function).uses_random
        function, result_types = self._lowered_func(fn, source, values, draws, node)
        attrs: dict[str, Any] = {"callee": function.name,
                                 "types": [vt.type for vt in result_types]}
        device_version = getattr(fn, "device_version", None)
        if device_version is not None and self.context.target == "cuda":
            # chosen by passes/inline_funcs.py outside parallel loops
            device_source = read_function(device_version.py_function)
            attrs["device_callee"] = self._lowered_func(device_version, device_source, values,
                                                        False, node)[0].name
        if getattr(fn, "custom_gradient", None) is not None:
            attrs["gradient"] = self._lower_custom_gradient(fn, values, result_types, node)
            attrs["arguments"] = len(values)
        stream = random_draws.func_stream(self, node) if draws else []
        op = self.builder.create(
            "call", values + self.capture_values + stream, attrs,
            result_types=[vt.type for vt in result_types],
        )
        for r, vt in zip(op.results, result_types):
            self.mark_weak(r, vt.weak)
        if not op.results:
            return Static(None)
        if len(op.results) == 1:
            return op.results[0]
        return TupleValue(tuple(op.results))


def _lowered_func_into(lowering: FunctionLowering, fn: Any, source: Any, values: list[Value],
                       draws: bool, node: ast.Call) -> tuple[Any, list[VariableType]]:
    """The IR function of func ``fn`` for these arguments (lowered on first use) and its
    results' types."""
    key = (fn, tuple(v.type for v in values), tuple(lowering.is_weak(v) for v in values))
    context = lowering.context
    if key in context.in_progress:
        lowering.error(f"recursive call of {source.name}() is not supported", node)
    if key not in context.funcs:
        context.in_progress.add(key)
        try:
            name = f"{source.name}.{len(context.funcs)}"
            params_vt = [VariableType(v.type, lowering.is_weak(v)) for v in values]
            params_vt += context.capture_types
            if draws:
                params_vt += [VariableType(T.u32)] * random_draws.FUNC_STREAM_PARAMETERS
            function, result_types = lower_function(source, params_vt, context, False, name)
        finally:
            context.in_progress.discard(key)
        context.funcs[key] = function
        context.func_results[key] = result_types
    return context.funcs[key], context.func_results[key]


def _lower_custom_gradient_into(lowering: FunctionLowering, fn: Any, values: list[Value],
                                result_types: list[VariableType], node: ast.Call) -> str:
    """Lowers ``fn``'s hand-written gradient for these argument types and the adjoint of
    its result; returns its name (differentiation calls it, see kdsl/ir/autodiff)."""
    gradient = fn.custom_gradient
    source = read_function(gradient.py_function)
    context = lowering.context
    if len(result_types) != 1:
        lowering.error(f"{fn.__name__}() has a hand-written gradient, so it must return one value",
                       node)
    params = [VariableType(v.type, lowering.is_weak(v)) for v in values]
    params.append(VariableType(result_types[0].type, False))
    if len(source.tree.args.args) != len(params):
        lowering.error(f"the gradient of {fn.__name__}() takes its {len(values)} arguments and the "
                       f"adjoint of its result, {len(params)} parameters", node)
    key = (gradient, tuple(p.type for p in params), tuple(p.weak for p in params))
    if key not in context.funcs:
        name = f"{source.name}.{len(context.funcs)}"
        function, results = lower_function(source, params + context.capture_types, context,
                                           False, name)
        returned = [r.type for r in results]
        expected = [v.type for v in values]
        if len(returned) != len(expected):
            lowering.error(f"the gradient of {fn.__name__}() must return one adjoint per argument "
                           f"({len(expected)}), it returns {len(returned)}", node)
        context.funcs[key] = function
        context.func_results[key] = results
    return context.funcs[key].name


def lower_function(
    source: FunctionSource,
    params: list[VariableType],
    context: CompileContext,
    is_kernel: bool,
    name: str,
) -> tuple[Function, list[VariableType]]:
    """Lowers ``source`` for these parameter types, iterating until local types settle."""
    context.sources[source.name] = source.text
    assumed: dict[str, VariableType] = {}
    for _ in range(MAX_TYPE_ROUNDS):
        types = TypeTable(assumed)
        lowering = FunctionLowering(source, context, types, is_kernel)
        try:
            function = lowering.lower(params, name)
        except CompileError:
            # a local first assigned in a loop and read after it (a vector found in a
            # `while True:`) stands for a placeholder number until its type is known:
            # an error it causes is retried once the round has learnt a new type
            if not lowering.needs_rebuild or not _learnt_types(assumed, types.observed):
                raise
            assumed = dict(types.observed)
            continue
        if lowering.settled():
            drop_index_wraps(function.body)
            return function, lowering.result_types()
        assumed = dict(types.observed)
    raise CompileError(
        f"the types of the locals of {source.name}() do not settle", source.location(source.tree)
    )


def _learnt_types(assumed: dict[str, VariableType], observed: dict[str, VariableType]) -> bool:
    """Whether a round observed a type its locals were not assumed to have."""
    return any(assumed.get(name) != vt for name, vt in observed.items())


def lower_kernel(
    fn: Any, params: list[VariableType], debug: bool = False, target: str = "cpu"
) -> tuple[Function, CompileContext, list[VariableType]]:
    source = read_function(fn)
    context = CompileContext(debug=debug, target=target)
    deps = scan_dependencies(fn)
    context.captures = deps.arrays
    context.uses_random = deps.uses_random
    stream = random_draws.STREAM_PARAMETERS if deps.uses_random else 0
    context.capture_types = params[len(params) - stream - len(context.captures):len(params) - stream]
    function, results = lower_function(source, params, context, True, source.name)
    return function, context, results

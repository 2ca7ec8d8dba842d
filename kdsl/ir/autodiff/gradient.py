"""The gradient of a kernel as a new kernel: the primal arguments plus one adjoint array
per differentiated array argument; it returns the kernel's value, the adjoints of the
differentiated scalar arguments and the peak bytes kept for the reverse sweep, and adds
the adjoints of the arrays into theirs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field

from kdsl import types as T
from kdsl.ir.analysis import definitions
from kdsl.ir.autodiff import rules  # noqa: F401  (attaches the rules to the registry)
from kdsl.ir.autodiff.activity import is_float, needed_values, routed_values, varied_values
from kdsl.ir.autodiff.deferral import Deferral
from kdsl.ir.autodiff.emitter import located_error
from kdsl.ir.autodiff.memory import (
    add_components,
    array_bases,
    component_adjoint,
    stateful_arrays,
    written_arrays,
    zeros_like_array,
)
from kdsl.ir.autodiff.reverse import ReverseSweep, check_differentiable
from kdsl.ir.autodiff.tape_bytes import count_tape_bytes
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Module, Value
from kdsl.ir.passes import inline_funcs
from kdsl.records import dataclass


@dataclass(frozen=True)
class GradientSpec:
    """Which arguments a gradient is taken with respect to."""

    argnums: tuple[int, ...]
    unit_axes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """Axes of size 1 of differentiated array arguments, by position (at run time: the
    kernel compiled for them is called only with such arrays)."""


def adjoint_name(name: str) -> str:
    return f"d_{name}"


@dataclass
class ReverseKernel:
    """The body of a reverse-mode kernel, its return not yet emitted."""

    body: Block
    value: Value | None  # the kernel's value (None when not asked for)
    grads: list[Value]  # adjoints of the differentiated scalar arguments
    saved_bytes: Value
    adjoint_names: list[str]


Seed = Callable[[ReverseSweep, Value], Value]
"""The adjoint the kernel's returned value starts with (given the sweep and the value)."""
Tidy = Callable[[Block, list[Value], list[Value]], None]
"""A rewrite of the body given the kernel's array arguments and the values it returns."""


def build_reverse(fn: Function, argnums: tuple[int, ...], extra_args: list[Value],
                  result: Value | None, seed: Seed, keep_state: bool,
                  want_value: bool, tidy: Tidy | None = None,
                  unit_axes: dict[int, tuple[int, ...]] | None = None) -> ReverseKernel:
    """The forward and reverse sweeps of ``fn`` with respect to the arguments at
    ``argnums``, shared by the gradient and the vector-Jacobian product. The new body's
    arguments are ``fn``'s, one adjoint array per differentiated array, then
    ``extra_args``. ``keep_state``: the arrays the kernel updates in place are left as
    the call found them; ``want_value``: the kernel's value is computed (sums deferred
    to the way back are otherwise not rebuilt); ``tidy`` rewrites the body before its
    kept bytes are counted."""
    ret = fn.body.ops[-1]
    roots = [fn.args[k] for k in argnums]
    varied, varied_arrays = varied_values(fn.body, roots)
    stateful = stateful_arrays(fn.body, varied_arrays)
    check_differentiable(fn.body, varied, varied_arrays, stateful)
    adjoint_arrays = {
        a: Value(a.type.of_any_padding(), adjoint_name(fn.arg_names[k]))
        for k, a in zip(argnums, roots) if isinstance(a.type, T.ArrayType)
    }
    body = Block(list(fn.args) + list(adjoint_arrays.values()) + extra_args)
    builder = IRBuilder(body)
    sweep = ReverseSweep(builder, varied, varied_arrays, adjoint_arrays, needed_values(fn.body, varied))
    sweep.routed = routed_values(fn.body)
    sweep.definitions = definitions(fn.body)
    sweep.unit_axes = {fn.args[k]: axes for k, axes in (unit_axes or {}).items()}
    sweep.stateful = stateful
    sweep.bases = array_bases(fn.body)
    sweep.deferred = Deferral(fn.body, varied, sweep.needed, stateful, sweep.bases)
    for a in fn.args:  # arguments that receive values that vary: adjoints of their own
        if a in varied_arrays and a not in adjoint_arrays:
            adjoint_arrays[a] = zeros_like_array(sweep, a)
    written = written_arrays(fn.body)
    for a in adjoint_arrays:
        if isinstance(a.type, T.ArrayType) and isinstance(a.type.dtype, T.VectorType) and (
                a not in written):
            sweep.component_adjoints[a] = component_adjoint(sweep, a)
    m: dict[Value, Value] = {a: a for a in fn.args}
    ops = fn.body.ops
    entry_state = sweep.take_snapshots([a for a in fn.args if a in stateful], m) if keep_state else {}
    tapes = sweep.forward(ops, m, recompute=False)
    builder.location = ret.location
    if result is not None and result in varied:
        sweep.adj[result] = seed(sweep, result)
    sweep.reverse(ops, m, tapes)
    if want_value:
        sweep.emit_deferred(ops, m)
    for a, components in sweep.component_adjoints.items():
        add_components(sweep, components, adjoint_arrays[a])
    builder.location = ret.location
    value = m.get(result, result) if want_value and result is not None else None
    if keep_state:
        sweep.restore_snapshots(entry_state, m)
    grads = [sweep.adjoint_or_zero(a) for a in roots if not isinstance(a.type, T.ArrayType)]
    if tidy is not None:
        tidy(body, [a for a in fn.args if isinstance(a.type, T.ArrayType)],
             grads + ([value] if value is not None else []))
    made_arrays = {op.result for op in body.walk() if op.name == "array_new"}
    saved_bytes = count_tape_bytes(body, sweep.tape_arrays & made_arrays)
    names = [adjoint_name(fn.arg_names[k]) for k in argnums
             if isinstance(fn.args[k].type, T.ArrayType)]
    return ReverseKernel(body, value, grads, saved_bytes, names)


def differentiate(module: Module, spec: GradientSpec) -> None:
    """Replaces ``module.kernel`` by its gradient kernel."""
    fn = module.kernel
    ret = fn.body.ops[-1]
    if len(ret.operands) != 1 or fn.attrs.get("returns_tuple") or not (
            isinstance(ret.operands[0].type, T.ScalarType) and is_float(ret.operands[0].type)):
        raise located_error(
            f"kd.grad needs a kernel that returns one floating-point scalar; {fn.name} returns "
            + (", ".join(str(v.type) for v in ret.operands) or "nothing"), fn.location)
    made = build_reverse(fn, spec.argnums, [], ret.operands[0],
                         lambda sweep, result: sweep.const(1.0, result.type),
                         keep_state=True, want_value=True, unit_axes=spec.unit_axes)
    assert made.value is not None
    builder = IRBuilder(made.body)
    builder.location = ret.location
    builder.create("return", [made.value, *made.grads, made.saved_bytes])
    module.kernel = Function(fn.name, made.body,
                             [made.value.type, *(g.type for g in made.grads), T.i64], True,
                             fn.location, list(fn.arg_names) + made.adjoint_names,
                             {**fn.attrs, "returns_tuple": True})
    inline_funcs.run(module)  # the funcs with hand-written gradients, and those gradients


def strip_stop_gradients(module: Module) -> None:
    """Without a gradient, ``kd.stop_gradient(x)`` is ``x`` (also of an array)."""
    from kdsl.ir.autodiff.tensor_activity import is_stop_gradient
    from kdsl.ir.rewrite import remap_operands

    mapping: dict[Value, Value] = {}

    def visit(block: Block) -> None:
        kept = []
        for op in block.ops:
            for region in op.regions:
                visit(region)
            if is_stop_gradient(op):
                mapping[op.result] = op.operands[0]
            else:
                kept.append(op)
        block.ops = kept

    visit(module.kernel.body)
    remap_operands(module.kernel.body, mapping)

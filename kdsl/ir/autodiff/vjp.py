"""The vector-Jacobian product of a kernel as a new kernel (what ``kd.Tape`` runs for each
recorded call on the way back).

Its arguments are the kernel's, then one adjoint array per differentiated array argument,
then ``d_return``, the adjoint of the kernel's returned scalar (ignored by a kernel that
returns nothing). On entry an adjoint array holds the adjoint of its array's value after
the call; on exit, the adjoint of its value before the call: a store reads the adjoint of
the element it overwrote and clears it, a load adds to it. The kernel returns the adjoints
of the differentiated scalar arguments, then the peak bytes kept for the reverse sweep.
The arrays the kernel writes are left in no particular state (the tape passes copies).
"""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.autodiff import rules  # noqa: F401  (attaches the rules to the registry)
from kdsl.ir.autodiff.activity import is_float, needed_values, routed_values, varied_values
from kdsl.ir.autodiff.emitter import located_error
from kdsl.ir.autodiff.gradient import adjoint_name
from kdsl.ir.autodiff.memory import stateful_arrays, zeros_like_array
from kdsl.ir.autodiff.reverse import ReverseSweep, check_differentiable
from kdsl.ir.autodiff.tape_bytes import count_tape_bytes
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Module, Value
from kdsl.ir.passes import inline_funcs

RETURN_ADJOINT = "d_return"


def _returned_value(fn: Function) -> Value | None:
    """The floating-point scalar the kernel returns, None if it returns nothing (or an
    integer, through which no gradient flows)."""
    ret = fn.body.ops[-1]
    if not ret.operands:
        return None
    result = ret.operands[0]
    if len(ret.operands) != 1 or fn.attrs.get("returns_tuple") or not isinstance(
            result.type, T.ScalarType):
        raise located_error(
            f"kd.Tape records kernels that return nothing or one scalar; {fn.name} returns "
            + ", ".join(str(v.type) for v in ret.operands), fn.location)
    return result if is_float(result.type) else None


def vector_jacobian_product(module: Module, argnums: tuple[int, ...]) -> None:
    """Replaces ``module.kernel`` by its vector-Jacobian product with respect to the
    arguments at ``argnums``."""
    fn = module.kernel
    ret = fn.body.ops[-1]
    result = _returned_value(fn)
    roots = [fn.args[k] for k in argnums]
    varied, varied_arrays = varied_values(fn.body, roots)
    stateful = stateful_arrays(fn.body, varied_arrays)
    check_differentiable(fn.body, varied, varied_arrays, stateful)
    adjoint_arrays = {
        a: Value(a.type, adjoint_name(fn.arg_names[k]))
        for k, a in zip(argnums, roots) if isinstance(a.type, T.ArrayType)
    }
    seed = Value(T.f64, RETURN_ADJOINT)
    body = Block(list(fn.args) + list(adjoint_arrays.values()) + [seed])
    builder = IRBuilder(body)
    sweep = ReverseSweep(builder, varied, varied_arrays, adjoint_arrays, needed_values(fn.body))
    sweep.routed = routed_values(fn.body)
    sweep.stateful = stateful
    for a in fn.args:  # arrays the kernel makes vary without being differentiated
        if a in varied_arrays and a not in adjoint_arrays:
            adjoint_arrays[a] = zeros_like_array(sweep, a)
    m: dict[Value, Value] = {a: a for a in fn.args}
    ops = fn.body.ops
    tapes = sweep.forward(ops, m, recompute=False)
    builder.location = ret.location
    if result is not None and result in varied:
        g = seed if result.type == T.f64 else sweep.op("cast", seed, type=result.type)
        sweep.adj[result] = g
    sweep.reverse(ops, m, tapes)
    grads = [sweep.adjoint_or_zero(a) for a in roots if not isinstance(a.type, T.ArrayType)]
    saved_bytes = count_tape_bytes(body, sweep.tape_arrays)
    builder.create("return", [*grads, saved_bytes])
    names = (list(fn.arg_names) + [adjoint_name(fn.arg_names[k]) for k in argnums
                                   if isinstance(fn.args[k].type, T.ArrayType)]
             + [RETURN_ADJOINT])
    module.kernel = Function(fn.name, body, [*(g.type for g in grads), T.i64], True,
                             fn.location, names, {**fn.attrs, "returns_tuple": True})
    inline_funcs.run(module)  # the funcs with hand-written gradients, and those gradients

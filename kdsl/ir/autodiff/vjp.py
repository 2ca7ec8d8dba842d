"""The vector-Jacobian product of a kernel as a new kernel (what ``kd.Tape`` runs for each
recorded call on the way back).

Its arguments are the kernel's, then one adjoint array per differentiated array argument,
then ``d_return``, the adjoint of the kernel's returned scalar (ignored by a kernel that
returns nothing). On entry an adjoint array holds the adjoint of its array's value after
the call; on exit, the adjoint of its value before the call: a store reads the adjoint of
the element it overwrote and clears it, a load adds to it. The kernel returns the adjoints
of the differentiated scalar arguments, then the peak bytes kept for the reverse sweep.
The arrays the kernel writes are left in no particular state (the tape passes copies).

A kernel that returns an array (or a tuple of arrays) passes gradients back through it
when ``argnums`` holds positions after the kernel's last argument: the kernel then writes
each array it returns into an extra last argument, ``return``, ``return.1``, ... (their
contents on entry do not matter); the adjoint arrays of those ``argnums`` holds (on
entry, the adjoints of the returned values) follow the other adjoint arrays.
"""

from __future__ import annotations

import functools

from kdsl import types as T
from kdsl.ir.autodiff import rules  # noqa: F401  (attaches the rules to the registry)
from kdsl.ir.autodiff.activity import is_float
from kdsl.ir.autodiff.emitter import located_error
from kdsl.ir.autodiff.gradient import build_reverse
from kdsl.ir.autodiff.reverse import ReverseSweep
from kdsl.ir.autodiff.vjp_copies import tidy_vjp
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Module, Value
from kdsl.ir.passes import inline_funcs

RETURN_ADJOINT = "d_return"
RETURNED = "return"  # a keyword: no parameter of the kernel's own has this name


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


def returned_name(position: int) -> str:
    """The name of the extra argument the ``position``-th returned array is written into
    (never a Python identifier, so no parameter of the kernel's own has it)."""
    return RETURNED if position == 0 else f"{RETURNED}.{position}"


def _return_into_arguments(fn: Function) -> Function:
    """``fn`` writing the arrays it returns (one, or a tuple of arrays) into extra last
    arguments, returning nothing."""
    ret = fn.body.ops[-1]
    results = list(ret.operands)
    if not results or not all(isinstance(v.type, T.ArrayType) for v in results):
        raise located_error(
            f"kd.Tape passes gradients back through returned arrays; {fn.name} returns "
            + (", ".join(str(v.type) for v in results) or "nothing"), fn.location)
    fn.body.ops.pop()
    builder = IRBuilder(fn.body)
    builder.location = ret.location
    names = []
    for position, result in enumerate(results):
        t = result.type
        out = Value(T.ArrayType(t.dtype, t.ndim, True), returned_name(position))
        dims = [builder.create("array_dim", [result], {"axis": k}).result for k in range(t.ndim)]
        body = Block([Value(T.i64, f"i{k}") for k in range(t.ndim)])
        with builder.at(body):
            value = builder.create("array_load", [result, *body.args]).result
            builder.create("array_store", [out, *body.args, value])
            builder.create("yield", [])
        builder.create("parallel_for", dims, {"ndim": t.ndim, "reductions": ()}, [body], [])
        fn.body.args.append(out)
        names.append(returned_name(position))
    builder.create("return", [])
    return Function(fn.name, fn.body, [], True, fn.location, [*fn.arg_names, *names],
                    {k: v for k, v in fn.attrs.items() if k != "returns_tuple"})


def vector_jacobian_product(module: Module, argnums: tuple[int, ...], target: str = "cpu",
                            unit_axes: dict[int, tuple[int, ...]] | None = None) -> None:
    """Replaces ``module.kernel`` by its vector-Jacobian product with respect to the
    arguments at ``argnums`` (and its returned array, see the module's doc), for the
    ``target`` ("cpu" or "cuda") it will be compiled for; ``unit_axes``: the axes of size
    1 of differentiated array arguments, by position (see GradientSpec)."""
    if any(k >= len(module.kernel.args) for k in argnums):
        module.kernel = _return_into_arguments(module.kernel)
    fn = module.kernel
    ret = fn.body.ops[-1]
    result = _returned_value(fn)
    seed_arg = Value(T.f64, RETURN_ADJOINT)

    def seed(sweep: ReverseSweep, value: Value) -> Value:
        if value.type == T.f64:
            return seed_arg
        return sweep.op("cast", seed_arg, type=value.type)

    # the tape passes copies of the arrays the kernel writes: no state to restore
    made = build_reverse(fn, argnums, [seed_arg], result, seed, keep_state=False,
                         want_value=False, tidy=functools.partial(tidy_vjp, cpu=target == "cpu"),
                         unit_axes=unit_axes)
    builder = IRBuilder(made.body)
    builder.location = ret.location
    builder.create("return", [*made.grads, made.saved_bytes])
    module.kernel = Function(fn.name, made.body, [*(g.type for g in made.grads), T.i64], True,
                             fn.location,
                             list(fn.arg_names) + made.adjoint_names + [RETURN_ADJOINT],
                             {**fn.attrs, "returns_tuple": True})
    inline_funcs.run(module)  # the funcs with hand-written gradients, and those gradients

"""Reverse-mode differentiation (kdsl/ir/autodiff), when the kernel is compiled as the
gradient of another; otherwise only removes ``kd.stop_gradient`` markers. Forward mode
(``run_forward``) runs after the tensor lowering: whole-array expressions are loops by
then, which carry their tangents as any loop does."""

from __future__ import annotations

from typing import Any

from kdsl.errors import CompileError
from kdsl.ir.autodiff.tensor_activity import TENSOR_OPS, is_stop_gradient
from kdsl.ir.core import Module
from kdsl.ir.passes import dead_code, fold_store_views, inline_funcs, lower_tensors


def run(module: Module, options: Any = None) -> None:
    argnums = getattr(options, "gradient", None)
    if argnums is not None:
        _reverse_mode(module, tuple(argnums), options)
    if getattr(options, "tangent", None) is None and any(
            is_stop_gradient(op) for op in module.kernel.body.walk()):
        from kdsl.ir.autodiff.gradient import strip_stop_gradients

        strip_stop_gradients(module)


def _reverse_mode(module: Module, argnums: tuple[int, ...], options: Any) -> None:
    """The gradient (or the vector-Jacobian product) of the kernel: of its whole-array
    ops as such, or, where their adjoints do not cover them yet (an assignment in a
    loop, an array overwritten after a read its adjoint needs), of the loops they lower
    to, as of hand-written loops. A program neither way covers is the first way's
    located error. With ``gradient_of_loops`` (arguments that share memory, which the
    whole-array adjoints take to be apart), the loops' way only."""
    from kdsl.ir.autodiff.tensor_activity import WholeArrayGradientError

    try:
        if getattr(options, "gradient_of_loops", False) and any(
                op.name in TENSOR_OPS for op in module.kernel.body.walk()):
            raise WholeArrayGradientError(
                "this whole-array expression cannot be differentiated when arguments the "
                "kernel writes share memory with others; pass separate arrays",
                next(op.location for op in module.kernel.body.walk() if op.name in TENSOR_OPS))
        _differentiate(module, argnums, options)
    except WholeArrayGradientError as whole_array_error:
        lower_tensors.run(module.kernel, options, packed_products=False)
        dead_code.run(module.kernel)  # the whole-array ops the lowering fused into loops
        if any(op.name == "gemm" for op in module.kernel.body.walk()):
            raise whole_array_error from None
        try:
            _differentiate(module, argnums, options)
        except CompileError:
            raise
        except Exception:  # a construct the loops' adjoints do not cover either
            raise whole_array_error from None


def _differentiate(module: Module, argnums: tuple[int, ...], options: Any) -> None:
    fold_store_views.run(module.kernel)  # the sweep follows writes by the array written
    if getattr(options, "vjp", False):
        from kdsl.ir.autodiff.vjp import vector_jacobian_product

        vector_jacobian_product(module, argnums, getattr(options, "target", "cpu"),
                                dict(getattr(options, "unit_axes", ())))
    else:
        from kdsl.ir.autodiff.gradient import GradientSpec, differentiate

        differentiate(module, GradientSpec(argnums, dict(getattr(options, "unit_axes", ()))))


def run_forward(module: Module, options: Any = None) -> None:
    """The Jacobian-vector product, when the kernel is compiled as that of another."""
    tangent = getattr(options, "tangent", None)
    if tangent is None:
        return
    from kdsl.ir.autodiff.forward import jacobian_vector_product

    dead_code.run(module.kernel)  # the whole-array ops the lowering fused into loops
    jacobian_vector_product(module, tuple(tangent))
    inline_funcs.run(module)  # the funcs with hand-written gradients, and those gradients
    if any(is_stop_gradient(op) for op in module.kernel.body.walk()):
        from kdsl.ir.autodiff.gradient import strip_stop_gradients

        strip_stop_gradients(module)

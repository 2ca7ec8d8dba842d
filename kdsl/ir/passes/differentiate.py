"""Reverse-mode differentiation (kdsl/ir/autodiff), when the kernel is compiled as the
gradient of another; otherwise only removes ``kd.stop_gradient`` markers. Forward mode
(``run_forward``) runs after the tensor lowering: whole-array expressions are loops by
then, which carry their tangents as any loop does."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Module


def run(module: Module, options: Any = None) -> None:
    argnums = getattr(options, "gradient", None)
    if argnums is not None and getattr(options, "vjp", False):
        from kdsl.ir.autodiff.vjp import vector_jacobian_product

        vector_jacobian_product(module, tuple(argnums))
    elif argnums is not None:
        from kdsl.ir.autodiff.gradient import GradientSpec, differentiate

        differentiate(module, GradientSpec(tuple(argnums)))
    if getattr(options, "tangent", None) is None and any(
            op.name == "stop_gradient" for op in module.kernel.body.walk()):
        from kdsl.ir.autodiff.gradient import strip_stop_gradients

        strip_stop_gradients(module)


def run_forward(module: Module, options: Any = None) -> None:
    """The Jacobian-vector product, when the kernel is compiled as that of another."""
    tangent = getattr(options, "tangent", None)
    if tangent is None:
        return
    from kdsl.ir.autodiff.forward import jacobian_vector_product
    from kdsl.ir.passes import dead_code

    dead_code.run(module.kernel)  # the whole-array ops the lowering fused into loops
    jacobian_vector_product(module, tuple(tangent))
    if any(op.name == "stop_gradient" for op in module.kernel.body.walk()):
        from kdsl.ir.autodiff.gradient import strip_stop_gradients

        strip_stop_gradients(module)

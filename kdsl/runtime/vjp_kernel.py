"""The vector-Jacobian product of a kernel, compiled as a kernel (kdsl/ir/autodiff/vjp.py):
what ``kd.Tape.backward`` runs for each recorded call."""

from __future__ import annotations

import dataclasses
import inspect
import weakref
from typing import Any

from kdsl import types as T
from kdsl.runtime.arguments import Parameter, parameter_for
from kdsl.runtime.gradient import GradientKernel, UnitAxes, _is_array
from kdsl.runtime.kernel import Kernel


class VjpKernel(GradientKernel):
    """Called with the kernel's arguments, one adjoint array per differentiated array
    argument (updated in place: from the adjoint of the value after the call to that of the
    value before it) and the adjoint of the returned scalar; returns the adjoints of the
    differentiated scalar arguments, then the bytes kept for the reverse sweep.

    With ``returned`` (the types of the arrays the kernel returns: one, or those of a
    tuple), the product passes gradients back through the floating-point ones too: the
    kernel's arguments are followed by an array of each one's shape (written), and the
    adjoint arrays by the adjoints of the floating-point ones. With ``unit_axes`` (the
    differentiated arrays' axes of size 1, see kdsl/runtime/gradient.py), the adjoint of
    such an axis broadcast against a longer one is summed over it."""

    label = "vjp"

    def __init__(self, kernel: Kernel, argnums: tuple[int, ...],
                 returned: tuple[T.ArrayType, ...] | None = None,
                 unit_axes: UnitAxes = (), gradient_of_loops: bool = False) -> None:
        count = len(inspect.signature(kernel.py_function).parameters)
        if returned is not None:
            argnums = (*argnums, *(count + j for j, t in enumerate(returned)
                                   if T.element_scalar(t.dtype).is_float))
        super().__init__(kernel, argnums, unit_axes, gradient_of_loops)
        self.returned = returned
        self.own_argnums = tuple(k for k in argnums if k < count)
        self.options = dataclasses.replace(kernel.options, gradient=argnums, vjp=True,
                                           unit_axes=unit_axes,
                                           gradient_of_loops=gradient_of_loops)
        self.__name__ = f"vjp_{kernel.__name__}"

    def __repr__(self) -> str:
        also = " and its returned arrays" if self.returned is not None else ""
        return (f"<vector-Jacobian product of {self.primal!r} w.r.t. arguments "
                f"{self.own_argnums}{also}>")

    def parameters(self, args: tuple) -> list[Parameter]:
        from kdsl.ir.autodiff.vjp import returned_name

        count = len(inspect.signature(self.py_function).parameters)
        params = self.primal_parameters(args[:count])
        rest: list[Any] = list(args[count:-1])
        for position, t in enumerate(self.returned or ()):
            params.append(parameter_for(returned_name(position), t, rest.pop(0)))
        adjoints = [p for k, p in enumerate(params) if k in self.argnums and _is_array(p)]
        return (params + [parameter_for(f"d_{p.name}", None, a)
                          for p, a in zip(adjoints, rest)]
                + [parameter_for("d_return", None, float(args[-1]))])


_made: weakref.WeakKeyDictionary[Kernel, dict[Any, VjpKernel]] = weakref.WeakKeyDictionary()


def vjp_kernel(kernel: Kernel, argnums: tuple[int, ...],
               returned: tuple[T.ArrayType, ...] | None = None,
               unit_axes: UnitAxes = (), gradient_of_loops: bool = False) -> VjpKernel:
    """The (cached) vector-Jacobian product of ``kernel`` with respect to ``argnums`` (and
    the arrays it returns, of types ``returned``, when given), for arrays at ``argnums``
    with the axes of size 1 ``unit_axes`` (``gradient_of_loops``: see BuildOptions)."""
    by_argnums = _made.setdefault(kernel, {})
    key = (argnums, returned, unit_axes, gradient_of_loops)
    found = by_argnums.get(key)
    if found is None:
        found = by_argnums[key] = VjpKernel(kernel, argnums, returned, unit_axes,
                                                   gradient_of_loops)
    return found

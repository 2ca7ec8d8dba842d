"""The vector-Jacobian product of a kernel, compiled as a kernel (kdsl/ir/autodiff/vjp.py):
what ``kd.Tape.backward`` runs for each recorded call."""

from __future__ import annotations

import dataclasses
import inspect
import weakref

from kdsl.runtime.arguments import Parameter, parameter_for
from kdsl.runtime.gradient import GradientKernel, _is_array
from kdsl.runtime.kernel import Kernel


class VjpKernel(GradientKernel):
    """Called with the kernel's arguments, one adjoint array per differentiated array
    argument (updated in place: from the adjoint of the value after the call to that of the
    value before it) and the adjoint of the returned scalar; returns the adjoints of the
    differentiated scalar arguments, then the bytes kept for the reverse sweep."""

    def __init__(self, kernel: Kernel, argnums: tuple[int, ...]) -> None:
        super().__init__(kernel, argnums)
        self.options = dataclasses.replace(kernel.options, gradient=argnums, vjp=True)
        self.__name__ = f"vjp_{kernel.__name__}"

    def __repr__(self) -> str:
        return f"<vector-Jacobian product of {self.primal!r} w.r.t. arguments {self.argnums}>"

    def parameters(self, args: tuple) -> list[Parameter]:
        count = len(inspect.signature(self.py_function).parameters)
        params = self.primal_parameters(args[:count])
        adjoints = [p for k, p in enumerate(params) if k in self.argnums and _is_array(p)]
        return (params + [parameter_for(f"d_{p.name}", None, a)
                          for p, a in zip(adjoints, args[count:-1])]
                + [parameter_for("d_return", None, float(args[-1]))])


_made: weakref.WeakKeyDictionary[Kernel, dict[tuple[int, ...], VjpKernel]] = \
    weakref.WeakKeyDictionary()


def vjp_kernel(kernel: Kernel, argnums: tuple[int, ...]) -> VjpKernel:
    """The (cached) vector-Jacobian product of ``kernel`` with respect to ``argnums``."""
    by_argnums = _made.setdefault(kernel, {})
    found = by_argnums.get(argnums)
    if found is None:
        found = by_argnums[argnums] = VjpKernel(kernel, argnums)
    return found


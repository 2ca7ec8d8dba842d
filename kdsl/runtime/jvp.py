"""``kd.jvp``: forward-mode differentiation of a kernel (kdsl/ir/autodiff/forward.py),
compiled as a kernel of its own and cached like any kernel."""

from __future__ import annotations

import dataclasses
import inspect
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.runtime.arguments import Parameter, parameter_for
from kdsl.runtime.kernel import DerivedKernel, Kernel


class JvpKernel(DerivedKernel):
    """The Jacobian-vector product of a kernel: its arguments, then one tangent per
    differentiated argument; returns the kernel's value and its tangent."""

    def __init__(self, kernel: Kernel, argnums: tuple[int, ...]) -> None:
        super().__init__(kernel.py_function, debug=kernel.options.debug,
                         fastmath=kernel.options.fastmath)
        self.primal = kernel
        self.argnums = argnums
        self.options = dataclasses.replace(kernel.options, tangent=argnums)
        self.__name__ = f"jvp_{kernel.__name__}"

    def __repr__(self) -> str:
        return f"<kd.jvp of {self.primal!r} w.r.t. arguments {self.argnums}>"

    def parameters(self, args: tuple) -> list[Parameter]:
        count = len(inspect.signature(self.py_function).parameters)
        params = Kernel.parameters(self, args[:count])
        tangents = self.derived_arguments(args, len(self.argnums))
        return params + [_tangent_parameter(params[k], t) for k, t in zip(self.argnums, tangents)]


def _tangent_parameter(p: Parameter, tangent: Any) -> Parameter:
    """A tangent is passed as its argument is (an array as any array of its dtype)."""
    if isinstance(p.type, T.ArrayType):
        return parameter_for(f"t_{p.name}", None, tangent)
    return dataclasses.replace(p, name=f"t_{p.name}")


_made: weakref.WeakKeyDictionary[Kernel, dict[tuple[int, ...], JvpKernel]] = \
    weakref.WeakKeyDictionary()


def _jvp_kernel(kernel: Kernel, argnums: tuple[int, ...]) -> JvpKernel:
    by_argnums = _made.setdefault(kernel, {})
    found = by_argnums.get(argnums)
    if found is None:
        found = by_argnums[argnums] = JvpKernel(kernel, argnums)
    return found


def _tangent_for(p: Parameter, primal: Any, tangent: Any, kernel_name: str) -> Any:
    """The tangent passed for one argument: a copy of an array's (the product updates it
    where the kernel writes the array), the scalar's in its type."""
    where = f"kd.jvp({kernel_name}): the tangent of '{p.name}'"
    if isinstance(p.type, T.ArrayType):
        if tuple(np.shape(tangent)) != tuple(np.shape(primal)):
            raise ValueError(f"{where} must have the shape of the argument, "
                             f"{tuple(np.shape(primal))}; got {tuple(np.shape(tangent))}")
        if getattr(primal, "device", "cpu") == "cuda":
            from kdsl.runtime.arrays import array

            return array(tangent, dtype=primal.dtype, device="cuda").copy()  # type: ignore[attr-defined]
        data = primal.numpy() if hasattr(primal, "numpy") else np.asarray(primal)
        return np.array(np.asarray(tangent), dtype=data.dtype, copy=True)
    if isinstance(p.type, (T.VectorType, T.MatrixType)):
        shape = p.type.shape
        if tuple(np.shape(tangent)) != shape:
            raise ValueError(f"{where} must have the shape of the argument, {shape}; got "
                             f"{tuple(np.shape(tangent))}")
        return np.array(np.asarray(tangent), dtype=T.element_scalar(p.type).numpy_dtype,
                        copy=True)
    if not isinstance(p.type, T.ScalarType):
        raise TypeError(f"{where}: only scalar, vector, matrix and array arguments have "
                        "tangents")
    return float(tangent)


def jvp(kernel: Kernel, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """``(value, tangent)``: the kernel's value at ``primals`` and its directional
    derivative along ``tangents`` (one per argument, shaped like it: an array of the
    argument's shape for an array, a vector or a matrix, a number for a scalar; None for
    an argument held constant, as integer arguments must be)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kd.jvp needs a @kd.kernel, got {kernel!r}")
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"kd.jvp({kernel.__name__}): {len(primals)} primals but "
                         f"{len(tangents)} tangents; give one tangent per argument (None for "
                         "none)")
    primals = kernel.with_defaults(primals)  # the parameters left out hold their defaults
    tangents = tangents + (None,) * (len(primals) - len(tangents))
    params = kernel.parameters(primals)
    argnums = []
    passed = []
    for k, (p, primal, tangent) in enumerate(zip(params, primals, tangents)):
        if tangent is None:
            continue
        scalar = T.element_scalar(p.type.dtype if isinstance(p.type, T.ArrayType) else p.type)
        if not scalar.is_float:
            raise TypeError(f"kd.jvp({kernel.__name__}): argument '{p.name}' is "
                            f"{'an array of ' if isinstance(p.type, T.ArrayType) else ''}"
                            f"{scalar}; only floating-point arguments have tangents (give None)")
        argnums.append(k)
        passed.append(_tangent_for(p, primal, tangent, kernel.__name__))
    if not argnums:
        return kernel(*primals), 0.0
    value, tangent = _jvp_kernel(kernel, tuple(argnums))(*primals, *passed)
    return value, tangent

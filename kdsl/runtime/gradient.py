"""``kd.grad``, ``kd.value_and_grad`` and ``kd.check_grad``: the gradient of a kernel is
compiled as a kernel of its own (see kdsl/ir/autodiff), cached like any kernel."""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl import types as T
from kdsl.runtime.arguments import Parameter, parameter_for
from kdsl.runtime.kernel import DerivedKernel, Kernel

if TYPE_CHECKING:
    from kdsl.frontend.scope import VariableType


def _is_array(p: Parameter) -> bool:
    return isinstance(p.type, T.ArrayType)


def primal_parameters(params: list[Parameter], argnums: Sequence[int],
                      vjp: bool = False) -> list[Parameter]:
    """The kernel's own parameters of a gradient kernel's (the adjoint arrays follow, then,
    for a vector-Jacobian product, the adjoint of the kernel's value)."""
    if vjp:
        params = params[:-1]
    extra = 0
    while True:  # the adjoints are one per differentiated array among the first ones
        primal = params[:len(params) - extra]
        count = sum(1 for k in argnums if k < len(primal) and _is_array(primal[k]))
        if count == extra:
            break
        extra += 1
    while vjp and primal and (primal[-1].name == "return"
                              or primal[-1].name.startswith("return.")):
        primal = primal[:-1]  # the returned arrays' (ir/autodiff/vjp.py)
    return primal


def gradient_results(results: list[VariableType], primal: list[Parameter],
                     argnums: Sequence[int], vjp: bool = False) -> list[VariableType]:
    """What a gradient kernel returns: the kernel's value (not for a vector-Jacobian
    product), one adjoint per differentiated scalar argument, then the peak bytes kept for
    the reverse sweep."""
    from kdsl.frontend.scope import VariableType

    return list(results[:0 if vjp else 1]) + [VariableType(primal[k].type, primal[k].weak)
                                for k in argnums
                                if k < len(primal) and not _is_array(primal[k])] + [
        VariableType(T.i64, False)]


def _check_differentiable(p: Parameter, kernel_name: str) -> None:
    scalar = T.element_scalar(p.type.dtype if _is_array(p) else p.type)
    if not scalar.is_float:
        what = f"an array of {scalar}" if _is_array(p) else f"{scalar}"
        raise TypeError(f"kd.grad({kernel_name}): argument '{p.name}' is {what}; gradients are "
                        "taken with respect to floating-point arguments only")


UnitAxes = tuple[tuple[int, tuple[int, ...]], ...]
"""Axes of size 1 of differentiated array arguments, as (position, axes) pairs."""


class GradientKernel(DerivedKernel):
    """The gradient of a kernel, compiled as a kernel: its arguments, then one adjoint
    array per differentiated array argument (added into)."""

    label = "kd.grad"  # how errors name this kind of derived kernel

    def __init__(self, kernel: Kernel, argnums: tuple[int, ...], unit_axes: UnitAxes = (),
                 gradient_of_loops: bool = False) -> None:
        super().__init__(kernel.py_function, debug=kernel.options.debug,
                         fastmath=kernel.options.fastmath)
        self.primal = kernel
        self.argnums = argnums
        self.own_argnums = argnums  # those among the kernel's own parameters
        self.options = dataclasses.replace(kernel.options, gradient=argnums,
                                           unit_axes=unit_axes,
                                           gradient_of_loops=gradient_of_loops)
        self.__name__ = f"grad_{kernel.__name__}"
        self.compile_seconds: float | None = None

    def __repr__(self) -> str:
        return f"<kd.grad of {self.primal!r} w.r.t. arguments {self.argnums}>"

    def primal_parameters(self, args: tuple) -> list[Parameter]:
        params = Kernel.parameters(self, args)
        for k in self.own_argnums:
            if not 0 <= k < len(params):
                raise ValueError(f"{self.label}({self.primal.__name__}): argnums {k} is out of "
                                 f"range for a kernel of {len(params)} arguments")
            _check_differentiable(params[k], self.primal.__name__)
        return params

    def parameters(self, args: tuple) -> list[Parameter]:
        count = len(inspect.signature(self.py_function).parameters)
        params = self.primal_parameters(args[:count])
        adjoints = [p for k, p in enumerate(params) if k in self.argnums and _is_array(p)]
        return params + [parameter_for(f"d_{p.name}", None, a)
                         for p, a in zip(adjoints, self.derived_arguments(args, len(adjoints)))]

    def _specialise(self, args: tuple, key: Any) -> Any:
        started = time.perf_counter()
        compiled = super()._specialise(args, key)
        self.compile_seconds = time.perf_counter() - started
        return compiled


def _axes_of_size_one(a: Any, ndim: int) -> tuple[int, ...]:
    """The indexed axes (the first ``ndim``) of array ``a`` whose size is 1."""
    shape = tuple(getattr(a, "shape", None) or np.shape(a))
    return tuple(k for k in range(min(ndim, len(shape))) if shape[k] == 1)


def unit_axes_of(params: Sequence[Parameter], args: tuple, argnums: tuple[int, ...]) -> UnitAxes:
    """The axes of size 1 of the array arguments at ``argnums`` (``params``: the kernel's
    parameters for ``args``): a gradient compiled for them sums the adjoint of such an
    axis where it was broadcast against a longer one (as NumPy, JAX and PyTorch do)."""
    return tuple((k, axes) for k in argnums if _is_array(params[k])
                 if (axes := _axes_of_size_one(args[k], params[k].type.ndim)))


def writes_shared_memory(args: tuple, arrays: Sequence[int], written: Sequence[int]) -> bool:
    """Whether an array argument a kernel writes (at a position in ``written``) shares
    memory with another of its array arguments (the same array passed twice, or views
    of one): the whole-array adjoints take them to be apart, the loops' adjoints do not
    (BuildOptions.gradient_of_loops)."""
    from kdsl.runtime.tape_memory import overlaps

    return any(j != k and overlaps(args[k], args[j]) for k in written if k < len(args)
               for j in arrays)


def _shares_memory(args: tuple, arrays: list[int]) -> bool:
    from kdsl.runtime.tape_memory import overlaps

    return any(overlaps(args[k], args[j]) for n, k in enumerate(arrays) for j in arrays[n + 1:])


def _zeros_like(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return np.zeros(a.shape, a.dtype)
    from kdsl.runtime.arrays import zeros_like

    return zeros_like(a)


def _written_positions(compiled: Any) -> Sequence[int]:
    """The positions of the arrays a specialisation (CPU or CUDA) writes."""
    return compiled.meta["written"] if hasattr(compiled, "meta") else compiled.written


def _is_index(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def normalized_argnums(kernel: Kernel, argnums: Any, label: str = "kd.grad") -> tuple[int, ...]:
    """``argnums`` (an int or a sequence of ints) as a tuple of argument positions, a
    negative one counted from the end as in JAX; a ``TypeError`` for anything else and a
    ``ValueError`` for a position the kernel does not have."""
    numbers = (argnums,) if _is_index(argnums) else tuple(argnums) if isinstance(
        argnums, (tuple, list)) else ()
    if not numbers or not all(_is_index(k) for k in numbers):
        raise TypeError(f"{label}({kernel.__name__}): argnums must be an int or a tuple of "
                        f"ints, got {argnums!r}")
    count = len(inspect.signature(kernel.py_function).parameters)
    for k in numbers:
        if not -count <= k < count:
            raise ValueError(f"{label}({kernel.__name__}): argnums {k} is out of range for a "
                             f"kernel of {count} arguments")
    return tuple(int(k) % count for k in numbers)


def _copy_of(grad: Any) -> Any:
    return grad.copy() if hasattr(grad, "copy") else grad


class Gradient:
    """``kd.grad(kernel, argnums)``: call with the kernel's arguments."""

    def __init__(self, kernel: Kernel, argnums: int | Sequence[int], with_value: bool) -> None:
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kd.grad needs a @kd.kernel, got {kernel!r}")
        self.single = _is_index(argnums)
        self.requested = normalized_argnums(kernel, argnums)
        self.argnums = tuple(sorted(set(self.requested)))  # each compiled once
        self.kernel = GradientKernel(kernel, self.argnums)
        self._variants: dict[tuple[UnitAxes, bool], GradientKernel] = {((), False): self.kernel}
        self.primal = kernel
        self.with_value = with_value
        self.saved_bytes: int | None = None

    def _arguments(self, args: tuple) -> tuple[list[Parameter], list[Any]]:
        params = self.kernel.primal_parameters(args)
        adjoints = [_zeros_like(args[k]) for k in self.argnums if _is_array(params[k])]
        self._select_kernel(params, args)
        return params, adjoints

    def _select_kernel(self, params: list[Parameter], args: tuple) -> None:
        """The gradient compiled for the axes of size 1 of the differentiated arrays: where
        such an axis was broadcast against a longer one, its adjoint is summed over it (as
        in NumPy, JAX and PyTorch)."""
        unit_axes = unit_axes_of(params, args, self.argnums)
        # the parameters after the call's arguments are global arrays the kernel reads
        arrays = [k for k, p in enumerate(params[:len(args)]) if _is_array(p)]
        loops = len(arrays) > 1 and _shares_memory(args, arrays) and writes_shared_memory(
            args, arrays, [k for k in _written_positions(self.primal.specialisation(args))
                           if k < len(args)])
        found = self._variants.get((unit_axes, loops))
        if found is None:
            found = self._variants[(unit_axes, loops)] = GradientKernel(
                self.primal, self.argnums, unit_axes, loops)
        self.kernel = found

    def __call__(self, *args: Any, **keywords: Any) -> Any:
        from kdsl.runtime.arrays import shared_foreign_array

        if keywords:
            args = self.primal.bind_keywords(args, keywords)
        args = tuple(map(shared_foreign_array, self.primal.with_defaults(args)))
        if len(args) > len(inspect.signature(self.primal.py_function).parameters):
            self.primal._check_count(args)  # a TypeError as a call of the kernel gives
        params, adjoints = self._arguments(args)
        value, *scalars, saved_bytes = self.kernel(*args, *adjoints)
        self.saved_bytes = int(saved_bytes)
        arrays, scalar_grads = iter(adjoints), iter(scalars)
        by_position = {k: next(arrays) if _is_array(params[k]) else next(scalar_grads)
                       for k in self.argnums}
        grads = tuple(by_position[k] if first else _copy_of(by_position[k])
                      for first, k in zip(_first_occurrences(self.requested), self.requested))
        grad = grads[0] if self.single else grads
        return (value, grad) if self.with_value else grad

    def ir(self, *args: Any, stage: str = "optimized") -> str:
        """The printed IR of the gradient kernel for these arguments (``stage='autodiff'``
        shows it as the differentiation made it, before optimisation)."""
        _, adjoints = self._arguments(args)
        return self.kernel.ir(*args, *adjoints, stage=stage)

    def llvm_ir(self, *args: Any, optimized: bool = False) -> str:
        _, adjoints = self._arguments(args)
        return self.kernel.llvm_ir(*args, *adjoints, optimized=optimized)

    def ptx(self, *args: Any, arch: tuple[int, int] | None = None) -> str:
        _, adjoints = self._arguments(args)
        return self.kernel.ptx(*args, *adjoints, arch=arch)

    @property
    def compile_seconds(self) -> float | None:
        """How long the last compilation (or load from the disk cache) took."""
        return self.kernel.compile_seconds


def _first_occurrences(numbers: tuple[int, ...]) -> list[bool]:
    """Whether each position of ``numbers`` is the first time its value appears (a
    repeated argnum gets a copy of the gradient, as JAX gives an array per position)."""
    return [k not in numbers[:position] for position, k in enumerate(numbers)]


def grad(kernel: Kernel, argnums: int | Sequence[int] = 0) -> Gradient:
    """The gradient of a kernel returning a scalar, with respect to ``argnums``."""
    return Gradient(kernel, argnums, with_value=False)


def value_and_grad(kernel: Kernel, argnums: int | Sequence[int] = 0) -> Gradient:
    """Like ``grad``, returning ``(value, gradient)``."""
    return Gradient(kernel, argnums, with_value=True)


def _as_float64(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return a.astype(np.float64)
    return float(a)


def _host_copy(a: Any) -> Any:
    """A NumPy copy of a ``kd.array`` (the differences are taken on the CPU), else ``a``."""
    if not isinstance(a, np.ndarray) and hasattr(a, "numpy") and hasattr(a, "device"):
        return np.array(a.numpy(), copy=True)
    return a


def _value(kernel: Kernel, args: Sequence[Any]) -> float:
    """The kernel's value on copies of the arrays (a kernel may update them in place)."""
    return float(kernel(*[np.array(a, copy=True) if isinstance(a, np.ndarray) else a
                          for a in args]))


def _numeric_gradient(kernel: Kernel, args: list[Any], k: int, eps: float) -> Any:
    """Central differences of the kernel's value with respect to argument ``k``."""
    a = args[k]
    if not isinstance(a, np.ndarray):
        shifted_up = list(args)
        shifted_down = list(args)
        kind = type(a)
        shifted_up[k] = kind(float(a) + eps)
        shifted_down[k] = kind(float(a) - eps)
        return (_value(kernel, shifted_up) - _value(kernel, shifted_down)) / (2 * eps)
    out = np.zeros(a.shape, np.float64)
    flat = a.reshape(-1)
    base = flat.copy()
    for index in range(flat.size):
        flat[index] = base[index] + eps
        hi = _value(kernel, args)
        flat[index] = base[index] - eps
        lo = _value(kernel, args)
        flat[index] = base[index]
        out.reshape(-1)[index] = (hi - lo) / (2 * eps)
    return out


def _computes_in_float64(t: Any) -> bool:
    """Whether a parameter of type ``t`` holds float64 values (an f32 scalar parameter
    given a Python float still computes in float32)."""
    element = t.dtype if isinstance(t, T.ArrayType) else t
    return T.element_scalar(element) == T.f64


def check_grad(kernel: Kernel, *args: Any, argnums: int | Sequence[int] = 0,
               eps: float | None = None, rtol: float | None = None,
               atol: float | None = None) -> float:
    """Compares ``kd.grad(kernel, argnums)`` with central finite differences in float64
    (in the arguments' own precision where the kernel accepts nothing else); raises
    AssertionError naming the worst element. Returns the largest scaled error."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kd.check_grad needs a @kd.kernel, got {kernel!r}")
    numbers = tuple(sorted(set(normalized_argnums(kernel, argnums, "kd.check_grad"))))
    args = tuple(_host_copy(a) for a in args)
    wide = list(args)
    for k in numbers:
        a = args[k]
        if isinstance(a, np.ndarray):
            wide[k] = np.array(a, dtype=np.float64) if a.dtype.kind == "f" else a
        elif isinstance(a, (float, np.floating)):
            wide[k] = float(a)
    try:
        params = kernel.parameters(tuple(wide))
        GradientKernel(kernel, numbers).primal_parameters(tuple(wide))
        exact = all(_computes_in_float64(params[k].type) for k in numbers)
    except TypeError:
        exact = False
    if not exact:
        wide = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    step = eps if eps is not None else (1e-6 if exact else 1e-2)
    relative = rtol if rtol is not None else (1e-4 if exact else 5e-2)
    absolute = atol if atol is not None else (1e-6 if exact else 5e-3)
    analytic = Gradient(kernel, numbers, with_value=False)(*wide)
    worst = 0.0
    for k, computed in zip(numbers, analytic):
        numeric = _numeric_gradient(kernel, wide, k, step)
        computed_values = np.asarray(computed, dtype=np.float64)
        numeric_values = np.asarray(numeric, dtype=np.float64)
        scale = absolute + relative * np.abs(numeric_values)
        error = np.abs(computed_values - numeric_values) / scale
        error = np.where(np.isnan(error), np.inf, error)
        index = int(np.argmax(error)) if error.size else 0
        worst_here = float(error.reshape(-1)[index]) if error.size else 0.0
        worst = max(worst, worst_here)
        if worst_here > 1.0:
            name = kernel.parameters(tuple(wide))[k].name
            where = (f"[{', '.join(map(str, np.unravel_index(index, numeric_values.shape)))}]"
                     if numeric_values.ndim else "")
            raise AssertionError(
                f"kd.check_grad({kernel.__name__}): the gradient with respect to '{name}{where}' "
                f"is {computed_values.reshape(-1)[index] if computed_values.ndim else computed_values}"
                f", central differences give "
                f"{numeric_values.reshape(-1)[index] if numeric_values.ndim else numeric_values}")
    return worst

"""What ``kd.Tape`` knows of a kernel's specialisation, found once and kept: the positions
of the arguments it writes, reads and may differentiate, and its compiled calls (the
kernel's own, its gradient's and its vector-Jacobian products'), called without typing
the arguments again: a call through the compiled call path (kdsl/runtime/fast_call.py)
checks them in machine code, and one that does not match takes the checked path."""

from __future__ import annotations

import struct
import weakref
from dataclasses import field
from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.codegen.abi import STATUS_SLOTS
from kdsl.records import dataclass
from kdsl.runtime.arguments import argument_key
from kdsl.runtime.fast_call import SLOW, FastCall, fast_call_for
from kdsl.runtime.kernel import Kernel

if TYPE_CHECKING:
    from kdsl.runtime.gradient import UnitAxes


def _is_float_parameter(p: Any) -> bool:
    t = p.type.dtype if isinstance(p.type, T.ArrayType) else p.type
    return bool(T.element_scalar(t).is_float)


def _results_of(compiled: Any) -> tuple[list[Any], bool]:
    """A specialisation's results (their types) and whether it returns a tuple."""
    meta = getattr(compiled, "meta", None)
    if meta is not None:  # a CUDA specialisation
        return [getattr(r, "type", r) for r in meta["results"]], meta.get("returns_tuple", False)
    return [r.type for r in compiled.results], compiled.returns_tuple


def _returned_array_types(results: list[Any]) -> tuple[T.ArrayType, ...] | None:
    """The types of the arrays a specialisation returns (one, or a tuple of arrays; None
    if it returns anything else), as annotations (any layout)."""
    if not results or not all(isinstance(t, T.ArrayType) for t in results):
        return None
    return tuple(T.ArrayType(t.dtype, t.ndim) for t in results)


def _own_code_only(kernel: Kernel, compiled: Any) -> bool:
    """Whether the kernel's own code is all a specialisation depends on (then a check of
    that code object tells whether the specialisation is current)."""
    deps = compiled.deps
    return (not deps.funcs and not deps.constants
            and [f for f, _ in deps.functions] == [kernel.py_function]
            and deps.functions[0][1] is kernel.py_function.__code__)


class CompiledCall:
    """Calls of a kernel (a gradient or a vector-Jacobian product) with arguments of one
    kind, through the compiled call path of the specialisation its first call chose;
    returns the kernel's results as a tuple."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.fast: FastCall | None = None
        self.own_code_only = False
        self.unpack: struct.Struct | None = None  # the results from the status slots
        self.prepared_for: Any = None

    def __call__(self, args: tuple) -> tuple:
        fast = self.fast
        if fast is not None and (self.own_code_only or fast.deps.unchanged()):
            raw = fast.function(*args)
            if raw is not SLOW:
                unpack = self.unpack
                if unpack is not None and type(raw) is bytes:
                    values = unpack.unpack(raw)
                    if values[0]:
                        fast.finish(raw, args)  # raises the kernel's error
                    return values[1:]
                result = fast.finish(raw, args)
                return result if type(result) is tuple else (result,)
        result = self.kernel(*args)
        self._prepare(args)
        return result if type(result) is tuple else (result,)

    def _prepare(self, args: tuple) -> None:
        """Finds the compiled call path of the specialisation ``args`` ran."""
        try:
            key = tuple(map(argument_key, args))
            compiled: Any = self.kernel._specialisations.get(key)
        except TypeError:
            return
        if compiled is None or compiled is self.prepared_for:
            return
        self.prepared_for = compiled
        self.fast = fast_call_for(compiled, key)
        if self.fast is None:
            return
        self.own_code_only = _own_code_only(self.kernel, compiled)
        results, _ = _results_of(compiled)
        if all(isinstance(t, T.ScalarType) for t in results):
            kinds = "".join("d" if t.is_float else "q" for t in results)
            self.unpack = struct.Struct(f"<q{8 * (STATUS_SLOTS - 1)}x{kinds}")
        else:
            self.unpack = None


@dataclass(eq=False)
class ReversePlan:
    """How the way back calls a call's vector-Jacobian product."""

    product: CompiledCall
    adjoint_positions: tuple[int, ...]  # the differentiated arrays (one adjoint each)
    scalar_positions: tuple[int, ...]  # the differentiated scalars (their adjoints returned)


@dataclass(eq=False)
class RecordPlan:
    """What recording a call of one specialisation (with arguments of one kind) needs."""

    compiled: Any
    names: list[str]  # the parameters' names
    written: tuple[int, ...]  # the positions of the arrays it writes
    floats: tuple[int, ...]  # the positions of its floating-point arguments
    arrays: tuple[int, ...]  # the positions of its array arguments
    float_arrays: tuple[int, ...]  # the floating-point ones among those
    float_scalars: tuple[int, ...]  # and its floating-point scalar arguments
    read: tuple[int, ...]  # the arrays it does not write
    hidden: bool  # it takes hidden arguments (arrays of globals, the random stream)
    random: bool  # it draws random numbers
    returned_types: tuple[T.ArrayType, ...] | None
    scalar_result: bool  # it returns one float (its gradient may be taken as recorded)
    on_cpu: bool
    function: Any  # the kernel's Python function, and the code the plan was made for
    code: Any
    fast: FastCall | None = None
    own_code_only: bool = False
    # the written arrays it overwrites before reading them (tape_overwritten.py), found
    # when first needed
    overwritten: frozenset[int] | None = None
    # by the arguments differentiated: the written arrays whose values before the call
    # its vector-Jacobian product does not read (tape_overwritten.py)
    unread: dict[Any, frozenset[int]] = field(default_factory=dict)
    argnums: dict[tuple[int, ...], tuple[int, ...]] = field(default_factory=dict)
    reverse: dict[Any, ReversePlan] = field(default_factory=dict)
    gradients: dict[Any, CompiledCall] = field(default_factory=dict)

    def current(self) -> bool:
        """Whether the specialisation is still what the kernel's source says."""
        return self.function.__code__ is self.code and (
            self.own_code_only or self.compiled.deps.unchanged())

    def argnums_for(self, active: tuple[int, ...]) -> tuple[int, ...]:
        """The arguments a call differentiates, given its active floating-point ones:
        those and the floating-point arrays it writes."""
        found = self.argnums.get(active)
        if found is None:
            floats = set(self.floats)
            found = self.argnums[active] = tuple(sorted(
                set(active) | {k for k in self.written if k in floats}))
        return found

    def unit_axes(self, plain: tuple, argnums: tuple[int, ...]) -> UnitAxes:
        """The axes of size 1 of the arrays at ``argnums`` in a call with ``plain``."""
        if not argnums:
            return ()
        from kdsl.runtime.gradient import unit_axes_of

        return unit_axes_of(self.compiled.params, plain, argnums)

    def writes_shared_memory(self, plain: tuple) -> bool:
        """Whether an array the call writes shares memory with another array argument
        (its products are then taken of the loops: BuildOptions.gradient_of_loops)."""
        if not self.written or len(self.arrays) < 2:
            return False
        from kdsl.runtime.gradient import writes_shared_memory

        return writes_shared_memory(plain, self.arrays, self.written)

    def reverse_plan(self, kernel: Kernel, argnums: tuple[int, ...],
                     returned: tuple[T.ArrayType, ...] | None,
                     unit_axes: UnitAxes = (), gradient_of_loops: bool = False) -> ReversePlan:
        key = (argnums, returned, unit_axes, gradient_of_loops)
        found = self.reverse.get(key)
        if found is None:
            from kdsl.runtime.vjp_kernel import vjp_kernel

            arrays = set(self.arrays)
            found = self.reverse[key] = ReversePlan(
                CompiledCall(vjp_kernel(kernel, argnums, returned, unit_axes,
                                        gradient_of_loops)),
                tuple(k for k in argnums if k in arrays),
                tuple(k for k in argnums if k not in arrays))
        return found

    def gradient(self, kernel: Kernel, argnums: tuple[int, ...],
                 unit_axes: UnitAxes = ()) -> CompiledCall:
        """The call of the kernel's gradient with respect to ``argnums`` (its value, the
        gradients of the scalars, the peak bytes; the arrays' gradients are added into
        arrays passed after the kernel's arguments), for arrays with the axes of size 1
        ``unit_axes``."""
        key = (argnums, unit_axes)
        found = self.gradients.get(key)
        if found is None:
            from kdsl.runtime.gradient import GradientKernel

            found = self.gradients[key] = CompiledCall(GradientKernel(kernel, argnums, unit_axes))
        return found


_plans: weakref.WeakKeyDictionary[Any, dict[Any, RecordPlan]] = weakref.WeakKeyDictionary()


def plan_for(kernel: Kernel, plain: tuple) -> RecordPlan:
    """The (cached) plan of the specialisation a call with ``plain`` (the user's
    arguments, with NumPy arrays for kdsl CPU arrays) runs; compiled if need be."""
    compiled: Any = kernel.specialisation(plain)
    count = len(plain)
    try:
        key: Any = tuple(map(argument_key, plain))
        hash(key)
    except TypeError:
        key = None
    by_key = _plans.setdefault(compiled, {})
    found = by_key.get(key)
    if found is not None:
        return found
    params = compiled.params[:count]
    written_all = compiled.meta["written"] if hasattr(compiled, "meta") else compiled.written
    written = tuple(k for k in written_all if k < count)
    arrays = tuple(k for k, p in enumerate(params) if isinstance(p.type, T.ArrayType))
    results, returns_tuple = _results_of(compiled)
    hidden = len(compiled.params) > count
    floats = tuple(k for k, p in enumerate(params) if _is_float_parameter(p))
    found = by_key[key] = RecordPlan(
        compiled, [p.name for p in params], written, floats, arrays,
        tuple(k for k in floats if k in arrays), tuple(k for k in floats if k not in arrays),
        tuple(k for k in arrays if k not in written), hidden, kernel.uses_random(),
        _returned_array_types(results),
        (len(results) == 1 and not returns_tuple and isinstance(results[0], T.ScalarType)
         and results[0].is_float),
        not hasattr(compiled, "meta"), kernel.py_function, kernel.py_function.__code__)
    if found.on_cpu and not hidden and key is not None:
        found.fast = fast_call_for(compiled, key)
        found.own_code_only = _own_code_only(kernel, compiled)
    return found

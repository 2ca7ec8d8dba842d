"""``@kd.kernel`` and ``@kd.func``: dispatch on argument types, with a fast path for
repeated calls, compilation on first use, and inspection of every stage."""

from __future__ import annotations

import functools
import os
import threading
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl.runtime.arguments import Parameter, argument_key, parameter_for
from kdsl.runtime.arrays import DeviceArray
from kdsl.runtime.fast_call import SLOW, FastCall, fast_call_for
from kdsl.runtime.options import BuildOptions

if TYPE_CHECKING:  # the compiler is imported on first use: import kdsl stays light
    from kdsl.frontend.dependencies import Dependencies
    from kdsl.runtime.compiler import CompiledKernel
    from kdsl.runtime.cuda.compiled import CudaCompiledKernel
    from kdsl.runtime.hidden_arguments import HiddenArguments


def _debug_default() -> bool:
    return os.environ.get("KDSL_DEBUG", "0") not in ("0", "", "false", "False", "no", "off")


def _as_vector_values(vectors: dict[int | str, Any], args: tuple,
                     kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """``args`` and ``kwargs`` with those of the vector parameters made vector values."""
    from kdsl import types as T
    from kdsl.builtins import Matrix, Vector

    def converted(value: Any, t: Any) -> Any:
        try:
            array = np.array(value, dtype=T.element_scalar(t).numpy_dtype)
        except (TypeError, ValueError):
            return value  # the func's own code reports what it cannot use
        if array.shape != tuple(t.shape):
            return value  # not one vector (many, as NumPy broadcasts them): as given
        return array.view(Vector if isinstance(t, T.VectorType) else Matrix)

    args = tuple(converted(a, vectors[k]) if k in vectors else a for k, a in enumerate(args))
    kwargs = {n: converted(a, vectors[n]) if n in vectors else a for n, a in kwargs.items()}
    return args, kwargs


class Func:
    """A function callable from kernels (inlined there) and from Python as plain Python."""

    __kdsl_func__ = True

    def __init__(self, fn: Callable[..., Any]) -> None:
        from kdsl.frontend.source import reject_async

        reject_async(fn)
        self.py_function = fn
        self.custom_gradient: Func | None = None
        functools.update_wrapper(self, fn)
        self._draws: bool | None = None
        self._vectors: dict[int | str, Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from kdsl.random_numbers import active_stream, call_drawing_func
        from kdsl.runtime.python_rewrite import plain_python_function

        function = plain_python_function(self.py_function)
        vectors = self._vector_parameters()
        if vectors:
            args, kwargs = _as_vector_values(vectors, args, kwargs)
        if active_stream() is not None and self.draws_random_numbers():
            return call_drawing_func(function, args, kwargs)
        return function(*args, **kwargs)

    def _vector_parameters(self) -> dict[int | str, Any]:
        """The parameters annotated with a vector or matrix type, by position and by name,
        each with its type: called as plain Python, their arguments become vector values
        (copies, as a kernel passes them), so ``v == w`` is refused as compiled."""
        if self._vectors is None:
            from kdsl import types as T
            from kdsl.frontend.annotations import parameter_annotations
            from kdsl.frontend.source import read_function

            try:
                annotations = parameter_annotations(self.py_function)
                names = [a.arg for a in read_function(self.py_function).tree.args.args]
            except Exception:  # noqa: BLE001 - a func that cannot compile still runs as Python
                annotations, names = [], []
            self._vectors = {}
            for position, (name, t) in enumerate(zip(names, annotations)):
                if isinstance(t, (T.VectorType, T.MatrixType)):
                    self._vectors[position] = self._vectors[name] = t
        return self._vectors

    def grad(self, gradient: Callable[..., Any]) -> Func:
        """``@f.grad`` defines f's gradient by hand: a function of f's arguments and the
        adjoint of its result that returns one adjoint per argument (a tuple for several)."""
        self.custom_gradient = gradient if isinstance(gradient, Func) else Func(gradient)
        return self.custom_gradient

    def draws_random_numbers(self) -> bool:
        """Whether this func (or one it calls) draws random numbers."""
        if self._draws is None:
            from kdsl.frontend.dependencies import scan_dependencies

            self._draws = scan_dependencies(self.py_function).uses_random
        return self._draws

    def __repr__(self) -> str:
        return f"<kd.func {self.py_function.__qualname__}>"


def _host_arrays_unwrapped(args: tuple) -> tuple | None:
    """``args`` with each CPU ``kd.array`` replaced by the NumPy array it shares memory
    with (what the compiled call path takes), or None when there is none: a kernel called
    with kd arrays takes the compiled path too, not only the checked Python one."""
    if DeviceArray not in map(type, args):
        return None
    return tuple([a._data if type(a) is DeviceArray else a for a in args])


class Kernel:
    """An entry point called from Python; compiled per argument-type signature."""

    __kdsl_kernel__ = True

    def __init__(self, fn: Callable[..., Any], debug: bool | None = None,
                 fastmath: bool = True) -> None:
        from kdsl.frontend.source import reject_async

        reject_async(fn)
        self.py_function = fn
        self.__name__ = fn.__name__
        functools.update_wrapper(self, fn)
        self.options = BuildOptions(debug=_debug_default() if debug is None else debug,
                                    fastmath=fastmath)
        self._specialisations: dict[Any, CompiledKernel | CudaCompiledKernel] = {}
        self._lock = threading.Lock()
        self._annotations: list[Any] | None = None
        self._names: list[str] | None = None
        self._hidden: HiddenArguments | None = None
        self._scanned: Dependencies | None = None  # the scan that found _hidden
        self._code_read: Any = fn.__code__  # what the three above were found for
        self._fast: FastCall | None = None  # the compiled call path of the last specialisation
        self._fast_calls: dict[Any, FastCall | None] = {}  # by specialisation key

    def __repr__(self) -> str:
        return f"<kd.kernel {self.py_function.__qualname__}>"

    # --- calling ------------------------------------------------------------------------

    def __call__(self, *args: Any, **keywords: Any) -> Any:
        if keywords:  # k(x, out=y): bound to positions as Python binds them
            args = self.bind_keywords(args, keywords)
        fast = self._fast
        if fast is not None and self.py_function.__code__ is self._code_read \
                and (fast.own_code_only or fast.deps.unchanged()):
            hidden: Any = ()
            if fast.hidden:
                hidden = fast.hidden.read(self.__name__)
                result = fast.function(*args, *hidden)
            else:
                result = fast.function(*args)
            if result is None:
                return None
            if result is not SLOW:
                return fast.finish(result, (*args, *hidden))
            plain = _host_arrays_unwrapped(args)
            if plain is not None:  # kd.array arguments: the NumPy arrays they share
                result = fast.function(*plain, *hidden)
                if result is None:
                    return None
                if result is not SLOW:
                    return fast.finish(result, (*args, *hidden))
            # the Python path, with the same stream position (no second draw)
            return self._call_checked(args, hidden if fast.hidden else None)
        return self._call_checked(args)

    def _call_checked(self, args: tuple, hidden_values: Any = None) -> Any:
        """The Python path: every argument typed and checked (the first call, arguments
        the compiled call path does not take). ``hidden_values``: the hidden arguments
        already read for this call."""
        from kdsl.runtime.arrays import shared_foreign_array

        self._forget_if_recoded()
        args = tuple(map(shared_foreign_array, self.with_defaults(args)))  # torch, jax, cupy
        if self._hidden is None:
            hidden = self._find_hidden()  # its scan of the dependencies serves _specialise
        else:
            hidden = self._hidden
            self._scanned = None  # an older scan: the globals may have changed since
        if hidden:  # captured arrays and the random stream: hidden arguments
            self._check_count(args)
            if hidden_values is None or len(hidden_values) != len(hidden):
                hidden_values = hidden.read(self.__name__)
            args = self.with_hidden(args, hidden_values)
        try:
            key = tuple(map(argument_key, args))
            compiled = self._specialisations.get(key)
        except TypeError:
            compiled, key = None, None
        if compiled is None or not compiled.deps.unchanged():
            compiled = self._specialise(args, key)
        result = compiled(args)
        if key is not None:
            self._fast = self._fast_call(compiled, key, hidden)
        return result

    def specialisation(self, args: tuple) -> CompiledKernel | CudaCompiledKernel:
        """The specialisation a call with ``args`` runs (compiled if need be)."""
        args = self.with_defaults(args)
        hidden = self._hidden if self._hidden is not None else self._find_hidden()
        if hidden:
            args = self.with_hidden(args, hidden.read(self.__name__, new_call=False))
        key = tuple(map(argument_key, args))
        compiled = self._specialisations.get(key)
        if compiled is None or not compiled.deps.unchanged():
            compiled = self._specialise(args, key)
        return compiled

    def with_hidden(self, args: tuple, hidden_values: Sequence[Any]) -> tuple:
        """The arguments the compiled code takes: the hidden ones follow the kernel's own
        (a derived kernel's adjoints or tangents come after them)."""
        return (*args, *hidden_values)

    def _fast_call(self, compiled: CompiledKernel | CudaCompiledKernel, key: Any,
                   hidden: HiddenArguments) -> FastCall | None:
        """The compiled call path of a CPU specialisation called from Python before (built
        on its second call: one-off calls never pay for it)."""
        from kdsl.runtime.compiler import CompiledKernel

        if type(compiled) is not CompiledKernel:  # a CUDA specialisation
            return None
        calls = compiled.calls
        compiled.calls = calls + 1
        fast = self._fast_calls.get(key)
        if fast is not None and fast.compiled is compiled:
            return fast
        if calls != 1:
            return None
        fast = fast_call_for(compiled, key, hidden)
        if fast is not None:
            # the code check of every call covers dependencies that are the kernel's
            # own code alone (they were current when the specialisation was chosen)
            deps = compiled.deps
            fast.own_code_only = (not deps.funcs and not deps.constants
                                  and [f for f, _ in deps.functions] == [self.py_function]
                                  and deps.functions[0][1] is self._code_read)
        self._fast_calls[key] = fast
        return fast

    def _forget_if_recoded(self) -> None:
        """After an in-place code swap (IPython's autoreload), reads the source again."""
        if self.py_function.__code__ is not self._code_read:
            self._annotations = self._names = self._hidden = None
            self._fast = None
            self._fast_calls.clear()
            self._code_read = self.py_function.__code__

    def _find_hidden(self) -> HiddenArguments:
        """The arrays the kernel and its funcs read from globals and closures, and whether
        it draws random numbers."""
        from kdsl.frontend.dependencies import scan_dependencies
        from kdsl.runtime.hidden_arguments import HiddenArguments

        deps = scan_dependencies(self.py_function)
        self._scanned = deps
        self._hidden = HiddenArguments(tuple(deps.arrays), deps.uses_random)
        return self._hidden

    def python(self, *args: Any, **keywords: Any) -> Any:
        """Runs the kernel's own function as plain Python: the reference semantics."""
        from kdsl.runtime.python_mode import run_as_python

        if keywords:
            args = self.bind_keywords(args, keywords)
        return run_as_python(self, self.with_defaults(args))

    def uses_random(self) -> bool:
        return (self._hidden if self._hidden is not None else self._find_hidden()).random

    def parameters(self, args: tuple) -> list[Parameter]:
        """The parameters of the user's arguments ``args`` (the hidden ones are added, with
        no call number drawn) or of those followed by the hidden ones (as a call passes
        them)."""
        names, annotations = self._parameter_names()
        hidden = self._hidden if self._hidden is not None else self._find_hidden()
        args = self.with_defaults(args)
        if hidden and len(args) == len(names):
            args = (*args, *hidden.read(self.__name__, new_call=False))
        self._check_count(args[:len(args) - len(hidden)])
        names = names + hidden.names
        annotations = annotations + [None] * len(hidden)
        return [parameter_for(n, ann, a) for n, ann, a in zip(names, annotations, args)]

    def _parameter_names(self) -> tuple[list[str], list[Any]]:
        self._forget_if_recoded()
        if self._annotations is None or self._names is None:
            from kdsl.frontend.annotations import parameter_annotations
            from kdsl.frontend.source import read_function

            self._annotations = parameter_annotations(self.py_function)
            self._names = [a.arg for a in read_function(self.py_function).tree.args.args]
        return self._names, self._annotations

    def bind_keywords(self, args: tuple, keywords: dict[str, Any]) -> tuple:
        """The positional arguments of a call that names some of them, defaults filled
        in; a ``TypeError`` as Python gives for an unknown, repeated or missing one."""
        import inspect

        try:
            bound = inspect.signature(self.py_function).bind(*args, **keywords)
        except TypeError as exc:
            raise TypeError(f"{self.__name__}(): {exc}") from None
        bound.apply_defaults()
        return bound.args

    def with_defaults(self, args: tuple) -> tuple:
        """``args`` followed by the default values of the parameters they leave out."""
        defaults = self.py_function.__defaults__
        if not defaults:
            return args
        names, _ = self._parameter_names()
        first_default = len(names) - len(defaults)
        if not first_default <= len(args) < len(names):
            return args
        return (*args, *defaults[len(args) - first_default:])

    def _check_count(self, args: tuple) -> None:
        names, _ = self._parameter_names()
        if len(args) < len(names):
            required = len(names) - len(self.py_function.__defaults__ or ())
            missing = names[len(args):max(required, len(args) + 1)]
            listed = ", ".join(f"'{name}'" for name in missing)
            raise TypeError(f"{self.__name__}() missing {len(missing)} required argument"
                            f"{'s' if len(missing) > 1 else ''}: {listed}")
        if len(args) > len(names):
            raise TypeError(
                f"{self.__name__}() takes {len(names)} arguments, got {len(args)}"
            )

    def _specialise(self, args: tuple, key: Any) -> CompiledKernel | CudaCompiledKernel:
        from kdsl.frontend.dependencies import scan_dependencies
        from kdsl.runtime.compiler import compile_kernel
        from kdsl.timings import compile_report
        from kdsl.timings import stage as timed

        params = self.parameters(args)
        on_device = [p.name for p in params if p.passing == "device"]
        on_host = [p.name for p in params if p.passing == "object"]
        if on_device and on_host:
            raise ValueError(
                f"{self.__name__}(): arrays on different devices: "
                f"{', '.join(repr(n) for n in on_device)} on cuda, "
                f"{', '.join(repr(n) for n in on_host)} on the cpu; move them with .to()"
            )
        compiled: CompiledKernel | CudaCompiledKernel
        with self._lock, compile_report(self.__name__):
            with timed("dependencies"):
                deps = (self._scanned if self._scanned is not None
                        else scan_dependencies(self.py_function))
                self._scanned = None
            if on_device:
                from kdsl.runtime.cuda.compiled import compile_cuda_kernel

                compiled = compile_cuda_kernel(self.py_function, self.__name__, params, deps,
                                               self.options)
            else:
                compiled = compile_kernel(self.py_function, self.__name__, params, deps,
                                          self.options)
            if key is not None:
                self._specialisations[key] = compiled
        return compiled

    # --- inspection ------------------------------------------------------------------

    def ir(self, *args: Any, stage: str = "optimized") -> str:
        """The printed IR of the specialisation for these arguments, after ``stage``."""
        from kdsl.ir.passes.pipeline import STAGES
        from kdsl.ir.printer import print_function
        from kdsl.runtime.compiler import lower_and_optimize

        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        stop = None if stage == "optimized" else stage
        params = self.parameters(args)
        target = "cuda" if any(p.passing == "device" for p in params) else "cpu"
        module, _ = lower_and_optimize(self.py_function, params, self.options, stop, target)
        return print_function(module.kernel)

    def llvm_ir(self, *args: Any, optimized: bool = False) -> str:
        """The LLVM IR for these arguments (as generated, or after LLVM's O3)."""
        from kdsl.runtime.compiler import llvm_ir_text

        text, _ = llvm_ir_text(self.py_function, self.parameters(args), self.options,
                               f"kdsl_entry_{self.__name__}")
        if optimized:
            from kdsl.codegen.cpu import optimize

            return str(optimize(text))
        return text

    def ptx(self, *args: Any, arch: tuple[int, int] | None = None) -> str:
        """PTX for NVIDIA GPUs (``compute_90`` unless ``arch`` says otherwise), for
        arguments of these types: NumPy or CUDA arrays and scalars."""
        from kdsl.runtime.compiler import ptx_text

        return ptx_text(self.py_function, self.parameters(args), self.options,
                        f"kdsl_entry_{self.__name__}", arch)

    def nvvm_ir(self, *args: Any) -> str:
        """The NVVM IR of the device kernels for these arguments."""
        from kdsl.runtime.compiler import cuda_build

        emitted, _ = cuda_build(self.py_function, self.parameters(args), self.options,
                                f"kdsl_entry_{self.__name__}")
        return str(emitted.device_ir)

    def dependencies(self) -> Dependencies:
        from kdsl.frontend.dependencies import scan_dependencies

        return scan_dependencies(self.py_function)


class DerivedKernel(Kernel):
    """A kernel compiled from another's function (a gradient, a Jacobian-vector product):
    its arguments are the kernel's own, then derived ones (adjoints, tangents). The hidden
    arguments (captured arrays, the random stream) follow the kernel's own, as in the
    compiled code's parameters."""

    def own_count(self) -> int:
        return len(self._parameter_names()[0])

    def with_hidden(self, args: tuple, hidden_values: Sequence[Any]) -> tuple:
        own = self.own_count()
        return (*args[:own], *hidden_values, *args[own:])

    def derived_arguments(self, args: tuple, expected: int) -> tuple:
        """The arguments after the kernel's own (``expected`` of them), passed with the
        hidden ones or without."""
        rest = args[self.own_count():]
        hidden = self._hidden if self._hidden is not None else self._find_hidden()
        return rest[len(hidden):] if hidden and len(rest) == expected + len(hidden) else rest

    def _check_count(self, args: tuple) -> None:
        super()._check_count(args[:self.own_count()])

    def _fast_call(self, compiled: CompiledKernel | CudaCompiledKernel, key: Any,
                   hidden: HiddenArguments) -> FastCall | None:
        # the compiled call path appends the hidden arguments after all others
        return None if hidden else super()._fast_call(compiled, key, hidden)


def kernel(fn: Callable[..., Any] | None = None, *, debug: bool | None = None,
           fastmath: bool = True) -> Any:
    """Marks a kernel; ``@kd.kernel(debug=True)`` bounds-checks every array access."""
    for option, value in (("debug", debug), ("fastmath", fastmath)):
        if value is not None and not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"kd.kernel's {option}= takes True or False, got {value!r}")
    if fn is None:
        return lambda f: Kernel(_python_function(f, "kernel"), debug=debug, fastmath=fastmath)
    return Kernel(_python_function(fn, "kernel"), debug=debug, fastmath=fastmath)


def func(fn: Callable[..., Any] | None = None) -> Any:
    """Marks a function callable from kernels (``@kd.func`` or ``@kd.func()``)."""
    if fn is None:
        return lambda f: Func(_python_function(f, "func"))
    return Func(_python_function(fn, "func"))


def _python_function(fn: Any, decorator: str) -> Any:
    """``fn``, checked to be a function written in Python (what the decorator compiles)."""
    if getattr(fn, "__kdsl_kernel__", False) or getattr(fn, "__kdsl_func__", False):
        raise TypeError(f"@kd.{decorator} is applied to {fn.__name__}, which already is a "
                        "kdsl kernel or func; decorate the Python function once")
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"@kd.{decorator} decorates a Python function (def ...), got "
                        f"{type(fn).__name__} {fn!r}")
    return fn

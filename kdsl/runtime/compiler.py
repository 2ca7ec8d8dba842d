"""From a kernel and its argument types to loaded machine code, through the disk cache."""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import sys
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl import types as T
from kdsl.codegen.abi import STATUS_SLOTS, ErrorCode, Site, init_symbol
from kdsl.digests import sha256
from kdsl.records import dataclass
from kdsl.runtime.arguments import (
    Parameter,
    check_integer_range,
    variable_types,
    vector_argument,
)
from kdsl.runtime.native_allocation import HEADER_WORDS
from kdsl.runtime.ndarray_layout import ndarray_offsets
from kdsl.runtime.options import BuildOptions
from kdsl.runtime.symbols import ALLOCATIONS, recycle
from kdsl.timings import stage

if TYPE_CHECKING:  # the compiler proper is imported on a cache miss only
    from kdsl.codegen.emit_kernel import CodegenOptions
    from kdsl.codegen.native_code import LoadedCode
    from kdsl.frontend.dependencies import Dependencies
    from kdsl.frontend.scope import VariableType
    from kdsl.ir.core import Module

VERSION = "0.1.0"
# loaded code by cache key, while a specialisation holds it
_loaded: weakref.WeakValueDictionary[str, LoadedKernel] = weakref.WeakValueDictionary()
_load_lock = threading.Lock()




def codegen_options(options: BuildOptions) -> CodegenOptions:
    from kdsl.codegen.emit_kernel import CodegenOptions

    flags = ("reassoc", "contract") if options.fastmath else ()
    # a gradient compares recomputed values with a min/max reduction's result to find
    # its winner: the same scalar math in every loop, vectorised or not
    return CodegenOptions(fastmath=flags, ndarray_offsets=ndarray_offsets(),
                          vector_math=options.gradient is None)


def lower_and_optimize(fn: Any, params: list[Parameter], options: BuildOptions,
                       stop_after: str | None = None,
                       target: str = "cpu") -> tuple[Module, list[VariableType]]:
    from kdsl.frontend.function import lower_kernel
    from kdsl.ir.core import Module
    from kdsl.ir.passes.pipeline import PassOptions, run_pipeline

    primal = params
    if options.gradient is not None:  # the adjoint arrays follow the kernel's own parameters
        from kdsl.runtime.gradient import primal_parameters

        primal = primal_parameters(params, options.gradient, options.vjp)
    if options.tangent is not None:  # the tangents follow the kernel's own parameters
        primal = params[:len(params) - len(options.tangent)]
    with stage("frontend"):
        function, context, results = lower_kernel(fn, variable_types(primal), options.debug,
                                                  target)
    module = Module(function, {f.name: f for f in context.funcs.values()})
    with stage("passes"):
        run_pipeline(module, PassOptions(debug=options.debug, fastmath=options.fastmath,
                                         gradient=options.gradient, vjp=options.vjp,
                                         tangent=options.tangent, target=target,
                                         unit_axes=options.unit_axes,
                                         gradient_of_loops=options.gradient_of_loops),
                     stop_after=stop_after)
    if options.gradient is not None:
        from kdsl.runtime.gradient import gradient_results

        results = gradient_results(results, primal, options.gradient, options.vjp)
    if options.tangent is not None:  # the value and its tangent
        results = [results[0], results[0]]
    return module, results


def llvm_ir_text(fn: Any, params: list[Parameter], options: BuildOptions, entry: str) -> tuple[str, Any]:
    emitted, rest = emitted_kernel(fn, params, options, entry)
    with stage("llvm ir text"):
        text = str(emitted.module)
    return text, (emitted, *rest)


def emitted_kernel(fn: Any, params: list[Parameter], options: BuildOptions,
                   entry: str) -> tuple[Any, tuple[list[VariableType], list[int], bool]]:
    """The kernel's LLVM module (codegen.emit_kernel.EmittedKernel), its results, the
    arguments it writes and whether it returns a tuple."""
    from kdsl.codegen.emit_kernel import emit_kernel

    module, results = lower_and_optimize(fn, params, options)
    with stage("codegen"):
        emitted = emit_kernel(module.kernel, codegen_options(options), entry)
    returns_tuple = module.kernel.attrs.get("returns_tuple", False)
    return emitted, (results, written_arguments(module), returns_tuple)


def object_code(module: Any, entry: str,
                link: bool = True) -> tuple[bytes | list[bytes], bytes | None]:
    """Object code and a shared library (None where none could be linked, or ``link`` is
    False) for a kernel's LLVM module: compiled in parts on threads of their own where it
    is large enough and cores are free (the objects of all parts, and the library linked
    from them), as one object otherwise."""
    from kdsl.codegen import cpu, split_module
    from kdsl.codegen.merge_regions import merge_identical_regions

    with stage("llvm ir text"):  # compares the regions' texts
        merge_identical_regions(module)
    cores = min(cpu.usable_cores(), 2)
    plan = split_module.plan_parts(module, cores) if cpu.linker() else None
    if plan is not None:
        with stage("llvm ir text"):
            texts = split_module.render_parts(module, entry, init_symbol(entry), plan)
        objects = cpu.compile_parts(texts)
        if not link:  # the parts load together from memory, and link together
            return objects, None
        with stage("link"):
            library = cpu.link_shared_library(objects)
        if library is not None:
            return objects, library
        # not linked (a full disk): one object, which loads without a linker
    with stage("llvm ir text"):
        text = str(module)
    code = cpu.compile_module(text)
    if not link:
        return code, None
    with stage("link"):
        return code, cpu.link_shared_library(code)


def cuda_build(fn: Any, params: list[Parameter], options: BuildOptions, entry: str) -> tuple[Any, Any]:
    """The host program (LLVM IR for the CPU) and device kernels (NVVM IR) of a kernel."""
    from kdsl.codegen.host_launch import emit_cuda_kernel

    module, results = lower_and_optimize(fn, params, options, target="cuda")
    with stage("codegen"):
        emitted = emit_cuda_kernel(module.kernel, codegen_options(options), entry)
    returns_tuple = module.kernel.attrs.get("returns_tuple", False)
    return emitted, (results, written_arguments(module), returns_tuple)


def ptx_text(fn: Any, params: list[Parameter], options: BuildOptions, entry: str,
             arch: tuple[int, int] | None = None) -> str:
    """PTX of a kernel's device code (through libNVVM)."""
    from kdsl.codegen.nvvm import DEFAULT_ARCH, compile_ptx

    emitted, _ = cuda_build(fn, params, options, entry)
    return compile_ptx(emitted.device_ir, arch or DEFAULT_ARCH, options.fastmath)


def written_arguments(module: Module) -> list[int]:
    """Which array arguments the kernel may write (they must be writeable at the call)."""
    from kdsl.ir.effects import view_source, written_arrays

    args = module.kernel.args
    written = written_arrays(module.kernel.body)
    sources = {op.results[0]: source for op in module.kernel.body.walk()
               if op.results and (source := view_source(op)) is not None}
    for v in list(written):  # a write through a view (out[1:] = ...) writes its array
        while v in sources:
            v = sources[v]
            written.add(v)
    return [k for k, a in enumerate(args) if a in written]


@functools.cache
def compiler_fingerprint() -> str:
    """The size and modification time of every file of kdsl itself: a changed compiler
    (a development checkout, a reinstall) never reuses code the old one made."""
    root = str(Path(__file__).resolve().parent.parent)
    entries: list[str] = []
    folders = [""]
    while folders:  # os.scandir: stat results without a system call each, unlike rglob
        folder = folders.pop()
        with os.scandir(os.path.join(root, folder)) as scan:
            for entry in scan:
                relative = os.path.join(folder, entry.name)
                if entry.is_dir():
                    if entry.name != "__pycache__":
                        folders.append(relative)
                elif entry.name.endswith(".py"):
                    stat = entry.stat()
                    entries.append(f"{relative}:{stat.st_size}:{stat.st_mtime_ns};")
    return sha256("".join(sorted(entries)).encode()).hexdigest()


def cache_key(deps: Dependencies, params: list[Parameter], options: BuildOptions,
              extra: tuple[str, ...] = ()) -> str:
    from kdsl.codegen.cpu import target_description

    h = sha256()
    parts = [
        f"kdsl {VERSION}", compiler_fingerprint(), sys.version, np.__version__,
        target_description(), os.environ.get("KDSL_VECTOR_MATH", ""),
        repr(ndarray_offsets()), repr(options),
        repr([(p.name, p.type, p.weak, p.passing) for p in params]),
        *deps.key_parts(), *extra,
    ]
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class CompiledKernel:
    """A loaded specialisation: converts arguments, calls, raises errors, decodes results."""

    def __init__(self, name: str, address: int, params: list[Parameter],
                 results: list[VariableType], sites: list[Site], deps: Dependencies,
                 allocates: bool = True, written: list[int] | None = None,
                 returns_tuple: bool = False, extra_argtypes: list[Any] | None = None,
                 keep_alive: Any = None, init_symbol: str | None = None) -> None:
        self.name = name
        self.init_symbol = init_symbol  # the module's init function: hands it the hooks
        self.keep_alive = keep_alive  # the loaded code: unloaded once no specialisation holds it
        self.params = params
        self.results = results
        self.sites = sites
        self.deps = deps
        argtypes: list[Any] = []
        self.converters: list[Any] = []
        for p in params:
            if p.passing == "object":
                argtypes.append(ctypes.py_object)
                self.converters.append(_array_converter(p))
            elif p.passing == "device":  # a CUDA array's descriptor (see cuda/compiled.py)
                argtypes.append(ctypes.py_object)
                self.converters.append(lambda a: a)
            elif p.passing == "vector":
                argtypes.append(ctypes.py_object)
                self.converters.append(functools.partial(vector_argument, p.name, p.type))
            elif p.passing == "float":
                argtypes.append(ctypes.c_double)
                self.converters.append(float)
            else:
                argtypes.append(ctypes.c_int64)
                t = p.type
                if t.is_integer:  # Python ints are unbounded: check they fit
                    self.converters.append(functools.partial(check_integer_range, p.name, t))
                else:
                    self.converters.append(int)
        argtypes.append(ctypes.py_object)
        argtypes.extend(extra_argtypes or [])
        self.address = address
        self.extra_argtypes = len(extra_argtypes or [])
        self.calls = 0  # Python-path calls: the second one builds the compiled call path
        self.cfunc = ctypes.CFUNCTYPE(None, *argtypes)(address)
        self.status_size = STATUS_SLOTS + sum(_slots(r.type) for r in results)
        self.allocates = allocates
        self.returns_tuple = returns_tuple
        self.written = list(written or [])
        self.passthrough = all(
            p.passing == "object" and not p.trailing_shape for p in params
        )

    def __call__(self, args: tuple) -> Any:
        # the words before the slots say the call keeps no record of the arrays it makes
        # (see native_allocation)
        status = np.zeros(HEADER_WORDS + self.status_size, dtype=np.int64)[HEADER_WORDS:]
        given = args  # a kd.array argument the kernel returns is returned as itself
        if not (self.passthrough and all(type(a) is np.ndarray for a in args)):
            args = tuple(c(a) for c, a in zip(self.converters, args))
        for k in self.written:
            if not args[k].flags.writeable:
                raise ValueError(f"argument '{self.params[k].name}' of kernel {self.name} is "
                                 "read-only, and the kernel writes to it")
        try:
            self.cfunc(*args, status)
        finally:
            made = ALLOCATIONS.claim(status.ctypes.data) if self.allocates else {}
        if status[0]:
            self._raise(status)
        if not self.results:
            recycle(made)
            return None
        result = self._decode(status, made, given)
        recycle(made)  # the temporaries nothing returned holds
        return result

    def _raise(self, status: np.ndarray) -> None:
        code, site_index, index, size = (int(x) for x in status[:4])
        site = self.sites[site_index]
        loc = site.location
        where = f'kernel {self.name}, File "{loc.file}", line {loc.line}'
        line = loc.source_line().strip()
        if code == ErrorCode.VALUE:
            raise ValueError(f"{site.detail} (got {index}; {where})" + (f"\n    {line}" if line else ""))
        if code == ErrorCode.SHAPE:
            raise ValueError(f"{site.detail}: sizes {index} and {size} do not match ({where})"
                             + (f"\n    {line}" if line else ""))
        if code == ErrorCode.MEMORY:
            raise MemoryError(f"kernel {self.name} could not allocate an array ({where})")
        if code == ErrorCode.INDEX:
            message = (f"index {index} is out of bounds for {site.detail} with size {size} "
                       f"({where})")
            raise IndexError(message + (f"\n    {line}" if line else ""))
        message = site.detail or "assertion failed"
        raise AssertionError(f"{message} ({where})" + (f"\n    {line}" if line else ""))

    def _decode(self, status: np.ndarray, made: dict[int, Any], args: tuple,
                returned_array: Any = None) -> Any:
        """The results from the status slots; arrays through ``returned_array`` (NumPy
        arrays by default; device arrays for CUDA kernels)."""
        returned_array = returned_array or _returned_array
        values: list[Any] = []
        slot = STATUS_SLOTS
        for r in self.results:
            if isinstance(r.type, T.ArrayType):
                count = _slots(r.type)
                values.append(returned_array(r.type, status[slot:slot + count], made, args))
                slot += count
                continue
            scalar = T.element_scalar(r.type)
            count = T.element_count(r.type)
            raw = status[slot:slot + count]
            slot += count
            if scalar.is_float:
                parts = raw.view(np.float64).astype(scalar.numpy_dtype)
            else:
                parts = raw.astype(scalar.numpy_dtype)
            if isinstance(r.type, T.ScalarType):
                value = parts[0]
                values.append(value.item() if r.weak else value)
            else:
                values.append(parts.reshape(T.element_shape(r.type)))
        return values[0] if len(values) == 1 and not self.returns_tuple else tuple(values)


def _slots(t: Any) -> int:
    return 1 + 2 * t.full_ndim if isinstance(t, T.ArrayType) else T.element_count(t)


class _ViewOf:
    """Describes a view of ``base``'s memory to NumPy (and keeps ``base`` alive)."""

    def __init__(self, base: np.ndarray, interface: dict) -> None:
        self.base = base
        self.__array_interface__ = interface


def _returned_array(t: T.ArrayType, raw: np.ndarray, made: dict[int, np.ndarray],
                    args: tuple) -> np.ndarray:
    """A returned array: one the call made, an argument (the same object), or a view of
    one of those (a NumPy view of the same memory)."""
    pointer = int(raw[0])
    n = t.full_ndim
    shape = tuple(int(x) for x in raw[1:1 + n])
    strides = tuple(int(x) for x in raw[1 + n:1 + 2 * n])
    made_here = made.get(pointer)
    if made_here is not None and made_here.shape == shape and made_here.strides == strides:
        return made_here
    bases: list[tuple[np.ndarray, Any]] = [(m, m) for m in made.values()]
    for a in args:  # a kd.array argument is returned as itself
        unwrap = getattr(a, "__kdsl_array__", None)
        data = unwrap() if unwrap is not None else a
        if isinstance(data, np.ndarray):
            bases.append((data, a))
    dtype = T.element_scalar(t.dtype).numpy_dtype
    bases = [(b, original) for b, original in bases if b.dtype == dtype]
    for base, original in bases:
        if base.ctypes.data == pointer and base.shape == shape and base.strides == strides:
            return original
    if any(s == 0 for s in shape):  # empty: no memory to share
        return np.empty(shape, dtype)
    for base, _ in bases:
        start = base.ctypes.data + sum(min(0, (d - 1) * s) for d, s in zip(base.shape, base.strides))
        end = base.ctypes.data + sum(max(0, (d - 1) * s) for d, s in zip(base.shape, base.strides))
        if start <= pointer <= end + base.itemsize:
            interface = {"data": (pointer, not base.flags.writeable), "shape": shape,
                         "strides": strides, "typestr": base.dtype.str, "version": 3}
            return np.asarray(_ViewOf(base, interface))
    raise RuntimeError("a kernel returned an array kdsl cannot identify")


def _array_converter(p: Parameter) -> Any:
    trailing = p.trailing_shape

    def convert(a: Any) -> Any:
        if type(a) is not np.ndarray:
            unwrap = getattr(a, "__kdsl_array__", None)
            a = unwrap() if unwrap is not None else a
        if trailing and a.shape[a.ndim - len(trailing):] != trailing:
            raise TypeError(f"argument '{p.name}': expected trailing axes {trailing} for "
                            f"{p.type.dtype}, got an array of shape {a.shape}")
        return a

    return convert


@dataclass
class LoadedKernel:
    """A specialisation's machine code (unloaded when no CompiledKernel holds it)."""

    code: LoadedCode
    address: int
    meta: dict
    init: str


def compile_kernel(fn: Any, name: str, params: list[Parameter], deps: Dependencies,
                   options: BuildOptions) -> CompiledKernel:
    """Machine code for one specialisation: from the disk cache, or compiled and stored."""
    with stage("cache key"):
        key = cache_key(deps, params, options)
    with _load_lock:
        loaded = _loaded.get(key)
        if loaded is None:
            loaded = _load_or_build(fn, params, options, key)
            _loaded[key] = loaded
    meta = loaded.meta
    return CompiledKernel(name, loaded.address, params, meta["results"], meta["sites"], deps,
                          meta.get("allocates", True), meta.get("written", []),
                          meta.get("returns_tuple", False), keep_alive=loaded,
                          init_symbol=loaded.init)


def _load_or_build(fn: Any, params: list[Parameter], options: BuildOptions,
                   key: str) -> LoadedKernel:
    from kdsl.codegen.native_code import call_init
    from kdsl.runtime.loading import load_or_build
    from kdsl.runtime.symbols import hook_table

    entry = f"kdsl_entry_{key[:24]}"
    init = init_symbol(entry)

    def build() -> tuple[bytes | list[bytes], bytes | None, dict]:
        from kdsl.codegen import cpu

        cpu.start_loading_llvm()
        emitted, (results, written, returns_tuple) = emitted_kernel(fn, params, options, entry)
        code, _ = object_code(emitted.module, entry, link=False)  # see load_or_build
        meta = {"sites": emitted.sites, "results": results, "allocates": emitted.allocates,
                "written": written, "returns_tuple": returns_tuple, "format": "object"}
        return code, None, meta

    code, meta = load_or_build(key, [entry, init], build, link_later=True)
    with stage("init"):
        call_init(code, init, hook_table())
    return LoadedKernel(code, code[entry], meta, init)


def float_bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]

"""CUDA specialisations: build (host program + PTX), the disk cache, loading, calling.

A CUDA kernel is two pieces: a host program (native code, as on the CPU) that runs the
serial part and launches device kernels, and a PTX module holding those kernels. Both go
into the disk cache under one key, which also covers the GPU architecture and the
libNVVM version. Array arguments reach the host program as descriptors (device
address, sizes, byte strides); the host program calls the driver directly.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl import types as T
from kdsl.codegen.abi import HOOK_ORDER, STATUS_SLOTS, ErrorCode, init_symbol
from kdsl.records import dataclass
from kdsl.runtime.arguments import Parameter
from kdsl.runtime.options import BuildOptions
from kdsl.runtime.symbols import Allocations

if TYPE_CHECKING:
    from kdsl.codegen.native_code import LoadedCode

# by key and driver (modules are per context), while a specialisation holds them
_loaded: weakref.WeakValueDictionary[tuple[str, int], LoadedCudaKernel] = weakref.WeakValueDictionary()
_load_lock = threading.Lock()


def descriptor(a: Any) -> np.ndarray:
    """What the host program reads for a device array: address, sizes, byte strides."""
    return np.array([a.ptr, *a.shape, *a.strides], dtype=np.int64)


def device_arch() -> tuple[int, int]:
    from kdsl.runtime.cuda.driver import get_driver

    return tuple(get_driver().compute_capability())  # type: ignore[return-value]


def image_format() -> str:
    """What the driver loads: "ptx", or "nvvm" (NVVM IR) for the CPU emulator."""
    from kdsl.runtime.cuda.driver import get_driver

    return getattr(get_driver(), "code_format", "ptx")


def cuda_cache_key(deps: Any, params: list[Parameter], options: BuildOptions,
                   arch: tuple[int, int]) -> str:
    from kdsl.runtime.compiler import cache_key

    if image_format() == "ptx":
        from kdsl.codegen.nvvm import nvvm_version

        compiler = nvvm_version()
    else:
        compiler = "emulated"
    return cache_key(deps, params, options, extra=("cuda", f"sm_{arch[0]}{arch[1]}", compiler))


def build(fn: Any, params: list[Parameter], options: BuildOptions, key: str,
          arch: tuple[int, int]) -> tuple[bytes | None, bytes, dict]:
    """Compiles: (host shared library or None, host object code, metadata with the
    device code: PTX, or NVVM IR for the emulator)."""
    from kdsl.codegen import cpu
    from kdsl.runtime.compiler import cuda_build

    entry = f"kdsl_entry_{key[:24]}"
    emitted, (results, written, returns_tuple) = cuda_build(fn, params, options, entry)
    if image_format() == "ptx":
        from kdsl.codegen.nvvm import compile_ptx

        image = compile_ptx(emitted.device_ir, arch, options.fastmath)
    else:
        image = emitted.device_ir
    code = cpu.compile_to_object(str(emitted.host))
    library = cpu.link_shared_library(code)
    meta = {
        "sites": emitted.sites, "results": results, "allocates": emitted.allocates,
        "written": written, "returns_tuple": returns_tuple,
        "format": "object" if library is None else "shared",
        "image": image, "functions": [f.name for f in emitted.functions],
        "scratch_bytes": emitted.scratch_bytes, "device_sites": emitted.device_sites,
        "entry": entry,
    }
    return library, code, meta


@dataclass
class LoadedCudaKernel:
    """A CUDA specialisation's host program and device module, with the hook table the
    host program reads; the module is unloaded when no specialisation holds this."""

    code: LoadedCode
    address: int
    meta: dict
    hooks: ctypes.Array
    handles: ctypes.Array


def compile_cuda_kernel(fn: Any, name: str, params: list[Parameter], deps: Any,
                        options: BuildOptions) -> CudaCompiledKernel:
    from kdsl.runtime.cuda.driver import get_driver

    arch = device_arch()
    key = cuda_cache_key(deps, params, options, arch)
    loaded_key = (key, id(get_driver()))
    with _load_lock:
        loaded = _loaded.get(loaded_key)
        if loaded is None:
            loaded = _load_or_build(fn, params, options, key, arch)
            _loaded[loaded_key] = loaded
    compiled = CudaCompiledKernel(name, loaded.address, params, loaded.meta, deps, loaded)
    compiled.rebuild = lambda: compile_cuda_kernel(fn, name, params, deps, options)
    return compiled


def _load_or_build(fn: Any, params: list[Parameter], options: BuildOptions, key: str,
                   arch: tuple[int, int]) -> LoadedCudaKernel:
    """The host program (from the verified cache, or built), its device module loaded by
    the driver, and its hooks pointing at that module."""
    from kdsl.codegen.native_code import call_init
    from kdsl.runtime.cuda.driver import get_driver
    from kdsl.runtime.loading import load_or_build

    entry = f"kdsl_entry_{key[:24]}"

    def build_for_cache() -> tuple[bytes, bytes | None, dict]:
        library, code, meta = build(fn, params, options, key, arch)
        return code, library, meta

    code, meta = load_or_build(key, [entry, init_symbol(entry)], build_for_cache)
    hooks, handles, module = cuda_hook_table(meta)
    loaded = LoadedCudaKernel(code, code[entry], meta, hooks, handles)
    finalizer = weakref.finalize(loaded, _unload_module, get_driver(), module)
    finalizer.atexit = False
    call_init(code, init_symbol(entry), hooks)
    return loaded


def _unload_module(driver: Any, module: Any) -> None:
    try:
        driver.unload_module(module)
    except Exception:  # noqa: BLE001 - a context already gone took the module with it
        pass


def cuda_hook_table(meta: dict) -> tuple[ctypes.Array, ctypes.Array, Any]:
    """The CPU hook table with the driver's entry points, CUDA allocation, and the
    handles of this module's kernels; the handles and the loaded module."""
    from kdsl.codegen.nvvm import ptx_isa_for_cuda, ptx_version, with_ptx_version
    from kdsl.runtime.cuda.driver import get_driver
    from kdsl.runtime.symbols import hook_table

    driver = get_driver()
    image = meta["image"]
    if image_format() == "ptx":
        supported = ptx_isa_for_cuda(driver.driver_version())
        if ptx_version(image) > supported:
            image = with_ptx_version(image, supported)
    module = driver.load_module(image.encode() + b"\0")
    handles = (ctypes.c_void_p * max(len(meta["functions"]), 1))(
        *[driver.get_function(module, name) for name in meta["functions"]])
    addresses = driver.c_function_addresses()
    allocator, releaser = cuda_allocation_hooks()
    base = list(hook_table())
    values = dict(zip(HOOK_ORDER, base))
    values.update(allocate=allocator, release=releaser,
                  cuda_launch=addresses["cuLaunchKernel"],
                  cuda_copy_to_host=addresses["cuMemcpyDtoH_v2"],
                  cuda_functions=ctypes.addressof(handles))
    table = (ctypes.c_void_p * len(HOOK_ORDER))(*[values[n] for n in HOOK_ORDER])
    return table, handles, module


_keep_alive: list[Any] = []


# --- allocations made by host code -------------------------------------------------------

CUDA_ALLOCATIONS = Allocations()  # device arrays a call made, by call token


def _cuda_allocate(token: int, type_code: int, ndim: int, shape: Any, fill: int, value: float) -> int:
    from kdsl.runtime.cuda.device_array import CudaArray

    try:
        dims = tuple(int(shape[k]) for k in range(ndim))
        if any(d < 0 for d in dims):
            return 0
        dtype = T.SCALAR_TYPES[type_code].numpy_dtype
        array = CudaArray.allocate(dims, dtype)
        if fill != 0 and array.nbytes:
            from kdsl.runtime.cuda.driver import get_driver

            if fill == 1:
                get_driver().memset(array.ptr, array.nbytes, 0)
            else:
                host = np.full(dims, 1 if fill == 2 else value, dtype=dtype)
                get_driver().copy_to_device(array.ptr, host)
    except (MemoryError, ValueError, OverflowError, RuntimeError):
        return 0
    with CUDA_ALLOCATIONS.lock:
        CUDA_ALLOCATIONS.by_call.setdefault(token, {})[int(array.ptr)] = array
    return int(array.ptr) or 1


def _cuda_release(token: int, pointer: int) -> None:
    with CUDA_ALLOCATIONS.lock:
        CUDA_ALLOCATIONS.by_call.get(token, {}).pop(pointer or 0, None)


@functools.cache
def cuda_allocation_hooks() -> tuple[int, int]:
    from kdsl.runtime.symbols import _ALLOCATE_T, _RELEASE_T

    allocate, release = _ALLOCATE_T(_cuda_allocate), _RELEASE_T(_cuda_release)
    _keep_alive.extend([allocate, release])
    return (int(ctypes.cast(allocate, ctypes.c_void_p).value or 0),
            int(ctypes.cast(release, ctypes.c_void_p).value or 0))


# --- calling ---------------------------------------------------------------------------

_CU_ERRORS = {1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
              700: "CUDA_ERROR_ILLEGAL_ADDRESS", 701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
              702: "CUDA_ERROR_LAUNCH_TIMEOUT", 710: "CUDA_ERROR_ASSERT",
              719: "CUDA_ERROR_LAUNCH_FAILED", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
              218: "CUDA_ERROR_INVALID_PTX", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"}


class CudaCompiledKernel:
    """A loaded CUDA specialisation: converts arguments, calls the host program, raises
    errors from the host and the device, decodes results (device arrays stay on the
    device)."""

    def __init__(self, name: str, address: int, params: list[Parameter], meta: dict,
                 deps: Any, keep_alive: Any = None) -> None:
        from kdsl.runtime.compiler import CompiledKernel

        self.name = name
        self.params = params
        self.deps = deps
        self.meta = meta
        # the CPU wrapper does the decoding and error messages; arrays are descriptors here
        self.cpu = CompiledKernel(name, address, params, meta["results"], meta["sites"], deps,
                                  meta.get("allocates", True), [], meta.get("returns_tuple", False),
                                  extra_argtypes=[ctypes.c_uint64], keep_alive=keep_alive)
        from kdsl.runtime.cuda.driver import get_driver

        self.driver = get_driver()  # modules and scratch belong to its context
        self.rebuild: Any = None
        self._rebuilt: tuple[Any, CudaCompiledKernel] | None = None
        self.scratch_bytes = int(meta["scratch_bytes"])
        self.device_sites = bool(meta["device_sites"])
        self._local = threading.local()

    def _scratch(self) -> Any:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            from kdsl.runtime.cuda.device_array import CudaArray

            scratch = CudaArray.allocate((self.scratch_bytes // 8,), np.dtype(np.int64))
            self._local.scratch = scratch
        return scratch

    def __call__(self, args: tuple) -> Any:
        from kdsl.runtime.cuda.driver import get_driver

        driver = get_driver()
        if driver is not self.driver and self.rebuild is not None:
            # another driver was installed (tests do this): code loaded for it, kept while
            # this specialisation lives
            if self._rebuilt is None or self._rebuilt[0] is not driver:
                self._rebuilt = (driver, self.rebuild())
            return self._rebuilt[1](args)
        scratch = self._scratch()
        if self.device_sites:
            driver.memset(scratch.ptr, STATUS_SLOTS * 8, 0)
        status = np.zeros(self.cpu.status_size, dtype=np.int64)
        call_args = tuple(descriptor(a) if p.passing == "device" else c(a)
                          for c, p, a in zip(self.cpu.converters, self.params, args))
        try:
            self.cpu.cfunc(*call_args, status, int(scratch.ptr))
        finally:
            made = CUDA_ALLOCATIONS.claim(status.ctypes.data) if self.cpu.allocates else {}
        if self.device_sites and not status[0]:
            device_status = np.zeros(STATUS_SLOTS, dtype=np.int64)
            driver.copy_to_host(device_status, scratch.ptr)
            if device_status[0]:
                status[:STATUS_SLOTS] = device_status
        if status[0] == ErrorCode.LAUNCH:
            code = int(status[2])
            site = self.cpu.sites[int(status[1])]
            raise RuntimeError(f"CUDA error {_CU_ERRORS.get(code, code)} in {site.detail} of "
                               f"kernel {self.name} (line {site.location.line})")
        if status[0]:
            self.cpu._raise(status)
        if not self.cpu.results:
            return None
        return self.cpu._decode(status, made, args, _returned_device_array)


def _returned_device_array(t: T.ArrayType, raw: np.ndarray, made: dict[int, Any],
                           args: tuple) -> Any:
    from kdsl.runtime.cuda.device_array import CudaArray

    pointer = int(raw[0])
    n = t.full_ndim
    shape = tuple(int(x) for x in raw[1:1 + n])
    strides = tuple(int(x) for x in raw[1 + n:1 + 2 * n])
    dtype = T.element_scalar(t.dtype).numpy_dtype
    bases = [a for a in made.values()] + [a for a in args if getattr(a, "device", None) == "cuda"]
    bases = [b for b in bases if b.dtype == dtype]
    for base in bases:
        if int(base.ptr) == pointer and tuple(base.shape) == shape and tuple(base.strides) == strides:
            return base
    for base in bases:
        extent = sum(max(0, (d - 1) * s) for d, s in zip(base.shape, base.strides))
        low = sum(min(0, (d - 1) * s) for d, s in zip(base.shape, base.strides))
        if int(base.ptr) + low <= pointer <= int(base.ptr) + extent + base.dtype.itemsize:
            return CudaArray.from_pointer(pointer, shape, strides, dtype, base)
    if any(s == 0 for s in shape):
        return CudaArray.allocate(shape, dtype)
    raise RuntimeError("a kernel returned a device array kdsl cannot identify")

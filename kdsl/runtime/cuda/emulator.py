"""A CUDA device emulated on the CPU: the device code kdsl generates, run as threads.

``KDSL_CUDA_EMULATOR=1`` (or ``set_driver(EmulatedDriver())``) makes ``device="cuda"``
work on a machine without a GPU. Everything between the user's kernel and the driver is
the real CUDA path: the host program that launches kernels, the device kernels (grid-
stride loops, block reductions with shuffles and shared memory, atomics, the device
heap, ``print``, status slots), device arrays and their descriptors. What differs is the
last step: instead of libNVVM making PTX for the driver to load, the NVVM IR itself is
compiled for the host CPU, with

- blocks run one after another. The threads of a kernel with barriers or shuffles (the
  block reductions) are coroutines (``swapcontext``): each runs until it waits at a
  barrier, and once all have, they go on; a warp shuffle is an exchange through memory
  and a barrier. Threads that never wait for each other simply run in turn (one of the
  schedules a GPU may choose);
- the special registers (``threadIdx``, ``blockIdx``, ...) are globals of the module
  set by the scheduler, shared memory is a global, libdevice's ``__nv_*`` are the C
  library's math, ``vprintf`` a Python function, and NVVM's atomics LLVM's;
- device memory being host memory.

It is for tests and for debugging kernels where no GPU is present; it is slow (a context
switch per thread per barrier) and says nothing about PTX, libNVVM or a real driver.
"""

from __future__ import annotations

import ctypes
import itertools
import mmap
import re
import sys
import threading
from dataclasses import field
from typing import Any

import numpy as np

from kdsl.records import dataclass
from kdsl.runtime.cuda.emulated_module import (
    CONTEXT_BYTES,
    MAX_THREADS_PER_BLOCK,
    STACK_BYTES,
    compile_for_host,
    emulated_module_text,
    kernel_signatures,
    kernels_that_synchronise,
    wrapper_name,
)
from kdsl.runtime.cuda.errors import CudaError

LAUNCH_T = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
    ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))
COPY_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)
PRINT_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
NATIVE_LAUNCH_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                   ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p)
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_LAUNCH_FAILED = 719


@dataclass
class HostMemoryDriver:
    """Device memory that is host memory: allocations, copies and fills are memmoves, so
    the addresses a host program passes around can be read directly. The base of the
    emulator, and of the fake drivers tests use to check host-side logic."""

    memory: dict[int, Any] = field(default_factory=dict)
    freed: list[int] = field(default_factory=list)

    def make_current(self) -> None:
        pass

    def compute_capability(self) -> tuple[int, int]:
        return (9, 0)

    def driver_version(self) -> int:
        return 13000

    def alloc(self, nbytes: int) -> int:
        buffer = ctypes.create_string_buffer(max(int(nbytes), 1))
        address = ctypes.addressof(buffer)
        self.memory[address] = buffer
        return address

    def free(self, ptr: int) -> None:
        self.freed.append(ptr)
        self.memory.pop(ptr, None)

    def copy_to_device(self, dst: int, src: np.ndarray) -> None:
        src = np.ascontiguousarray(src)
        ctypes.memmove(dst, src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: np.ndarray, src: int) -> None:
        ctypes.memmove(dst.ctypes.data, src, dst.nbytes)

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def memset(self, ptr: int, nbytes: int, value: int) -> None:
        ctypes.memset(ptr, value, nbytes)

    def synchronize(self) -> None:
        pass

    def stream_synchronize(self, stream: int) -> None:
        pass

    def stream_wait(self, waiting: int, on: int) -> None:
        pass

    def unload_module(self, module: Any) -> None:
        pass


@dataclass
class _Module:
    library: Any  # keeps the native code loaded
    launch: Any  # the module's kdsl_emu_launch: a block's threads at once
    launch_in_turn: Any  # kdsl_emu_launch_in_turn: one thread after another
    wrappers: dict[str, int]  # kernel name -> address of its void(void**) wrapper
    synchronising: set[str]  # kernels whose threads wait for each other (barriers, shuffles)


class EmulatedDriver(HostMemoryDriver):
    """Runs the device kernels of kdsl's CUDA backend on the CPU (see the module's doc)."""

    code_format = "nvvm"  # what load_module takes: NVVM IR, not PTX

    def __init__(self) -> None:
        super().__init__()
        self.modules: dict[int, _Module] = {}
        self._handles = itertools.count(1)
        self.functions: dict[int, tuple[_Module, str]] = {}
        self.launch_count = 0
        self._lock = threading.Lock()  # one launch at a time: a module's blocks share globals
        self._stacks: Any = None  # the emulated threads' contexts and stacks (one launch at a time)
        self._launch_callback = LAUNCH_T(self._on_launch)
        self._copy_callback = COPY_T(self._on_copy)
        self._print_callback = PRINT_T(_device_printf)

    def device_name(self) -> str:
        return "kdsl CUDA emulator (CPU)"

    def load_module(self, image: bytes | str) -> int:
        text = image.decode() if isinstance(image, bytes) else image
        text = text.rstrip("\0")
        if "nvvmir.version" not in text:
            raise CudaError("CUDA_ERROR_INVALID_IMAGE", 200, "cuModuleLoadData",
                            "the emulator runs NVVM IR, not PTX")
        kernels = kernel_signatures(text)
        library, addresses = compile_for_host(
            emulated_module_text(text, kernels),
            ["kdsl_emu_launch", "kdsl_emu_launch_in_turn", "kdsl_emu_init"]
            + [wrapper_name(k) for k in kernels])
        init = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addresses["kdsl_emu_init"])
        init(ctypes.cast(self._print_callback, ctypes.c_void_p).value)
        module = _Module(library, NATIVE_LAUNCH_T(addresses["kdsl_emu_launch"]),
                         NATIVE_LAUNCH_T(addresses["kdsl_emu_launch_in_turn"]),
                         {k: addresses[wrapper_name(k)] for k in kernels},
                         kernels_that_synchronise(text, kernels))
        handle = next(self._handles)
        self.modules[handle] = module
        return handle

    def unload_module(self, module: Any) -> None:
        """Forgets the module and its kernels: its native code is unloaded with them."""
        loaded = self.modules.pop(module, None)
        for handle in [h for h, (m, _) in list(self.functions.items()) if m is loaded]:
            del self.functions[handle]

    def get_function(self, module: int, name: str) -> int:
        loaded = self.modules[module]
        if name not in loaded.wrappers:
            raise CudaError("CUDA_ERROR_NOT_FOUND", 500, "cuModuleGetFunction", f"no kernel {name}")
        handle = 0x1000 + next(self._handles)
        self.functions[handle] = (loaded, name)
        return handle

    def c_function_addresses(self) -> dict[str, int]:
        return {"cuLaunchKernel": int(ctypes.cast(self._launch_callback, ctypes.c_void_p).value or 0),
                "cuMemcpyDtoH_v2": int(ctypes.cast(self._copy_callback, ctypes.c_void_p).value or 0)}

    def _on_launch(self, f: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                   shared: int, stream: int, params: Any, extra: Any) -> int:
        found = self.functions.get(f)
        if found is None or gz != 1 or by != 1 or bz != 1 or not 1 <= bx <= MAX_THREADS_PER_BLOCK \
                or gx < 1 or gy < 1:
            return CUDA_ERROR_INVALID_VALUE
        module, name = found
        with self._lock:
            self.launch_count += 1
            # threads that never wait for each other may run one after another: that is
            # one of the schedules a GPU may choose, and much faster to emulate
            if name in module.synchronising:
                if self._stacks is None:  # contexts, then stacks: touched only as used
                    self._stacks = mmap.mmap(-1, MAX_THREADS_PER_BLOCK * (CONTEXT_BYTES + STACK_BYTES))
                stacks = ctypes.addressof(ctypes.c_char.from_buffer(self._stacks))
                failed = module.launch(module.wrappers[name], ctypes.cast(params, ctypes.c_void_p),
                                       gx, gy, bx, stacks)
            else:
                failed = module.launch_in_turn(module.wrappers[name],
                                               ctypes.cast(params, ctypes.c_void_p), gx, gy, bx, None)
        return CUDA_ERROR_LAUNCH_FAILED if failed else 0

    def _on_copy(self, dst: int, src: int, nbytes: int) -> int:
        ctypes.memmove(dst, src, nbytes)
        return 0


# --- vprintf ---------------------------------------------------------------------------

_SPEC = re.compile(rb"%(%|[-+ #0]*\d*(?:\.\d+)?(?:ll|l|h|hh)?[diouxXeEfgGcsp])")


def _device_printf(format_address: int, args_address: int) -> int:
    """``vprintf`` as the device runtime defines it: arguments packed in 8-byte slots."""
    fmt = ctypes.string_at(format_address)
    out: list[bytes] = []
    position = 0
    slot = 0
    for match in _SPEC.finditer(fmt):
        out.append(fmt[position:match.start()])
        position = match.end()
        spec = match.group(1)
        if spec == b"%":
            out.append(b"%")
            continue
        raw = ctypes.c_uint64.from_address(args_address + 8 * slot).value
        slot += 1
        conversion = spec[-1:]
        python_spec = "%" + re.sub(r"(ll|l|hh|h)", "", spec.decode())
        if conversion in b"eEfgG":
            value: Any = ctypes.c_double.from_buffer_copy(raw.to_bytes(8, "little")).value
        elif conversion == b"s":
            value = ctypes.string_at(raw).decode(errors="replace")
        elif conversion in b"di":
            value = raw - (1 << 64) if raw >= 1 << 63 else raw
        else:
            value = raw
        out.append((python_spec % value).encode())
    out.append(fmt[position:])
    sys.stdout.write(b"".join(out).decode(errors="replace"))
    sys.stdout.flush()
    return slot

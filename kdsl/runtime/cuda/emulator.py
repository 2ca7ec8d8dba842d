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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kdsl.runtime.cuda.errors import CudaError

LAUNCH_T = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
    ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))
COPY_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)
PRINT_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
NATIVE_LAUNCH_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                   ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p)
MAX_THREADS_PER_BLOCK = 1024
STACK_BYTES = 256 * 1024  # each emulated thread's stack (kernels that synchronise)
CONTEXT_BYTES = 4096  # room for a ucontext_t
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
        kernels = _kernel_signatures(text)
        library, addresses = _compile_for_host(
            emulated_module_text(text, kernels),
            ["kdsl_emu_launch", "kdsl_emu_launch_in_turn", "kdsl_emu_init"]
            + [_wrapper_name(k) for k in kernels])
        init = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addresses["kdsl_emu_init"])
        init(ctypes.cast(self._print_callback, ctypes.c_void_p).value)
        module = _Module(library, NATIVE_LAUNCH_T(addresses["kdsl_emu_launch"]),
                         NATIVE_LAUNCH_T(addresses["kdsl_emu_launch_in_turn"]),
                         {k: addresses[_wrapper_name(k)] for k in kernels},
                         _kernels_that_synchronise(text, kernels))
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


# --- the module: NVVM IR rewritten for the host -------------------------------------------

_DEFINE = re.compile(r'^define void @"(\w+)"\((.*)\)\s*$', re.M)


def _kernel_signatures(text: str) -> dict[str, list[str]]:
    """The kernels (functions annotated ``kernel``) and their parameters' types."""
    annotated = set(re.findall(r'!\{\s*void \([^)]*\)\* @"(\w+)", !"kernel", i32 1\s*\}', text))
    kernels: dict[str, list[str]] = {}
    for match in _DEFINE.finditer(text):
        name, params = match.groups()
        if name not in annotated:
            continue
        types = [p.rsplit(" %", 1)[0].strip() for p in _split_params(params)]
        kernels[name] = types
    return kernels


def _kernels_that_synchronise(text: str, kernels: dict[str, list[str]]) -> set[str]:
    """Kernels whose body has a barrier or a shuffle (kdsl's device code calls no other
    device functions, so a kernel's body is all it runs)."""
    bodies = re.split(r'^define ', text, flags=re.M)
    waiting = set()
    for body in bodies:
        name = re.match(r'void @"(\w+)"', body)
        if name and name.group(1) in kernels and re.search(r"llvm\.nvvm\.(barrier|shfl)", body):
            waiting.add(name.group(1))
    return waiting


def _split_params(params: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in params:
        if ch in "{[<(":
            depth += 1
        elif ch in "}]>)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


def _wrapper_name(kernel: str) -> str:
    return f"kdsl_emu_run_{kernel}"


def _wrapper(name: str, types: list[str]) -> str:
    """``void wrapper(i8** params)``: loads each parameter as cuLaunchKernel passes it."""
    lines = [f'define void @"{_wrapper_name(name)}"(i8** %params) {{', "entry:"]
    args = []
    for k, t in enumerate(types):
        lines += [f"  %slot{k} = getelementptr i8*, i8** %params, i64 {k}",
                  f"  %raw{k} = load i8*, i8** %slot{k}",
                  f"  %typed{k} = bitcast i8* %raw{k} to {t}*",
                  f"  %arg{k} = load {t}, {t}* %typed{k}"]
        args.append(f"{t} %arg{k}")
    lines += [f'  call void @"{name}"({", ".join(args)})', "  ret void", "}"]
    return "\n".join(lines)


def emulated_module_text(text: str, kernels: dict[str, list[str]]) -> str:
    """The NVVM module as host IR: NVVM's intrinsics, libdevice and ``vprintf`` renamed
    to the emulator's functions, shared memory made ordinary, the runtime appended."""
    text = re.sub(r"^target (triple|datalayout) = .*$", "", text, flags=re.M)
    text = re.sub(r"^!nvvm.*$", "", text, flags=re.M)  # named metadata: annotations, version
    text = re.sub(r"\s*addrspace\(\d+\)", "", text).replace("addrspacecast", "bitcast")
    text = re.sub(r'^declare [^@\n]*@"(llvm\.nvvm\.[\w.]+|vprintf)"\(.*$', "", text, flags=re.M)
    text = text.replace('@"llvm.nvvm.', '@"kdsl_emu.nvvm.').replace('@"vprintf"', '@"kdsl_emu.vprintf"')
    # libdevice's functions are the C library's of the same name without __nv_
    declared = set(re.findall(r'^declare [^@\n]*@"(\w+)"', text, flags=re.M))
    for name in sorted(n for n in declared if n.startswith("__nv_")):
        plain = name[len("__nv_"):]
        pattern = re.compile(rf'^declare ([^@\n]*)@"{name}"(.*)$', re.M)
        if plain in declared:
            text = pattern.sub("", text)
        else:
            text = pattern.sub(rf'declare \1@"{plain}"\2', text)
        text = text.replace(f'@"{name}"', f'@"{plain}"')
    wrappers = "\n\n".join(_wrapper(name, types) for name, types in kernels.items())
    return f"{text}\n\n{_RUNTIME}\n\n{wrappers}\n"


_RUNTIME = r"""
@kdsl_emu.current = internal global i32 0
@kdsl_emu.exchange = internal global [2048 x i32] zeroinitializer, align 16
@kdsl_emu.parity = internal global [1024 x i32] zeroinitializer, align 16
@kdsl_emu.state = internal global [1024 x i32] zeroinitializer, align 16
@kdsl_emu.contexts = internal global i8* null
@kdsl_emu.scheduler = internal global [4096 x i8] zeroinitializer, align 16
@kdsl_emu.function = internal global void (i8**)* null
@kdsl_emu.params = internal global i8** null
@kdsl_emu.ctaid.x = internal global i32 0
@kdsl_emu.ctaid.y = internal global i32 0
@kdsl_emu.nctaid.x = internal global i32 1
@kdsl_emu.nctaid.y = internal global i32 1
@kdsl_emu.ntid.x = internal global i32 1
@kdsl_emu.print = internal global i32 (i8*, i8*)* null

declare i32 @getcontext(i8*)
declare void @makecontext(i8*, void ()*, i32, ...)
declare i32 @swapcontext(i8*, i8*)

define void @kdsl_emu_init(i8* %print) {
  %fn = bitcast i8* %print to i32 (i8*, i8*)*
  store i32 (i8*, i8*)* %fn, i32 (i8*, i8*)** @kdsl_emu.print
  ret void
}

define internal void @kdsl_emu.set_grid(i32 %gx, i32 %gy, i32 %bx) {
  store i32 %gx, i32* @kdsl_emu.nctaid.x
  store i32 %gy, i32* @kdsl_emu.nctaid.y
  store i32 %bx, i32* @kdsl_emu.ntid.x
  ret void
}

; a block's threads one after another: for kernels whose threads never wait
define i32 @kdsl_emu_launch_in_turn(i8* %function, i8** %params, i32 %gx, i32 %gy, i32 %bx, i8* %stacks) {
entry:
  %fn = bitcast i8* %function to void (i8**)*
  call void @kdsl_emu.set_grid(i32 %gx, i32 %gy, i32 %bx)
  br label %rows
rows:
  %y = phi i32 [0, %entry], [%y.next, %rows.next]
  store i32 %y, i32* @kdsl_emu.ctaid.y
  br label %blocks
blocks:
  %x = phi i32 [0, %rows], [%x.next, %threads.done]
  store i32 %x, i32* @kdsl_emu.ctaid.x
  br label %threads
threads:
  %t = phi i32 [0, %blocks], [%t.next, %threads]
  store i32 %t, i32* @kdsl_emu.current
  call void %fn(i8** %params)
  %t.next = add i32 %t, 1
  %more = icmp ult i32 %t.next, %bx
  br i1 %more, label %threads, label %threads.done
threads.done:
  %x.next = add i32 %x, 1
  %more.x = icmp ult i32 %x.next, %gx
  br i1 %more.x, label %blocks, label %rows.next
rows.next:
  %y.next = add i32 %y, 1
  %more.y = icmp ult i32 %y.next, %gy
  br i1 %more.y, label %rows, label %done
done:
  ret i32 0
}

define internal void @kdsl_emu.thread_main() {
  %fn = load void (i8**)*, void (i8**)** @kdsl_emu.function
  %params = load i8**, i8*** @kdsl_emu.params
  call void %fn(i8** %params)
  %t = load i32, i32* @kdsl_emu.current
  %state = getelementptr [1024 x i32], [1024 x i32]* @kdsl_emu.state, i64 0, i32 %t
  store i32 2, i32* %state
  ret void
}

define internal i8* @kdsl_emu.context(i32 %t) {
  %base = load i8*, i8** @kdsl_emu.contexts
  %wide = zext i32 %t to i64
  %offset = mul i64 %wide, CONTEXT_BYTES
  %c = getelementptr i8, i8* %base, i64 %offset
  ret i8* %c
}

; a block's threads as coroutines of this thread: each runs until it waits at a barrier
; (or ends); once every thread has had its turn, the waiting ones go on
define i32 @kdsl_emu_launch(i8* %function, i8** %params, i32 %gx, i32 %gy, i32 %bx, i8* %memory) {
entry:
  store i8* %memory, i8** @kdsl_emu.contexts
  %stacks = getelementptr i8, i8* %memory, i64 CONTEXTS_BYTES
  %fn = bitcast i8* %function to void (i8**)*
  store void (i8**)* %fn, void (i8**)** @kdsl_emu.function
  store i8** %params, i8*** @kdsl_emu.params
  call void @kdsl_emu.set_grid(i32 %gx, i32 %gy, i32 %bx)
  %scheduler = getelementptr [4096 x i8], [4096 x i8]* @kdsl_emu.scheduler, i64 0, i64 0
  br label %rows
rows:
  %y = phi i32 [0, %entry], [%y.next, %rows.next]
  %failed.y = phi i32 [0, %entry], [%failed.x, %rows.next]
  store i32 %y, i32* @kdsl_emu.ctaid.y
  br label %blocks
blocks:
  %x = phi i32 [0, %rows], [%x.next, %block.done]
  %failed.b = phi i32 [%failed.y, %rows], [%failed.r, %block.done]
  store i32 %x, i32* @kdsl_emu.ctaid.x
  br label %make
make:
  %m = phi i32 [0, %blocks], [%m.next, %make]
  %failed.m = phi i32 [%failed.b, %blocks], [%failed.m.next, %make]
  %ctx = call i8* @kdsl_emu.context(i32 %m)
  %got = call i32 @getcontext(i8* %ctx)
  %failed.m.next = or i32 %failed.m, %got
  %link.raw = getelementptr i8, i8* %ctx, i64 8
  %link = bitcast i8* %link.raw to i8**
  store i8* %scheduler, i8** %link
  %sp.raw = getelementptr i8, i8* %ctx, i64 16
  %sp = bitcast i8* %sp.raw to i8**
  %m.wide = zext i32 %m to i64
  %offset = mul i64 %m.wide, STACK_BYTES
  %stack = getelementptr i8, i8* %stacks, i64 %offset
  store i8* %stack, i8** %sp
  %flags.raw = getelementptr i8, i8* %ctx, i64 24
  %flags = bitcast i8* %flags.raw to i32*
  store i32 0, i32* %flags
  %size.raw = getelementptr i8, i8* %ctx, i64 32
  %size = bitcast i8* %size.raw to i64*
  store i64 STACK_BYTES, i64* %size
  call void (i8*, void ()*, i32, ...) @makecontext(i8* %ctx, void ()* @kdsl_emu.thread_main, i32 0)
  %state.m = getelementptr [1024 x i32], [1024 x i32]* @kdsl_emu.state, i64 0, i32 %m
  store i32 0, i32* %state.m
  %parity.m = getelementptr [1024 x i32], [1024 x i32]* @kdsl_emu.parity, i64 0, i32 %m
  store i32 0, i32* %parity.m
  %m.next = add i32 %m, 1
  %more.m = icmp ult i32 %m.next, %bx
  br i1 %more.m, label %make, label %round
round:
  %failed.r = phi i32 [%failed.m.next, %make], [%failed.t, %round.end]
  br label %turn
turn:
  %t = phi i32 [0, %round], [%t.next, %turn.next]
  %running = phi i1 [false, %round], [%running.next, %turn.next]
  %state.t = getelementptr [1024 x i32], [1024 x i32]* @kdsl_emu.state, i64 0, i32 %t
  %st = load i32, i32* %state.t
  %done.t = icmp eq i32 %st, 2
  br i1 %done.t, label %turn.next, label %resume
resume:
  store i32 0, i32* %state.t
  store i32 %t, i32* @kdsl_emu.current
  %ctx.t = call i8* @kdsl_emu.context(i32 %t)
  %swapped = call i32 @swapcontext(i8* %scheduler, i8* %ctx.t)
  %after = load i32, i32* %state.t
  %waits = icmp ne i32 %after, 2
  br label %turn.next
turn.next:
  %running.next = phi i1 [%running, %turn], [%waits, %resume]
  %t.next = add i32 %t, 1
  %more.t = icmp ult i32 %t.next, %bx
  br i1 %more.t, label %turn, label %round.end
round.end:
  %failed.t = phi i32 [%failed.r, %turn.next]
  br i1 %running.next, label %round, label %block.done
block.done:
  %x.next = add i32 %x, 1
  %more.x = icmp ult i32 %x.next, %gx
  br i1 %more.x, label %blocks, label %rows.next
rows.next:
  %failed.x = phi i32 [%failed.r, %block.done]
  %y.next = add i32 %y, 1
  %more.y = icmp ult i32 %y.next, %gy
  br i1 %more.y, label %rows, label %done
done:
  ret i32 %failed.x
}

define internal i32 @kdsl_emu.tid() {
  %r = load i32, i32* @kdsl_emu.current
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.read.ptx.sreg.tid.x"() {
  %r = load i32, i32* @kdsl_emu.current
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.read.ptx.sreg.tid.y"() {
  ret i32 0
}

define internal i32 @"kdsl_emu.nvvm.read.ptx.sreg.ntid.x"() {
  %r = load i32, i32* @kdsl_emu.ntid.x
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.read.ptx.sreg.ctaid.x"() {
  %r = load i32, i32* @kdsl_emu.ctaid.x
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.read.ptx.sreg.ctaid.y"() {
  %r = load i32, i32* @kdsl_emu.ctaid.y
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.read.ptx.sreg.nctaid.x"() {
  %r = load i32, i32* @kdsl_emu.nctaid.x
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.read.ptx.sreg.nctaid.y"() {
  %r = load i32, i32* @kdsl_emu.nctaid.y
  ret i32 %r
}

; __syncthreads: this thread waits; the scheduler resumes it in the next round
define internal void @"kdsl_emu.nvvm.barrier0"() {
  %t = load i32, i32* @kdsl_emu.current
  %state = getelementptr [1024 x i32], [1024 x i32]* @kdsl_emu.state, i64 0, i32 %t
  store i32 1, i32* %state
  %ctx = call i8* @kdsl_emu.context(i32 %t)
  %scheduler = getelementptr [4096 x i8], [4096 x i8]* @kdsl_emu.scheduler, i64 0, i64 0
  %r = call i32 @swapcontext(i8* %ctx, i8* %scheduler)
  ret void
}

; shuffles alternate between two exchange buffers, so one barrier each suffices: a
; buffer is written again only after the barrier of the next shuffle
define internal i32 @"kdsl_emu.nvvm.shfl.sync.bfly.i32"(i32 %mask, i32 %value, i32 %lanes, i32 %clamp) {
  %t = load i32, i32* @kdsl_emu.current
  %pp = getelementptr [1024 x i32], [1024 x i32]* @kdsl_emu.parity, i64 0, i32 %t
  %parity = load i32, i32* %pp
  %flipped = xor i32 %parity, 1
  store i32 %flipped, i32* %pp
  %base = mul i32 %parity, 1024
  %mine.i = add i32 %base, %t
  %mine = getelementptr [2048 x i32], [2048 x i32]* @kdsl_emu.exchange, i64 0, i32 %mine.i
  store i32 %value, i32* %mine
  call void @"kdsl_emu.nvvm.barrier0"()
  %partner = xor i32 %t, %lanes
  %theirs.i = add i32 %base, %partner
  %theirs = getelementptr [2048 x i32], [2048 x i32]* @kdsl_emu.exchange, i64 0, i32 %theirs.i
  %r = load i32, i32* %theirs
  ret i32 %r
}

define internal float @"kdsl_emu.nvvm.atomic.load.add.f32.p0f32"(float* %p, float %v) {
  %old = atomicrmw fadd float* %p, float %v monotonic
  ret float %old
}

define internal double @"kdsl_emu.nvvm.atomic.load.add.f64.p0f64"(double* %p, double %v) {
  %old = atomicrmw fadd double* %p, double %v monotonic
  ret double %old
}

define internal i32 @"kdsl_emu.vprintf"(i8* %format, i8* %args) {
  %fn = load i32 (i8*, i8*)*, i32 (i8*, i8*)** @kdsl_emu.print
  %r = call i32 %fn(i8* %format, i8* %args)
  ret i32 %r
}
""".replace("CONTEXTS_BYTES", str(MAX_THREADS_PER_BLOCK * CONTEXT_BYTES)).replace(
    "CONTEXT_BYTES", str(CONTEXT_BYTES)).replace("STACK_BYTES", str(STACK_BYTES))


def _compile_for_host(text: str, symbols: list[str]) -> tuple[Any, dict[str, int]]:
    """Native code for the module, loaded the way the CPU backend loads kernels (and
    unloaded with the module); the addresses of ``symbols``."""
    from kdsl.codegen import cpu, native_code

    code = cpu.compile_to_object(text)
    loaded = native_code.load_linked_or_in_jit(code, symbols, "emulated")
    return loaded, loaded.addresses


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

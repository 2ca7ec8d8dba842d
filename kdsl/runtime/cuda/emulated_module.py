"""The CUDA emulator's module: the NVVM IR kdsl generates for the device, rewritten to run
on the host CPU (see emulator.py): each kernel gets a wrapper that the scheduler calls
per thread, the special registers and shared memory become globals, and a small runtime
written in LLVM IR runs blocks of threads as coroutines where they synchronise."""

from __future__ import annotations

import re
from typing import Any

MAX_THREADS_PER_BLOCK = 1024
STACK_BYTES = 256 * 1024  # each emulated thread's stack (kernels that synchronise)
CONTEXT_BYTES = 4096  # room for a ucontext_t


_DEFINE = re.compile(r'^define void @"(\w+)"\((.*)\)\s*$', re.M)


def kernel_signatures(text: str) -> dict[str, list[str]]:
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


def kernels_that_synchronise(text: str, kernels: dict[str, list[str]]) -> set[str]:
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


def wrapper_name(kernel: str) -> str:
    return f"kdsl_emu_run_{kernel}"


def _wrapper(name: str, types: list[str]) -> str:
    """``void wrapper(i8** params)``: loads each parameter as cuLaunchKernel passes it."""
    lines = [f'define void @"{wrapper_name(name)}"(i8** %params) {{', "entry:"]
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
; buffer is written again only after the barrier of the next shuffle. Every thread of the
; block must take part (kdsl's device code shuffles only in uniform control flow). The
; source lane follows PTX's shfl.sync: from b (the lane, distance or xor mask) and c (the
; clamp in bits 0-4, the segment mask in bits 8-12); a lane whose source falls outside
; its segment (below the distance for up, past the clamp otherwise) gets its own value.
; A source lane not in the member mask, or past the block's threads, is undefined on a
; GPU: here it reads as the recognisable 0xdeadbeef (-559038737).
define internal i32 @kdsl_emu.shfl(i32 %mode, i32 %mask, i32 %value, i32 %b, i32 %c) {
entry:
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
  %lane = and i32 %t, 31
  %warp = sub i32 %t, %lane
  %bval = and i32 %b, 31
  %cval = and i32 %c, 31
  %c.high = lshr i32 %c, 8
  %segmask = and i32 %c.high, 31
  %notseg = xor i32 %segmask, 31
  %lane.seg = and i32 %lane, %segmask
  %c.rest = and i32 %cval, %notseg
  %maxlane = or i32 %lane.seg, %c.rest
  switch i32 %mode, label %idx [i32 0, label %up
                                i32 1, label %down
                                i32 2, label %bfly]
up:
  %j.up = sub i32 %lane, %bval
  %p.up = icmp sge i32 %j.up, %maxlane
  br label %chosen
down:
  %j.down = add i32 %lane, %bval
  %p.down = icmp sle i32 %j.down, %maxlane
  br label %chosen
bfly:
  %j.bfly = xor i32 %lane, %bval
  %p.bfly = icmp sle i32 %j.bfly, %maxlane
  br label %chosen
idx:
  %b.rest = and i32 %bval, %notseg
  %j.idx = or i32 %lane.seg, %b.rest
  %p.idx = icmp sle i32 %j.idx, %maxlane
  br label %chosen
chosen:
  %j = phi i32 [%j.up, %up], [%j.down, %down], [%j.bfly, %bfly], [%j.idx, %idx]
  %p = phi i1 [%p.up, %up], [%p.down, %down], [%p.bfly, %bfly], [%p.idx, %idx]
  %source = select i1 %p, i32 %j, i32 %lane
  %bit = shl i32 1, %source
  %member = and i32 %mask, %bit
  %in.mask = icmp ne i32 %member, 0
  %partner = add i32 %warp, %source
  %threads = load i32, i32* @kdsl_emu.ntid.x
  %exists = icmp ult i32 %partner, %threads
  %defined = and i1 %in.mask, %exists
  br i1 %defined, label %read, label %undefined
read:
  %theirs.i = add i32 %base, %partner
  %theirs = getelementptr [2048 x i32], [2048 x i32]* @kdsl_emu.exchange, i64 0, i32 %theirs.i
  %r = load i32, i32* %theirs
  ret i32 %r
undefined:
  ret i32 -559038737
}

define internal i32 @"kdsl_emu.nvvm.shfl.sync.up.i32"(i32 %mask, i32 %value, i32 %b, i32 %c) {
  %r = call i32 @kdsl_emu.shfl(i32 0, i32 %mask, i32 %value, i32 %b, i32 %c)
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.shfl.sync.down.i32"(i32 %mask, i32 %value, i32 %b, i32 %c) {
  %r = call i32 @kdsl_emu.shfl(i32 1, i32 %mask, i32 %value, i32 %b, i32 %c)
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.shfl.sync.bfly.i32"(i32 %mask, i32 %value, i32 %b, i32 %c) {
  %r = call i32 @kdsl_emu.shfl(i32 2, i32 %mask, i32 %value, i32 %b, i32 %c)
  ret i32 %r
}

define internal i32 @"kdsl_emu.nvvm.shfl.sync.idx.i32"(i32 %mask, i32 %value, i32 %b, i32 %c) {
  %r = call i32 @kdsl_emu.shfl(i32 3, i32 %mask, i32 %value, i32 %b, i32 %c)
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


def compile_for_host(text: str, symbols: list[str]) -> tuple[Any, dict[str, int]]:
    """Native code for the module, loaded the way the CPU backend loads kernels (and
    unloaded with the module); the addresses of ``symbols``."""
    from kdsl.codegen import cpu, native_code

    code = cpu.compile_to_object(text)
    loaded = native_code.load_linked_or_in_jit(code, symbols, "emulated")
    return loaded, loaded.addresses

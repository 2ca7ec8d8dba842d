"""Matrix products ``c = a @ b`` on the CPU in the BLIS structure, emitted as LLVM IR.

- Blocks of ``b`` (``KC x NC``) and of ``a`` (``MC x KC``) are packed into contiguous
  micro-panels (``NR`` columns, ``MR`` rows; zero-padded at the edges), read through any
  strides (transposed operands are packed as they are, never copied first).
- A register-blocked micro-kernel keeps an ``MR x NR`` tile of ``c`` in vector registers
  and accumulates one outer product per step along ``k`` with FMAs; its sizes follow the
  host's vector registers (32 registers of 512 bits with AVX-512, 16 of 256 otherwise).
- Called outside a parallel region, the product runs on a team of threads (the runtime's
  ``parallel`` hook) that claim blocks of rows of ``c`` as they go (``gemm_team``), or,
  where ``c`` is wider than tall, each compute its own block of columns; inside one (a
  matmul in a ``prange``) it runs on the calling thread.
- Packing buffers are allocated per call with ``malloc`` (reused by the C allocator, so a
  repeated call makes no page faults), on the stack when they are small.
- A product whose ``b`` fits in the L2 cache is not packed (``gemm_small``).

This file holds the blocking and the driver (the loops around the micro-kernel, threads,
the entry point); ``gemm_micro`` the micro-kernel and packing, ``gemm_loops`` the IR loop
helpers, ``gemm_op`` the kernel-side call.
"""

from __future__ import annotations

import functools
from typing import Any

from llvmlite import ir

from kdsl.codegen.gemm_loops import ceil_div, const, loop, round_up, smax, smin
from kdsl.codegen.gemm_micro import MicroKernelAndPacking
from kdsl.codegen.gemm_small import SmallProduct, small_b_bytes
from kdsl.codegen.gemm_team import TeamProduct
from kdsl.codegen.llvm_types import f32, i1, i8_ptr, i32, i64, void
from kdsl.records import dataclass

GEMM_ARGS = [i64, i64, i64, i8_ptr, i64, i64, i8_ptr, i64, i64, i8_ptr, i64]
STACK_BUFFER_BYTES = 1 << 16  # packing buffers up to this size live on the stack
WORK_PER_THREAD_UNIT = 8  # multiply-adds per unit of the runtime's parallel-work threshold


@dataclass(frozen=True)
class Blocking:
    """Register and cache blocking for one scalar type on this host."""

    lanes: int  # elements per vector register
    mr: int  # rows of the register tile
    nr: int  # columns of the register tile (a multiple of lanes)
    kc: int  # depth of a packed block (a B micro-panel of kc x nr stays in L1)
    mc: int  # rows of a packed block of a (in L2; a multiple of mr)
    nc: int  # columns of a packed block of b (in L3; a multiple of nr)


@functools.cache
def host_has_avx512() -> bool:
    from kdsl.codegen.cpu import host_cpu_features

    features = host_cpu_features()
    return bool(features.get("avx512f", False))


def blocking(itemsize: int, avx512: bool) -> Blocking:
    if avx512:
        lanes = 64 // itemsize
        # 8 x 3 registers: 24 accumulators, 11 loads per 24 FMAs (14 x 2 was 4-8% slower
        # at 1024^3 on one thread); blocks of columns a whole number of register tiles
        return Blocking(lanes, 8, 3 * lanes, 256 if itemsize == 4 else 192, 8 * 21,
                        3 * lanes * 85)
    lanes = 32 // itemsize
    return Blocking(lanes, 6, 2 * lanes, 256, 6 * 24, 4096 if itemsize == 4 else 2048)


class GemmEmitter(MicroKernelAndPacking, TeamProduct):
    """The routines of one scalar type in one module, made on first use."""

    def __init__(self, module: ir.Module, hooks: Any, scalar: ir.Type, avx512: bool) -> None:
        self.module = module
        self.hooks = hooks
        self.t = scalar
        self.itemsize = 4 if scalar == f32 else 8
        self.block = blocking(self.itemsize, avx512)
        self.vec = ir.VectorType(scalar, self.block.lanes)
        self.tp = scalar.as_pointer()
        suffix = "f32" if scalar == f32 else "f64"
        self.prefix = f"kdsl.gemm.{suffix}"
        self.fma = self._declare(f"llvm.fma.v{self.block.lanes}{suffix}",
                                 ir.FunctionType(self.vec, [self.vec] * 3))
        self.malloc = self._declare("malloc", ir.FunctionType(i8_ptr, [i64]))
        self.free = self._declare("free", ir.FunctionType(void, [i8_ptr]))
        small = SmallProduct(module, scalar, self.block.lanes, avx512, self.prefix, self.fma)
        self.small, self.small_widths = small.fn, small.widths
        self.micro = self._micro_kernel()
        self.pack_a = self._pack(rows_first=True)
        self.pack_b = self._pack(rows_first=False)
        self.serial = self._serial()
        self.with_buffers = self._with_buffers()
        self.args_t = ir.LiteralStructType(GEMM_ARGS + [i64, i64])
        self.region = self._region()
        self.team_ctx_t = self._team_context_type()
        self.team_unpacked = self._rows_region(packed=False)
        self.team_packed = self._rows_region(packed=True)
        self.product = self._product()
        self.entry = self._entry()

    def _declare(self, name: str, fnty: ir.FunctionType) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, fnty, name)

    def _function(self, name: str, args: list[ir.Type], ret: ir.Type = void) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(self.module, ir.FunctionType(ret, args), f"{self.prefix}.{name}")
        fn.linkage = "internal"
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    # --- the loops around the micro-kernel ------------------------------------------

    def _serial(self) -> ir.Function:
        """``c[:m, :n] = a @ b`` on the calling thread with the given packing buffers."""
        blk = self.block
        fn, b = self._function("serial", [i64, i64, i64, self.tp, i64, i64, self.tp, i64, i64,
                                          self.tp, i64, self.tp, self.tp])
        m, n, k, a, rsa, csa, bm, rsb, csb, c, rsc, buf_a, buf_b = fn.args
        fn.attributes.add("nounwind")
        zero = ir.Constant(self.t, 0.0)
        with b.if_then(b.icmp_signed("<=", k, const(0))):
            def zero_row(i: ir.Value) -> None:
                row = b.gep(c, [b.mul(i, rsc)])
                loop(b, const(0), n, 1, lambda j: b.store(zero, b.gep(row, [j])), "zero.j")

            loop(b, const(0), m, 1, zero_row, "zero.i")

        def over_jc(jc: ir.Value) -> None:
            nc = smin(b, const(blk.nc), b.sub(n, jc))

            def over_pc(pc: ir.Value) -> None:
                kc = smin(b, const(blk.kc), b.sub(k, pc))
                accumulate = b.icmp_signed(">", pc, const(0))
                b_block = b.gep(bm, [b.add(b.mul(pc, rsb), b.mul(jc, csb))])
                b.call(self.pack_b, [nc, kc, b_block, csb, rsb, buf_b])

                def over_ic(ic: ir.Value) -> None:
                    mc = smin(b, const(blk.mc), b.sub(m, ic))
                    a_block = b.gep(a, [b.add(b.mul(ic, rsa), b.mul(pc, csa))])
                    b.call(self.pack_a, [mc, kc, a_block, rsa, csa, buf_a])

                    def over_jr(jr: ir.Value) -> None:
                        nr = smin(b, const(blk.nr), b.sub(nc, jr))
                        b_panel = b.gep(buf_b, [b.mul(jr, kc)])

                        def over_ir(i_r: ir.Value) -> None:
                            mr = smin(b, const(blk.mr), b.sub(mc, i_r))
                            a_panel = b.gep(buf_a, [b.mul(i_r, kc)])
                            row = b.add(ic, i_r)
                            tile = b.gep(c, [b.add(b.mul(row, rsc), b.add(jc, jr))])
                            b.call(self.micro, [kc, a_panel, b_panel, tile, rsc, mr, nr, accumulate])

                        loop(b, const(0), mc, blk.mr, over_ir, "ir")

                    loop(b, const(0), nc, blk.nr, over_jr, "jr")

                loop(b, const(0), m, blk.mc, over_ic, "ic")

            loop(b, const(0), k, blk.kc, over_pc, "pc")

        loop(b, const(0), n, blk.nc, over_jc, "jc")
        b.ret_void()
        return fn

    def _unpacked(self, b: ir.IRBuilder, n: ir.Value, k: ir.Value, csb: ir.Value) -> ir.Value:
        """Whether ``b`` is multiplied unpacked: unit column stride, fits in L2."""
        b_bytes = b.mul(b.mul(k, n), const(self.itemsize))
        return b.and_(b.icmp_signed("==", csb, const(1)),
                      b.icmp_signed("<=", b_bytes, const(small_b_bytes())))

    def _buffer_sizes(self, b: ir.IRBuilder, m: ir.Value, n: ir.Value, k: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Elements of the packing buffers of a and b for an ``m x n x k`` product."""
        blk = self.block
        kc = smax(b, smin(b, const(blk.kc), k), const(1))
        mc = smin(b, const(blk.mc), round_up(b, m, blk.mr))
        nc = smin(b, const(blk.nc), round_up(b, n, blk.nr))
        return b.mul(mc, kc), b.mul(nc, kc)

    def _with_buffers(self) -> ir.Function:
        """The serial product: unpacked where ``b`` is small and has rows, else with
        packing buffers of its own (stack or heap)."""
        fn, b = self._function("with_buffers", GEMM_ARGS, i1)
        args = list(fn.args)
        m, n, k = args[:3]
        typed = [args[0], args[1], args[2],
                 b.bitcast(args[3], self.tp), args[4], args[5],
                 b.bitcast(args[6], self.tp), args[7], args[8],
                 b.bitcast(args[9], self.tp), args[10]]
        with b.if_then(self._unpacked(b, n, k, typed[8]), likely=False):
            b.call(self.small, typed[:8] + typed[9:])
            b.ret(ir.Constant(i1, 1))
        size_a, size_b = self._buffer_sizes(b, m, n, k)
        pad = const(64 // self.itemsize)
        total = b.add(b.add(size_a, size_b), b.mul(pad, const(2)))
        bytes_ = b.mul(total, const(self.itemsize))
        small = b.icmp_signed("<=", bytes_, const(STACK_BUFFER_BYTES))
        stack_bb = b.append_basic_block("stack")
        heap_bb = b.append_basic_block("heap")
        run_bb = b.append_basic_block("run")
        entry = b.block
        stack = b.alloca(ir.IntType(8), size=STACK_BUFFER_BYTES + 64)
        b.cbranch(small, stack_bb, heap_bb)
        b.position_at_end(stack_bb)
        b.branch(run_bb)
        b.position_at_end(heap_bb)
        heap = b.call(self.malloc, [bytes_])
        ok = b.icmp_unsigned("!=", heap, ir.Constant(i8_ptr, None))
        heap_ok = b.append_basic_block("heap.ok")
        fail = b.append_basic_block("heap.fail")
        b.cbranch(ok, heap_ok, fail)
        b.position_at_end(fail)
        b.ret(ir.Constant(i1, 0))  # out of memory
        b.position_at_end(heap_ok)
        b.branch(run_bb)
        b.position_at_end(run_bb)
        raw = b.phi(i8_ptr)
        raw.add_incoming(stack, stack_bb)
        raw.add_incoming(heap, heap_ok)
        del entry
        as_int = b.ptrtoint(raw, i64)
        aligned = b.and_(b.add(as_int, const(63)), const(-64))
        buf_a = b.inttoptr(aligned, self.tp)
        buf_b = b.gep(buf_a, [round_up(b, size_a, 64 // self.itemsize)])
        b.call(self.serial, typed + [buf_a, buf_b])
        with b.if_then(b.not_(small)):
            b.call(self.free, [raw])
        b.ret(ir.Constant(i1, 1))
        return fn

    # --- threads ------------------------------------------------------------------

    def _region(self) -> ir.Function:
        """One thread's share: a block of rows (when ``c`` is taller than wide) or of
        columns, in whole micro-tiles."""
        blk = self.block
        fn, b = self._function("region", [i8_ptr])
        ctx = b.bitcast(fn.args[0], self.args_t.as_pointer())
        fields = [b.load(b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, f)]))
                  for f in range(len(GEMM_ARGS))]
        m, n, k, a, rsa, csa, bm, rsb, csb, c, rsc = fields
        tid = b.sext(b.call(self.hooks.load(b, "thread_num"), []), i64)
        team = b.sext(b.call(self.hooks.load(b, "num_threads"), []), i64)
        by_rows = b.icmp_signed(">=", m, n)
        extent = b.select(by_rows, m, n)
        unit = b.select(by_rows, const(blk.mr), const(blk.nr))
        tiles = ceil_div(b, extent, unit)
        per_thread = b.mul(ceil_div(b, tiles, team), unit)
        first = smin(b, b.mul(tid, per_thread), extent)
        count = b.sub(smin(b, b.add(first, per_thread), extent), first)
        with b.if_then(b.icmp_signed(">", count, const(0))):
            itemsize = const(self.itemsize)
            row_offset = b.select(by_rows, first, const(0))
            col_offset = b.select(by_rows, const(0), first)
            a_part = b.gep(a, [b.mul(b.mul(row_offset, rsa), itemsize)])
            b_part = b.gep(bm, [b.mul(b.mul(col_offset, csb), itemsize)])
            c_part = b.gep(c, [b.mul(b.add(b.mul(row_offset, rsc), col_offset), itemsize)])
            ok = b.call(self.with_buffers, [b.select(by_rows, count, m), b.select(by_rows, n, count),
                                            k, a_part, rsa, csa, b_part, rsb, csb, c_part, rsc])
            with b.if_then(b.not_(ok), likely=False):
                failed = b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, len(GEMM_ARGS))])
                b.store(const(1), failed)
        b.ret_void()
        return fn

    def _product(self) -> ir.Function:
        """``c = a @ b`` for ``c`` with unit column stride, not overlapping ``a`` or ``b``:
        on a team of threads when the product is big enough and the caller is not in a
        parallel region (``nested``). Returns 0, or 1 where a packing buffer could not be
        allocated."""
        from kdsl.codegen.parallel_team import MAX_THREADS, SETTINGS_T

        fn, b = self._function("product", GEMM_ARGS + [i1], i32)
        args = list(fn.args[:len(GEMM_ARGS)])
        nested = fn.args[len(GEMM_ARGS)]
        m, n, k = args[:3]
        settings = b.bitcast(self.hooks.load(b, "requested_threads"), SETTINGS_T.as_pointer())
        requested = b.load(b.gep(settings, [ir.Constant(i32, 0), ir.Constant(i32, 0)]))
        min_work = b.load(b.gep(settings, [ir.Constant(i32, 0), ir.Constant(i32, 2)]))
        work = b.sdiv(b.mul(b.mul(m, n), k), const(WORK_PER_THREAD_UNIT))
        threads = b.select(b.icmp_signed("<", requested, ir.Constant(i32, 1)), ir.Constant(i32, 1),
                           requested)
        threads = b.select(b.icmp_signed(">", threads, ir.Constant(i32, MAX_THREADS)),
                           ir.Constant(i32, MAX_THREADS), threads)
        team = b.select(b.icmp_signed(">=", work, min_work), threads, ir.Constant(i32, 1))
        parallel = b.and_(b.not_(nested), b.icmp_signed(">", team, ir.Constant(i32, 1)))
        on_team = b.append_basic_block("team")
        alone = b.append_basic_block("alone")
        b.cbranch(parallel, on_team, alone)
        b.position_at_end(on_team)
        with b.if_then(self._unpacked(b, n, k, args[8])):
            b.ret(self._emit_rows_team(b, args, team, packed=False))
        with b.if_then(b.and_(b.icmp_signed(">=", m, n), b.icmp_signed(">", k, const(0)))):
            b.ret(self._emit_rows_team(b, args, team, packed=True))
        ctx = b.alloca(self.args_t)
        for f, value in enumerate(args + [const(0), const(0)]):
            b.store(value, b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, f)]))
        run_team = self.hooks.load(b, "parallel")
        b.call(run_team, [self.region, b.bitcast(ctx, i8_ptr), team, ir.Constant(i32, 0)])
        failed = b.load(b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, len(GEMM_ARGS))]))
        b.ret(b.trunc(failed, i32))
        b.position_at_end(alone)
        ok = b.call(self.with_buffers, args)
        b.ret(b.zext(b.not_(ok), i32))
        return fn


    def _extent(self, b: ir.IRBuilder, data: ir.Value, rows: ir.Value, cols: ir.Value,
                rs: ir.Value, cs: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The first and one past the last byte address a strided matrix touches."""
        start = b.ptrtoint(data, i64)
        size = const(self.itemsize)
        low, high = start, start
        for count, stride in ((rows, rs), (cols, cs)):
            span = b.mul(b.mul(b.sub(count, const(1)), stride), size)
            low = b.add(low, smin(b, span, const(0)))
            high = b.add(high, smax(b, span, const(0)))
        return low, b.add(high, size)

    def _entry(self) -> ir.Function:
        """``c = a @ b`` for any ``c``: computed in place where ``c`` has unit column
        stride and overlaps neither operand, else into a buffer that is then copied into
        ``c`` (as NumPy computes ``c[...] = a @ b`` before assigning). Returns 0, or 1
        where memory could not be allocated."""
        fn, b = self._function("entry", GEMM_ARGS + [i64, i1], i32)
        args = list(fn.args[:len(GEMM_ARGS)])
        csc, nested = fn.args[len(GEMM_ARGS):]
        m, n, k, a, rsa, csa, bm, rsb, csb, c, rsc = args
        c_low, c_high = self._extent(b, c, m, n, rsc, csc)
        overlap = ir.Constant(i1, 0)
        for data, rows, cols, rs, cs in ((a, m, k, rsa, csa), (bm, k, n, rsb, csb)):
            low, high = self._extent(b, data, rows, cols, rs, cs)
            both = b.and_(b.icmp_signed("<", c_low, high), b.icmp_signed("<", low, c_high))
            overlap = b.or_(overlap, both)
        empty = b.or_(b.icmp_signed("<=", m, const(0)), b.icmp_signed("<=", n, const(0)))
        with b.if_then(empty):
            b.ret(ir.Constant(i32, 0))
        in_place = b.and_(b.icmp_signed("==", csc, const(1)), b.not_(overlap))
        with b.if_then(in_place, likely=True):
            b.ret(b.call(self.product, args + [nested]))
        bytes_ = b.mul(b.mul(m, n), const(self.itemsize))
        raw = b.call(self.malloc, [bytes_])
        with b.if_then(b.icmp_unsigned("==", raw, ir.Constant(i8_ptr, None)), likely=False):
            b.ret(ir.Constant(i32, 1))
        failed = b.call(self.product, args[:9] + [raw, n, nested])
        with b.if_then(b.icmp_unsigned("==", failed, ir.Constant(i32, 0)), likely=True):
            source = b.bitcast(raw, self.tp)
            target = b.bitcast(c, self.tp)

            def copy_row(i: ir.Value) -> None:
                row_in = b.gep(source, [b.mul(i, n)])
                row_out = b.gep(target, [b.mul(i, rsc)])
                loop(b, const(0), n, 1, lambda j: b.store(
                    b.load(b.gep(row_in, [j])), b.gep(row_out, [b.mul(j, csc)])), "copy.j")

            loop(b, const(0), m, 1, copy_row, "copy.i")
        b.call(self.free, [raw])
        b.ret(failed)
        return fn



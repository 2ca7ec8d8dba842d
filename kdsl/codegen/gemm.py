"""Matrix products ``c = a @ b`` on the CPU in the BLIS structure, emitted as LLVM IR.

- Blocks of ``b`` (``KC x NC``) and of ``a`` (``MC x KC``) are packed into contiguous
  micro-panels (``NR`` columns, ``MR`` rows; zero-padded at the edges), read through any
  strides (transposed operands are packed as they are, never copied first).
- A register-blocked micro-kernel keeps an ``MR x NR`` tile of ``c`` in vector registers
  and accumulates one outer product per step along ``k`` with FMAs; its sizes follow the
  host's vector registers (32 registers of 512 bits with AVX-512, 16 of 256 otherwise).
- Called outside a parallel region, the product runs on a team of threads (the runtime's
  ``parallel`` hook), each computing its own block of rows or columns of ``c``; inside
  one (a matmul in a ``prange``) it runs on the calling thread.
- Packing buffers are allocated per call with ``malloc`` (reused by the C allocator, so a
  repeated call makes no page faults), on the stack when they are small.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl.codegen.llvm_types import f32, i1, i8_ptr, i32, i64, void

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
    mc: int  # rows of a packed block of a (in L2)
    nc: int  # columns of a packed block of b (in L3)


@functools.cache
def host_has_avx512() -> bool:
    from kdsl.codegen.cpu import llvm

    features = llvm().get_host_cpu_features()
    return bool(features.get("avx512f", False))


def blocking(itemsize: int, avx512: bool) -> Blocking:
    if avx512:
        lanes = 64 // itemsize
        return Blocking(lanes, 14, 2 * lanes, 256 if itemsize == 4 else 192,
                        14 * 12, 4096 if itemsize == 4 else 2048)
    lanes = 32 // itemsize
    return Blocking(lanes, 6, 2 * lanes, 256, 6 * 24, 4096 if itemsize == 4 else 2048)


def _const(v: int) -> ir.Constant:
    return ir.Constant(i64, v)


def _loop(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: ir.Value | int,
          body: Callable[[ir.Value], None], name: str = "loop") -> None:
    """``for iv in range(start, stop, step): body(iv)`` (positive step)."""
    if isinstance(step, int):
        step = _const(step)
    fn = b.function
    pre = b.block
    header = fn.append_basic_block(f"{name}.header")
    body_bb = fn.append_basic_block(f"{name}.body")
    exit_bb = fn.append_basic_block(f"{name}.end")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(i64)
    iv.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", iv, stop), body_bb, exit_bb)
    b.position_at_end(body_bb)
    body(iv)
    iv.add_incoming(b.add(iv, step, flags=["nsw"]), b.block)
    b.branch(header)
    b.position_at_end(exit_bb)


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _ceil_div(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.sdiv(b.add(x, b.sub(y, _const(1))), y)


def _round_up(b: ir.IRBuilder, x: ir.Value, multiple: int) -> ir.Value:
    return b.mul(_ceil_div(b, x, _const(multiple)), _const(multiple))


class GemmEmitter:
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
        self.micro = self._micro_kernel()
        self.pack_a = self._pack(rows_first=True)
        self.pack_b = self._pack(rows_first=False)
        self.serial = self._serial()
        self.with_buffers = self._with_buffers()
        self.args_t = ir.LiteralStructType(GEMM_ARGS + [i64, i64])
        self.region = self._region()
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

    # --- the micro-kernel ----------------------------------------------------------

    def _micro_kernel(self) -> ir.Function:
        """``c[:mr, :nr] (+)= a_panel @ b_panel`` over ``kc`` steps; ``c`` has unit column
        stride and row stride ``rsc`` (elements)."""
        blk = self.block
        mr_n, nv = blk.mr, blk.nr // blk.lanes
        fn, b = self._function("micro", [i64, self.tp, self.tp, self.tp, i64, i64, i64, i1])
        kc, a, bp, c, rsc, mr, nr, accumulate = fn.args
        fn.attributes.add("nounwind")
        entry = b.block
        loop = fn.append_basic_block("k.body")
        done = fn.append_basic_block("k.end")
        zero = ir.Constant(self.vec, None)
        b.cbranch(b.icmp_signed(">", kc, _const(0)), loop, done)
        b.position_at_end(loop)
        k = b.phi(i64)
        k.add_incoming(_const(0), entry)
        accs = [[b.phi(self.vec) for _ in range(nv)] for _ in range(mr_n)]
        for row in accs:
            for p in row:
                p.add_incoming(zero, entry)
        b_row = b.gep(bp, [b.mul(k, _const(blk.nr))])
        vectors = [b.load(b.bitcast(b.gep(b_row, [_const(v * blk.lanes)]), self.vec.as_pointer()),
                          align=64) for v in range(nv)]
        a_col = b.gep(a, [b.mul(k, _const(mr_n))])
        mask = ir.Constant(ir.VectorType(i32, blk.lanes), [0] * blk.lanes)
        undef = ir.Constant(self.vec, ir.Undefined)
        new = []
        for r in range(mr_n):
            x = b.load(b.gep(a_col, [_const(r)]))
            splat = b.shuffle_vector(b.insert_element(undef, x, ir.Constant(i32, 0)), undef, mask)
            new.append([b.call(self.fma, [splat, vectors[v], accs[r][v]]) for v in range(nv)])
        next_k = b.add(k, _const(1), flags=["nsw"])
        k.add_incoming(next_k, loop)
        for r in range(mr_n):
            for v in range(nv):
                accs[r][v].add_incoming(new[r][v], loop)
        b.cbranch(b.icmp_signed("<", next_k, kc), loop, done)
        b.position_at_end(done)
        finals = [[b.phi(self.vec) for _ in range(nv)] for _ in range(mr_n)]
        for r in range(mr_n):
            for v in range(nv):
                finals[r][v].add_incoming(zero, entry)
                finals[r][v].add_incoming(new[r][v], loop)
        full = b.and_(b.icmp_signed("==", mr, _const(mr_n)), b.icmp_signed("==", nr, _const(blk.nr)))
        with b.if_else(full) as (whole, partial):
            with whole:
                for r in range(mr_n):
                    row = b.gep(c, [b.mul(_const(r), rsc)])
                    for v in range(nv):
                        pointer = b.bitcast(b.gep(row, [_const(v * blk.lanes)]), self.vec.as_pointer())
                        value = finals[r][v]
                        old = b.load(pointer, align=self.itemsize)
                        value = b.select(accumulate, b.fadd(value, old), value)
                        b.store(value, pointer, align=self.itemsize)
            with partial:
                tile = b.alloca(self.t, size=mr_n * blk.nr)
                tile.align = 64
                for r in range(mr_n):
                    for v in range(nv):
                        pointer = b.bitcast(b.gep(tile, [_const(r * blk.nr + v * blk.lanes)]),
                                            self.vec.as_pointer())
                        b.store(finals[r][v], pointer, align=64)

                def row_loop(i: ir.Value) -> None:
                    def col_loop(j: ir.Value) -> None:
                        value = b.load(b.gep(tile, [b.add(b.mul(i, _const(blk.nr)), j)]))
                        target = b.gep(c, [b.add(b.mul(i, rsc), j)])
                        summed = b.fadd(value, b.load(target))
                        b.store(b.select(accumulate, summed, value), target)

                    _loop(b, _const(0), nr, 1, col_loop, "edge.j")

                _loop(b, _const(0), mr, 1, row_loop, "edge.i")
        b.ret_void()
        return fn

    # --- packing ------------------------------------------------------------------

    def _pack(self, rows_first: bool) -> ir.Function:
        """Packs a block into micro-panels. For ``a`` (``rows_first``): ``extent`` rows by
        ``kc`` columns into panels of MR rows, ``buf[(p*kc + k)*MR + r] = a[p*MR + r, k]``;
        for ``b``: ``kc`` rows by ``extent`` columns into panels of NR columns,
        ``buf[(p*kc + k)*NR + j] = b[k, p*NR + j]``. Zero beyond ``extent``.
        Strides in elements: ``s_panel`` along the panelled axis, ``s_k`` along k."""
        width = self.block.mr if rows_first else self.block.nr
        name = "pack_a" if rows_first else "pack_b"
        fn, b = self._function(name, [i64, i64, self.tp, i64, i64, self.tp])
        extent, kc, src, s_panel, s_k, buf = fn.args
        fn.attributes.add("nounwind")
        w = _const(width)
        zero = ir.Constant(self.t, 0.0)

        def panel(p0: ir.Value) -> None:  # p0: the first row/column of the panel
            count = _min(b, w, b.sub(extent, p0))
            out = b.gep(buf, [b.mul(p0, kc)])
            base = b.gep(src, [b.mul(p0, s_panel)])
            is_full = b.icmp_signed("==", count, w)
            unit = b.icmp_signed("==", s_panel, _const(1))
            with b.if_else(is_full) as (full, partial):
                with full:
                    with b.if_else(unit) as (contiguous, strided):
                        with contiguous:  # one vectorisable copy of `width` per k
                            def step_unit(k: ir.Value) -> None:
                                row = b.gep(base, [b.mul(k, s_k)])
                                dest = b.gep(out, [b.mul(k, w)])
                                for j in range(width):
                                    b.store(b.load(b.gep(row, [_const(j)])), b.gep(dest, [_const(j)]))

                            _loop(b, _const(0), kc, 1, step_unit, "pack.unit")
                        with strided:
                            def step(k: ir.Value) -> None:
                                row = b.gep(base, [b.mul(k, s_k)])
                                dest = b.gep(out, [b.mul(k, w)])
                                for j in range(width):
                                    value = b.load(b.gep(row, [b.mul(_const(j), s_panel)]))
                                    b.store(value, b.gep(dest, [_const(j)]))

                            _loop(b, _const(0), kc, 1, step, "pack.strided")
                with partial:
                    def step_edge(k: ir.Value) -> None:  # count elements, then zeros
                        row = b.gep(base, [b.mul(k, s_k)])
                        dest = b.gep(out, [b.mul(k, w)])

                        def copy(j: ir.Value) -> None:
                            value = b.load(b.gep(row, [b.mul(j, s_panel)]))
                            b.store(value, b.gep(dest, [j]))

                        _loop(b, _const(0), count, 1, copy, "pack.copy")
                        _loop(b, count, w, 1, lambda j: b.store(zero, b.gep(dest, [j])), "pack.pad")

                    _loop(b, _const(0), kc, 1, step_edge, "pack.edge")

        _loop(b, _const(0), extent, w, panel, "panels")
        b.ret_void()
        return fn

    # --- the loops around the micro-kernel ------------------------------------------

    def _serial(self) -> ir.Function:
        """``c[:m, :n] = a @ b`` on the calling thread with the given packing buffers."""
        blk = self.block
        fn, b = self._function("serial", [i64, i64, i64, self.tp, i64, i64, self.tp, i64, i64,
                                          self.tp, i64, self.tp, self.tp])
        m, n, k, a, rsa, csa, bm, rsb, csb, c, rsc, buf_a, buf_b = fn.args
        fn.attributes.add("nounwind")
        zero = ir.Constant(self.t, 0.0)
        with b.if_then(b.icmp_signed("<=", k, _const(0))):
            def zero_row(i: ir.Value) -> None:
                row = b.gep(c, [b.mul(i, rsc)])
                _loop(b, _const(0), n, 1, lambda j: b.store(zero, b.gep(row, [j])), "zero.j")

            _loop(b, _const(0), m, 1, zero_row, "zero.i")

        def over_jc(jc: ir.Value) -> None:
            nc = _min(b, _const(blk.nc), b.sub(n, jc))

            def over_pc(pc: ir.Value) -> None:
                kc = _min(b, _const(blk.kc), b.sub(k, pc))
                accumulate = b.icmp_signed(">", pc, _const(0))
                b_block = b.gep(bm, [b.add(b.mul(pc, rsb), b.mul(jc, csb))])
                b.call(self.pack_b, [nc, kc, b_block, csb, rsb, buf_b])

                def over_ic(ic: ir.Value) -> None:
                    mc = _min(b, _const(blk.mc), b.sub(m, ic))
                    a_block = b.gep(a, [b.add(b.mul(ic, rsa), b.mul(pc, csa))])
                    b.call(self.pack_a, [mc, kc, a_block, rsa, csa, buf_a])

                    def over_jr(jr: ir.Value) -> None:
                        nr = _min(b, _const(blk.nr), b.sub(nc, jr))
                        b_panel = b.gep(buf_b, [b.mul(jr, kc)])

                        def over_ir(i_r: ir.Value) -> None:
                            mr = _min(b, _const(blk.mr), b.sub(mc, i_r))
                            a_panel = b.gep(buf_a, [b.mul(i_r, kc)])
                            row = b.add(ic, i_r)
                            tile = b.gep(c, [b.add(b.mul(row, rsc), b.add(jc, jr))])
                            b.call(self.micro, [kc, a_panel, b_panel, tile, rsc, mr, nr, accumulate])

                        _loop(b, _const(0), mc, blk.mr, over_ir, "ir")

                    _loop(b, _const(0), nc, blk.nr, over_jr, "jr")

                _loop(b, _const(0), m, blk.mc, over_ic, "ic")

            _loop(b, _const(0), k, blk.kc, over_pc, "pc")

        _loop(b, _const(0), n, blk.nc, over_jc, "jc")
        b.ret_void()
        return fn

    def _buffer_sizes(self, b: ir.IRBuilder, m: ir.Value, n: ir.Value, k: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Elements of the packing buffers of a and b for an ``m x n x k`` product."""
        blk = self.block
        kc = _max(b, _min(b, _const(blk.kc), k), _const(1))
        mc = _min(b, _const(blk.mc), _round_up(b, m, blk.mr))
        nc = _min(b, _const(blk.nc), _round_up(b, n, blk.nr))
        return b.mul(mc, kc), b.mul(nc, kc)

    def _with_buffers(self) -> ir.Function:
        """The serial product with packing buffers of its own (stack or heap)."""
        fn, b = self._function("with_buffers", GEMM_ARGS, i1)
        args = list(fn.args)
        m, n, k = args[:3]
        typed = [args[0], args[1], args[2],
                 b.bitcast(args[3], self.tp), args[4], args[5],
                 b.bitcast(args[6], self.tp), args[7], args[8],
                 b.bitcast(args[9], self.tp), args[10]]
        size_a, size_b = self._buffer_sizes(b, m, n, k)
        pad = _const(64 // self.itemsize)
        total = b.add(b.add(size_a, size_b), b.mul(pad, _const(2)))
        bytes_ = b.mul(total, _const(self.itemsize))
        small = b.icmp_signed("<=", bytes_, _const(STACK_BUFFER_BYTES))
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
        aligned = b.and_(b.add(as_int, _const(63)), _const(-64))
        buf_a = b.inttoptr(aligned, self.tp)
        buf_b = b.gep(buf_a, [_round_up(b, size_a, 64 // self.itemsize)])
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
        unit = b.select(by_rows, _const(blk.mr), _const(blk.nr))
        tiles = _ceil_div(b, extent, unit)
        per_thread = b.mul(_ceil_div(b, tiles, team), unit)
        first = _min(b, b.mul(tid, per_thread), extent)
        count = b.sub(_min(b, b.add(first, per_thread), extent), first)
        with b.if_then(b.icmp_signed(">", count, _const(0))):
            itemsize = _const(self.itemsize)
            row_offset = b.select(by_rows, first, _const(0))
            col_offset = b.select(by_rows, _const(0), first)
            a_part = b.gep(a, [b.mul(b.mul(row_offset, rsa), itemsize)])
            b_part = b.gep(bm, [b.mul(b.mul(col_offset, csb), itemsize)])
            c_part = b.gep(c, [b.mul(b.add(b.mul(row_offset, rsc), col_offset), itemsize)])
            ok = b.call(self.with_buffers, [b.select(by_rows, count, m), b.select(by_rows, n, count),
                                            k, a_part, rsa, csa, b_part, rsb, csb, c_part, rsc])
            with b.if_then(b.not_(ok), likely=False):
                failed = b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, len(GEMM_ARGS))])
                b.store(_const(1), failed)
        b.ret_void()
        return fn

    def _product(self) -> ir.Function:
        """``c = a @ b`` for ``c`` with unit column stride, not overlapping ``a`` or ``b``:
        on a team of threads when the product is big enough and the caller is not in a
        parallel region (``nested``). Returns 0, or 1 where a packing buffer could not be
        allocated."""
        from kdsl.codegen.parallel import MAX_THREADS, SETTINGS_T

        fn, b = self._function("product", GEMM_ARGS + [i1], i32)
        args = list(fn.args[:len(GEMM_ARGS)])
        nested = fn.args[len(GEMM_ARGS)]
        m, n, k = args[:3]
        settings = b.bitcast(self.hooks.load(b, "requested_threads"), SETTINGS_T.as_pointer())
        requested = b.load(b.gep(settings, [ir.Constant(i32, 0), ir.Constant(i32, 0)]))
        min_work = b.load(b.gep(settings, [ir.Constant(i32, 0), ir.Constant(i32, 2)]))
        work = b.sdiv(b.mul(b.mul(m, n), k), _const(WORK_PER_THREAD_UNIT))
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
        ctx = b.alloca(self.args_t)
        for f, value in enumerate(args + [_const(0), _const(0)]):
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
        size = _const(self.itemsize)
        low, high = start, start
        for count, stride in ((rows, rs), (cols, cs)):
            span = b.mul(b.mul(b.sub(count, _const(1)), stride), size)
            low = b.add(low, _min(b, span, _const(0)))
            high = b.add(high, _max(b, span, _const(0)))
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
        empty = b.or_(b.icmp_signed("<=", m, _const(0)), b.icmp_signed("<=", n, _const(0)))
        with b.if_then(empty):
            b.ret(ir.Constant(i32, 0))
        in_place = b.and_(b.icmp_signed("==", csc, _const(1)), b.not_(overlap))
        with b.if_then(in_place, likely=True):
            b.ret(b.call(self.product, args + [nested]))
        bytes_ = b.mul(b.mul(m, n), _const(self.itemsize))
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
                _loop(b, _const(0), n, 1, lambda j: b.store(
                    b.load(b.gep(row_in, [j])), b.gep(row_out, [b.mul(j, csc)])), "copy.j")

            _loop(b, _const(0), m, 1, copy_row, "copy.i")
        b.call(self.free, [raw])
        b.ret(failed)
        return fn


class GemmOps:
    """The ``gemm`` op of the kernel emitter (mixed into KernelEmitter)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def emit_gemm(self, op: Any) -> list[Any]:
        from kdsl import types as T
        from kdsl.codegen.abi import ErrorCode

        a, bm, c = (self.values[v] for v in op.operands[:3])
        scalar = T.element_scalar(op.operands[2].type.dtype)
        size = ir.Constant(i64, scalar.itemsize)
        b = self.b
        slots = self.hooks.load(b, "gemm")
        slot = b.gep(slots, [ir.Constant(i32, 0 if scalar == T.f32 else 1)])
        with b.if_then(b.icmp_unsigned("==", b.load(slot), ir.Constant(i8_ptr, None)), likely=False):
            loader = b.load(b.gep(slots, [ir.Constant(i32, 2)]))
            b.call(b.bitcast(loader, ir.FunctionType(void, []).as_pointer()), [])
        entry = b.load(slot)
        missing = b.icmp_unsigned("==", entry, ir.Constant(i8_ptr, None))
        self._fail_if(missing, ErrorCode.MEMORY, op, "the matrix product could not be loaded",
                      stop=True)

        def elements(stride: ir.Value) -> ir.Value:
            return self.b.sdiv(stride, size)

        rows, a_data, c_data = a.shape[0], a.data, c.data
        if len(op.operands) == 5:  # rows first to first + count only
            first, rows = (self.values[v] for v in op.operands[3:])
            a_data = b.gep(a.data, [b.mul(first, a.strides[0])])
            c_data = b.gep(c.data, [b.mul(first, c.strides[0])])
        args = [rows, bm.shape[1], a.shape[1],
                a_data, elements(a.strides[0]), elements(a.strides[1]),
                bm.data, elements(bm.strides[0]), elements(bm.strides[1]),
                c_data, elements(c.strides[0]), elements(c.strides[1]),
                ir.Constant(i1, bool(self.in_parallel))]
        entry_t = ir.FunctionType(i32, [arg.type for arg in args])
        failed = b.call(b.bitcast(b.load(slot), entry_t.as_pointer()), args)
        self._fail_if(b.icmp_unsigned("!=", failed, ir.Constant(i32, 0)), ErrorCode.MEMORY, op,
                      "no memory for the matrix product's packing buffers")
        return []

"""The building blocks of the packed matrix product: the register-blocked micro-kernel
and the packing of blocks of ``a`` and ``b`` into contiguous micro-panels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl.codegen.gemm_loops import const, loop, smin
from kdsl.codegen.llvm_types import i1, i8_ptr, i32, i64


class MicroKernelAndPacking:
    """Emits the micro-kernel and the packing routines (mixed into GemmEmitter)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    # --- the micro-kernel ----------------------------------------------------------

    def _micro_kernel(self) -> ir.Function:
        """``c[:mr, :nr] (+)= a_panel @ b_panel`` over ``kc`` steps; ``c`` has unit column
        stride and row stride ``rsc`` (elements)."""
        blk = self.block
        mr_n, nv = blk.mr, blk.nr // blk.lanes
        fn, b = self._function("micro", [i64, self.tp, self.tp, self.tp, i64, i64, i64, i1])
        kc, a, bp, c, rsc, mr, nr, accumulate = fn.args
        fn.attributes.add("nounwind")
        self._prefetch_tile(b, c, rsc)
        entry = b.block
        k_body = fn.append_basic_block("k.body")
        done = fn.append_basic_block("k.end")
        zero = ir.Constant(self.vec, None)
        b.cbranch(b.icmp_signed(">", kc, const(0)), k_body, done)
        b.position_at_end(k_body)
        k = b.phi(i64)
        k.add_incoming(const(0), entry)
        accs = [[b.phi(self.vec) for _ in range(nv)] for _ in range(mr_n)]
        for row in accs:
            for p in row:
                p.add_incoming(zero, entry)
        b_row = b.gep(bp, [b.mul(k, const(blk.nr))])
        vectors = [b.load(b.bitcast(b.gep(b_row, [const(v * blk.lanes)]), self.vec.as_pointer()),
                          align=64) for v in range(nv)]
        a_col = b.gep(a, [b.mul(k, const(mr_n))])
        mask = ir.Constant(ir.VectorType(i32, blk.lanes), [0] * blk.lanes)
        undef = ir.Constant(self.vec, ir.Undefined)
        new = []
        for r in range(mr_n):
            x = b.load(b.gep(a_col, [const(r)]))
            splat = b.shuffle_vector(b.insert_element(undef, x, ir.Constant(i32, 0)), undef, mask)
            new.append([b.call(self.fma, [splat, vectors[v], accs[r][v]]) for v in range(nv)])
        next_k = b.add(k, const(1), flags=["nsw"])
        k.add_incoming(next_k, k_body)
        for r in range(mr_n):
            for v in range(nv):
                accs[r][v].add_incoming(new[r][v], k_body)
        b.cbranch(b.icmp_signed("<", next_k, kc), k_body, done)
        b.position_at_end(done)
        finals = [[b.phi(self.vec) for _ in range(nv)] for _ in range(mr_n)]
        for r in range(mr_n):
            for v in range(nv):
                finals[r][v].add_incoming(zero, entry)
                finals[r][v].add_incoming(new[r][v], k_body)
        full = b.and_(b.icmp_signed("==", mr, const(mr_n)), b.icmp_signed("==", nr, const(blk.nr)))
        with b.if_else(full) as (whole, partial):
            with whole:
                for r in range(mr_n):
                    row = b.gep(c, [b.mul(const(r), rsc)])
                    for v in range(nv):
                        pointer = b.bitcast(b.gep(row, [const(v * blk.lanes)]), self.vec.as_pointer())
                        value = finals[r][v]
                        old = b.load(pointer, align=self.itemsize)
                        value = b.select(accumulate, b.fadd(value, old), value)
                        b.store(value, pointer, align=self.itemsize)
            with partial:
                tile = b.alloca(self.t, size=mr_n * blk.nr)
                tile.align = 64
                for r in range(mr_n):
                    for v in range(nv):
                        pointer = b.bitcast(b.gep(tile, [const(r * blk.nr + v * blk.lanes)]),
                                            self.vec.as_pointer())
                        b.store(finals[r][v], pointer, align=64)

                def row_loop(i: ir.Value) -> None:
                    def col_loop(j: ir.Value) -> None:
                        value = b.load(b.gep(tile, [b.add(b.mul(i, const(blk.nr)), j)]))
                        target = b.gep(c, [b.add(b.mul(i, rsc), j)])
                        summed = b.fadd(value, b.load(target))
                        b.store(b.select(accumulate, summed, value), target)

                    loop(b, const(0), nr, 1, col_loop, "edge.j")

                loop(b, const(0), mr, 1, row_loop, "edge.i")
        b.ret_void()
        return fn

    def _prefetch_tile(self, b: ir.IRBuilder, c: ir.Value, rsc: ir.Value) -> None:
        """Asks for the tile of ``c`` (every cache line of its rows, which are a whole
        row of ``c`` apart) before the loop along ``k``, long enough to hide the misses
        (one thread: 1024^3 f64 in 20.0 ms instead of 22.4, f32 9.4 instead of 9.7).
        Past the matrix's end a prefetch does nothing."""
        fn_type = ir.FunctionType(ir.VoidType(), [i8_ptr, i32, i32, i32])
        prefetch = self._declare("llvm.prefetch.p0", fn_type)
        row_bytes = self.block.nr * self.itemsize
        for r in range(self.block.mr):
            row = b.bitcast(b.gep(c, [b.mul(const(r), rsc)]), i8_ptr)
            for offset in [*range(0, row_bytes, 64), row_bytes - 1]:
                address = b.gep(row, [const(offset)])
                b.call(prefetch, [address, ir.Constant(i32, 1), ir.Constant(i32, 3),
                                  ir.Constant(i32, 1)])

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
        w = const(width)
        zero = ir.Constant(self.t, 0.0)

        def panel(p0: ir.Value) -> None:  # p0: the first row/column of the panel
            count = smin(b, w, b.sub(extent, p0))
            out = b.gep(buf, [b.mul(p0, kc)])
            base = b.gep(src, [b.mul(p0, s_panel)])
            is_full = b.icmp_signed("==", count, w)
            unit = b.icmp_signed("==", s_panel, const(1))
            with b.if_else(is_full) as (full, partial):
                with full:
                    with b.if_else(unit) as (contiguous, strided):
                        with contiguous:  # one vectorisable copy of `width` per k
                            def step_unit(k: ir.Value) -> None:
                                row = b.gep(base, [b.mul(k, s_k)])
                                dest = b.gep(out, [b.mul(k, w)])
                                for j in range(width):
                                    b.store(b.load(b.gep(row, [const(j)])), b.gep(dest, [const(j)]))

                            loop(b, const(0), kc, 1, step_unit, "pack.unit")
                        with strided:
                            def step(k: ir.Value) -> None:
                                row = b.gep(base, [b.mul(k, s_k)])
                                dest = b.gep(out, [b.mul(k, w)])
                                for j in range(width):
                                    value = b.load(b.gep(row, [b.mul(const(j), s_panel)]))
                                    b.store(value, b.gep(dest, [const(j)]))

                            loop(b, const(0), kc, 1, step, "pack.strided")
                with partial:
                    def step_edge(k: ir.Value) -> None:  # count elements, then zeros
                        row = b.gep(base, [b.mul(k, s_k)])
                        dest = b.gep(out, [b.mul(k, w)])

                        def copy(j: ir.Value) -> None:
                            value = b.load(b.gep(row, [b.mul(j, s_panel)]))
                            b.store(value, b.gep(dest, [j]))

                        loop(b, const(0), count, 1, copy, "pack.copy")
                        loop(b, count, w, 1, lambda j: b.store(zero, b.gep(dest, [j])), "pack.pad")

                    loop(b, const(0), kc, 1, step_edge, "pack.edge")

        loop(b, const(0), extent, w, panel, "panels")
        b.ret_void()
        return fn

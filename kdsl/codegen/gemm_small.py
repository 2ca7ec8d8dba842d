"""Matrix products without packing: ``c = a @ b`` where ``b`` fits in the L2 cache (a
batch of small products inside a ``prange``, products up to a few hundred square). Read
in place from the cache, ``b`` needs no packed copy, and this is faster than packing
there (measured: 1.1-1.25x at 128 to 384 square, f32 and f64, one thread).

A block of rows of ``c`` by up to ``vectors`` vector registers of columns is kept in
registers and updated with one outer product per step along ``k``: each row
of ``a`` contributes one broadcast element, each row of ``b`` is read straight from the
operand (unit column stride) with masked vector loads, so no size needs to be a multiple
of the vector width and nothing past an operand is read. Rows past the end of ``a``
repeat its last row and are not stored.
"""

from __future__ import annotations

import functools

from llvmlite import ir

from kdsl.codegen.gemm_loops import const, loop, smin
from kdsl.codegen.llvm_types import f32, i1, i32, i64, void

FMA_CHAINS = 8  # independent accumulators that keep two FMA units of latency 4 busy
SMALL_B_BYTES = 256 * 1024  # the largest b (k x n) multiplied without packing, L2 unknown


@functools.cache
def small_b_bytes() -> int:
    """The largest ``b`` multiplied without packing: half the host's L2 cache (one
    thread, measured on a 1 MiB L2: unpacked 1.2x faster at 576 KiB, as fast at 512 KiB,
    1.15-1.2x slower at 800 KiB and 1 MiB), SMALL_B_BYTES where the size is unknown."""
    l2 = _level_2_cache_bytes()
    return SMALL_B_BYTES if l2 is None else min(l2 // 2, 1024 * 1024)


def _level_2_cache_bytes() -> int | None:
    """The size of the first CPU's level-2 cache (Linux sysfs), or None."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in range(8):
        try:
            with open(f"{base}/index{index}/level") as f:
                level = f.read().strip()
            with open(f"{base}/index{index}/size") as f:
                text = f.read().strip()
        except OSError:
            return None
        if level != "2":
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KkMm")
        return int(digits) * scale if digits.isdigit() and int(digits) > 0 else None
    return None


def small_column_vectors(avx512: bool) -> tuple[int, ...]:
    """The widths (in vector registers) of the column blocks: 32 registers hold 4 x 4
    accumulators with AVX-512, 16 hold 4 x 2 otherwise."""
    return (1, 2, 4) if avx512 else (1, 2)


def rows_per_block(vectors: int) -> int:
    """Rows of ``c`` in a register block ``vectors`` registers wide: enough independent
    accumulators for the FMA units (narrow blocks take more rows), at least 4; 6 rows of
    4 registers with AVX-512 (24 accumulators, 4 rows of b and a broadcast: 29 of the 32
    registers; 4 rows took 4-15% longer at 256^3 and in the MLP, one thread)."""
    return 6 if vectors == 4 else max(4, FMA_CHAINS // vectors)


class SmallProduct:
    """Emits ``small(m, n, k, a, rsa, csa, b, rsb, c, rsc)`` for one scalar type."""

    def __init__(self, module: ir.Module, scalar: ir.Type, lanes: int, avx512: bool,
                 prefix: str, fma: ir.Function) -> None:
        self.module = module
        self.t = scalar
        self.lanes = lanes
        self.vec = ir.VectorType(scalar, lanes)
        self.mask_t = ir.VectorType(i1, lanes)
        self.tp = scalar.as_pointer()
        self.fma = fma
        self.itemsize = 4 if scalar == f32 else 8
        suffix = f"v{lanes}{'f32' if self.itemsize == 4 else 'f64'}"
        self.load = ir.Function(module, ir.FunctionType(
            self.vec, [self.vec.as_pointer(), i32, self.mask_t, self.vec]),
            f"llvm.masked.load.{suffix}.p0")
        self.store = ir.Function(module, ir.FunctionType(
            void, [self.vec, self.vec.as_pointer(), i32, self.mask_t]),
            f"llvm.masked.store.{suffix}.p0")
        self.fn = ir.Function(module, ir.FunctionType(
            void, [i64, i64, i64, self.tp, i64, i64, self.tp, i64, self.tp, i64]),
            f"{prefix}.small")
        self.fn.linkage = "internal"
        self.fn.attributes.add("nounwind")
        self.widths = small_column_vectors(avx512)
        self._emit()

    def _emit(self) -> None:
        fn = self.fn
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n = fn.args[1]
        done = fn.append_basic_block("done")
        # the narrowest column block that covers n, else the widest one, repeated
        for count, vectors in enumerate(self.widths):
            last = count == len(self.widths) - 1
            here = fn.append_basic_block(f"width{vectors}")
            other = done if last else fn.append_basic_block(f"not_width{vectors}")
            fits = ir.Constant(i1, 1) if last else b.icmp_signed(
                "<=", n, const(vectors * self.lanes))
            b.cbranch(fits, here, other)
            b.position_at_end(here)
            self._product(b, vectors)
            b.branch(done)
            b.position_at_end(other)
        b.position_at_end(done)
        b.ret_void()

    def _product(self, b: ir.IRBuilder, vectors: int) -> None:
        m, n, a, rsa, c, rsc = (self.fn.args[i] for i in (0, 1, 3, 4, 8, 9))
        width = vectors * self.lanes
        height = rows_per_block(vectors)
        lane_index = ir.Constant(ir.VectorType(i64, self.lanes), list(range(self.lanes)))
        last_row = b.sub(m, const(1))

        def row_block(i0: ir.Value) -> None:
            rows = [smin(b, b.add(i0, const(r)), last_row) for r in range(height)]
            a_rows = [b.gep(a, [b.mul(row, rsa)]) for row in rows]

            def column_block(j0: ir.Value) -> None:
                masks = []
                for v in range(vectors):
                    first = b.add(j0, const(v * self.lanes))
                    columns = b.add(self._splat(b, first, i64), lane_index)
                    masks.append(b.icmp_signed("<", columns, self._splat(b, n, i64)))
                accs = self._accumulate(b, vectors, a_rows, masks, j0)
                for r in range(height):
                    inside = b.icmp_signed("<", b.add(i0, const(r)), m)
                    with b.if_then(inside, likely=True):
                        row = b.gep(c, [b.add(b.mul(b.add(i0, const(r)), rsc), j0)])
                        for v in range(vectors):
                            pointer = b.bitcast(b.gep(row, [const(v * self.lanes)]),
                                                self.vec.as_pointer())
                            b.call(self.store, [accs[r][v], pointer,
                                                ir.Constant(i32, self.itemsize), masks[v]])

            loop(b, const(0), n, width, column_block, "small.j")

        loop(b, const(0), m, height, row_block, "small.i")

    def _accumulate(self, b: ir.IRBuilder, vectors: int, a_rows: list[ir.Value],
                    masks: list[ir.Value], j0: ir.Value) -> list[list[ir.Value]]:
        """The register block after every step along k."""
        fn = self.fn
        k, csa, bm, rsb = fn.args[2], fn.args[5], fn.args[6], fn.args[7]
        zero = ir.Constant(self.vec, None)
        entry = b.block
        body = fn.append_basic_block("small.k")
        end = fn.append_basic_block("small.k.end")
        b.cbranch(b.icmp_signed(">", k, const(0)), body, end)
        b.position_at_end(body)
        step = b.phi(i64)
        step.add_incoming(const(0), entry)
        accs = [[b.phi(self.vec) for _ in range(vectors)] for _ in range(len(a_rows))]
        b_row = b.gep(bm, [b.add(b.mul(step, rsb), j0)])
        loads = []
        for v in range(vectors):
            pointer = b.bitcast(b.gep(b_row, [const(v * self.lanes)]), self.vec.as_pointer())
            loads.append(b.call(self.load, [pointer, ir.Constant(i32, self.itemsize), masks[v],
                                            zero]))
        new = []
        for r in range(len(a_rows)):
            x = b.load(b.gep(a_rows[r], [b.mul(step, csa)]))
            splat = self._splat(b, x, self.t)
            new.append([b.call(self.fma, [splat, loads[v], accs[r][v]]) for v in range(vectors)])
        following = b.add(step, const(1), flags=["nsw"])
        step.add_incoming(following, body)
        for r in range(len(a_rows)):
            for v in range(vectors):
                accs[r][v].add_incoming(zero, entry)
                accs[r][v].add_incoming(new[r][v], body)
        b.cbranch(b.icmp_signed("<", following, k), body, end)
        b.position_at_end(end)
        finals = []
        for r in range(len(a_rows)):
            row = []
            for v in range(vectors):
                phi = b.phi(self.vec)
                phi.add_incoming(zero, entry)
                phi.add_incoming(new[r][v], body)
                row.append(phi)
            finals.append(row)
        return finals

    def _splat(self, b: ir.IRBuilder, x: ir.Value, t: ir.Type) -> ir.Value:
        vec_t = ir.VectorType(t, self.lanes)
        undef = ir.Constant(vec_t, ir.Undefined)
        mask = ir.Constant(ir.VectorType(i32, self.lanes), [0] * self.lanes)
        return b.shuffle_vector(b.insert_element(undef, x, ir.Constant(i32, 0)), undef, mask)

"""A matrix product on a team of threads that share the work as it goes, where ``b`` is
multiplied unpacked (``gemm_small``: it fits in the L2 cache, so every thread reads it in
place). The rows of ``c`` are cut into blocks, a few per thread; each thread claims the
blocks of its own share (contiguous rows: on idle cores, the static split, which keeps a
thread on the rows it wrote when an elementwise pass or a second product follows), then
those left in the others' shares. A thread whose core is busy with something else
(another process, another runtime's spinning thread) so hands its remaining blocks to the
others instead of making them wait for it (the static split then ran at one thread's
speed). Claiming from one shared counter instead, blocks alternating between the
threads, made the MLP row 4% slower.

A packed ``b`` keeps the static split of ``GemmEmitter._region`` (each thread packs the
blocks of ``b`` it multiplies): measured at 1024^3 on an idle machine, a team sharing one
packed copy of ``b`` was 10-20% slower (all of ``b`` packed at once: the copy went out to
memory; block by block: the team waited for its slowest thread at every block).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl.codegen.gemm_loops import ceil_div, const, loop, smin
from kdsl.codegen.gemm_small import rows_per_block
from kdsl.codegen.llvm_types import i8_ptr, i32, i64

CLAIMS_PER_THREAD = 4  # blocks of rows per thread: a busy core's share is taken over

COUNTERS = 11  # in the context: the product's arguments (GEMM_ARGS), then the counters
COUNTER_STRIDE = 8  # i64s: one cache line per thread's counter


class TeamProduct:
    """The unpacked product's team region (mixed into GemmEmitter)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def _team_context_type(self) -> ir.LiteralStructType:
        from kdsl.codegen.gemm import GEMM_ARGS

        return ir.LiteralStructType(GEMM_ARGS + [i64.as_pointer()])

    def _field(self, b: ir.IRBuilder, ctx: ir.Value, index: int) -> ir.Value:
        return b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, index)])

    def _claims(self, b: ir.IRBuilder, counter: ir.Value, count: ir.Value,
                body: Callable[[ir.Value], None], name: str) -> None:
        """``body(u)`` for each ``u < count`` this thread claims from ``counter``."""
        fn = b.function
        claim = fn.append_basic_block(f"{name}.claim")
        run = fn.append_basic_block(f"{name}.run")
        done = fn.append_basic_block(f"{name}.done")
        b.branch(claim)
        b.position_at_end(claim)
        claimed = b.atomic_rmw("add", counter, const(1), "monotonic")
        b.cbranch(b.icmp_signed("<", claimed, count), run, done)
        b.position_at_end(run)
        body(claimed)
        b.branch(claim)
        b.position_at_end(done)

    def _block_rows(self, b: ir.IRBuilder, n: ir.Value) -> ir.Value:
        """The rows of the unpacked product's register blocks for ``n`` columns (its
        narrowest block that covers them, else its widest)."""
        rows = const(rows_per_block(self.small_widths[-1]))
        for vectors in reversed(self.small_widths[:-1]):
            fits = b.icmp_signed("<=", n, const(vectors * self.block.lanes))
            rows = b.select(fits, const(rows_per_block(vectors)), rows)
        return rows

    def _claims_count(self, b: ir.IRBuilder, blocks: ir.Value, team: ir.Value) -> ir.Value:
        """Claims in all: CLAIMS_PER_THREAD per thread, at most one per register block."""
        return smin(b, b.mul(team, const(CLAIMS_PER_THREAD)), blocks)

    def _unpacked_rows_region(self) -> ir.Function:
        """Each thread claims blocks of rows of ``c``, its own share's first, and
        computes them unpacked."""
        fn, b = self._function("team.unpacked_rows", [i8_ptr])
        fn.attributes.add("nounwind")
        ctx = b.bitcast(fn.args[0], self.team_ctx_t.as_pointer())
        m, n, k, a, rsa, csa, bm, rsb, _, c, rsc = (
            b.load(self._field(b, ctx, f)) for f in range(11))
        a, bm, c = (b.bitcast(x, self.tp) for x in (a, bm, c))
        counters = b.load(self._field(b, ctx, COUNTERS))
        team = b.sext(b.call(self.hooks.load(b, "num_threads"), []), i64)
        tid = b.sext(b.call(self.hooks.load(b, "thread_num"), []), i64)
        height = self._block_rows(b, n)
        blocks = ceil_div(b, m, height)
        count = self._claims_count(b, blocks, team)

        def rows(u: ir.Value) -> None:  # claim u: register blocks u*B/count to (u+1)*B/count
            first = b.mul(b.sdiv(b.mul(u, blocks), count), height)
            last = smin(b, b.mul(b.sdiv(b.mul(b.add(u, const(1)), blocks), count), height), m)
            b.call(self.small, [b.sub(last, first), n, k, b.gep(a, [b.mul(first, rsa)]), rsa,
                                csa, bm, rsb, b.gep(c, [b.mul(first, rsc)]), rsc])

        def share(step: ir.Value) -> None:
            owner = b.urem(b.add(tid, step), team)
            end = b.sdiv(b.mul(b.add(owner, const(1)), count), team)
            counter = b.gep(counters, [b.mul(owner, const(COUNTER_STRIDE))])
            self._claims(b, counter, end, rows, "rows")

        loop(b, const(0), team, 1, share, "shares")
        b.ret_void()
        return fn

    def _emit_unpacked_team(self, b: ir.IRBuilder, args: list[ir.Value], team: ir.Value) -> None:
        """Runs the unpacked product on ``team`` threads with claimed blocks of rows."""
        from kdsl.codegen.parallel_team import MAX_THREADS

        ctx = b.alloca(self.team_ctx_t)
        for f, value in enumerate(args):
            b.store(value, self._field(b, ctx, f))
        counters = b.alloca(ir.ArrayType(i64, MAX_THREADS * COUNTER_STRIDE))
        counters.align = 64
        first_counter = b.gep(counters, [ir.Constant(i32, 0), ir.Constant(i32, 0)])
        b.store(first_counter, self._field(b, ctx, COUNTERS))
        team64 = b.zext(team, i64)
        count = self._claims_count(b, ceil_div(b, args[0], self._block_rows(b, args[1])), team64)

        def reset(owner: ir.Value) -> None:  # the first block of each thread's share
            b.store(b.sdiv(b.mul(owner, count), team64),
                    b.gep(first_counter, [b.mul(owner, const(COUNTER_STRIDE))]))

        loop(b, const(0), team64, 1, reset, "team.reset")
        run_team = self.hooks.load(b, "parallel")
        b.call(run_team, [self.team_unpacked, b.bitcast(ctx, i8_ptr), team, ir.Constant(i32, 0)])

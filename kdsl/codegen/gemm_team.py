"""A matrix product on a team of threads that share the work as it goes. The rows of ``c``
are cut into blocks, a few per thread; each thread claims the blocks of its own share
(contiguous rows: on idle cores, the static split, which keeps a thread on the rows it
wrote when an elementwise pass or a second product follows), then those left in the
others' shares. A thread whose core is busy with something else (another process,
another runtime's spinning thread) so hands the rest of its share to the others instead
of making them wait for it: a static split ran at one thread's speed then. Claiming from
one shared counter instead, blocks alternating between the threads, made the MLP row 4%
slower.

Where ``b`` is multiplied unpacked (``gemm_small``: it fits in the L2 cache, every thread
reads it in place) a claim costs nothing; where it is packed, each claim packs ``b``
again, so a thread has 2 claims. A team sharing one packed copy of ``b`` instead was
10-20% slower at 1024^3 (all of ``b`` packed at once: the copy went out to memory; block
by block: the team waited for its slowest thread at every block).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl.codegen.gemm_loops import ceil_div, const, loop, smin
from kdsl.codegen.gemm_small import rows_per_block
from kdsl.codegen.llvm_types import i8_ptr, i32, i64

CLAIMS_PER_THREAD = 4  # blocks of rows per thread: a busy core's share is taken over
# each claim of a packed product packs all of b again: 2 per thread cost 4-6% against a
# static split on idle cores at 1024^3, and a thread on a busy core holds back at most
# half its share, where the static split held back all of it
PACKED_CLAIMS_PER_THREAD = 2

# in the context: the product's arguments (GEMM_ARGS), then
COUNTERS = 11  # the claim counters, one per thread
FAILED = 12  # set where a packing buffer could not be allocated
COUNTER_STRIDE = 8  # i64s: one cache line per thread's counter


class TeamProduct:
    """The unpacked product's team region (mixed into GemmEmitter)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def _team_context_type(self) -> ir.LiteralStructType:
        from kdsl.codegen.gemm import GEMM_ARGS

        return ir.LiteralStructType(GEMM_ARGS + [i64.as_pointer(), i64])

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

    def _block_rows(self, b: ir.IRBuilder, n: ir.Value, packed: bool) -> ir.Value:
        """The rows of the register blocks for ``n`` columns: the packed micro-kernel's
        MR, or the unpacked product's narrowest block that covers them, else its
        widest."""
        if packed:
            return const(self.block.mr)
        rows = const(rows_per_block(self.small_widths[-1]))
        for vectors in reversed(self.small_widths[:-1]):
            fits = b.icmp_signed("<=", n, const(vectors * self.block.lanes))
            rows = b.select(fits, const(rows_per_block(vectors)), rows)
        return rows

    def _claims_count(self, b: ir.IRBuilder, blocks: ir.Value, team: ir.Value,
                      packed: bool) -> ir.Value:
        """Claims in all, a few per thread, at most one per register block."""
        per_thread = PACKED_CLAIMS_PER_THREAD if packed else CLAIMS_PER_THREAD
        return smin(b, b.mul(team, const(per_thread)), blocks)

    def _rows_region(self, packed: bool) -> ir.Function:
        """Each thread claims blocks of rows of ``c``, its own share's first, and
        computes them: unpacked, or packed with buffers of its own (FAILED is set where
        they cannot be allocated)."""
        name = "team.packed_rows" if packed else "team.unpacked_rows"
        fn, b = self._function(name, [i8_ptr])
        fn.attributes.add("nounwind")
        ctx = b.bitcast(fn.args[0], self.team_ctx_t.as_pointer())
        fields = [b.load(self._field(b, ctx, f)) for f in range(11)]
        m, n, k, a, rsa, csa, bm, rsb, csb, c, rsc = fields
        counters = b.load(self._field(b, ctx, COUNTERS))
        team = b.sext(b.call(self.hooks.load(b, "num_threads"), []), i64)
        tid = b.sext(b.call(self.hooks.load(b, "thread_num"), []), i64)
        height = self._block_rows(b, n, packed)
        blocks = ceil_div(b, m, height)
        count = self._claims_count(b, blocks, team, packed)
        size = const(self.itemsize)

        def rows(u: ir.Value) -> None:  # claim u: register blocks u*B/count to (u+1)*B/count
            first = b.mul(b.sdiv(b.mul(u, blocks), count), height)
            last = smin(b, b.mul(b.sdiv(b.mul(b.add(u, const(1)), blocks), count), height), m)
            a_rows = b.gep(a, [b.mul(b.mul(first, rsa), size)])
            c_rows = b.gep(c, [b.mul(b.mul(first, rsc), size)])
            if not packed:
                typed = [b.bitcast(x, self.tp) for x in (a_rows, bm, c_rows)]
                b.call(self.small, [b.sub(last, first), n, k, typed[0], rsa, csa, typed[1], rsb,
                                    typed[2], rsc])
                return
            ok = b.call(self.with_buffers, [b.sub(last, first), n, k, a_rows, rsa, csa, bm, rsb,
                                            csb, c_rows, rsc])
            with b.if_then(b.not_(ok), likely=False):
                b.store(const(1), self._field(b, ctx, FAILED))

        def share(step: ir.Value) -> None:
            owner = b.urem(b.add(tid, step), team)
            end = b.sdiv(b.mul(b.add(owner, const(1)), count), team)
            counter = b.gep(counters, [b.mul(owner, const(COUNTER_STRIDE))])
            self._claims(b, counter, end, rows, "rows")

        loop(b, const(0), team, 1, share, "shares")
        b.ret_void()
        return fn

    def _emit_rows_team(self, b: ir.IRBuilder, args: list[ir.Value], team: ir.Value,
                        packed: bool) -> ir.Value:
        """Runs the product on ``team`` threads with claimed blocks of rows; returns 0,
        or 1 where a packing buffer could not be allocated."""
        from kdsl.codegen.parallel_team import MAX_THREADS

        ctx = b.alloca(self.team_ctx_t)
        for f, value in enumerate(args):
            b.store(value, self._field(b, ctx, f))
        b.store(const(0), self._field(b, ctx, FAILED))
        counters = b.alloca(ir.ArrayType(i64, MAX_THREADS * COUNTER_STRIDE))
        counters.align = 64
        first_counter = b.gep(counters, [ir.Constant(i32, 0), ir.Constant(i32, 0)])
        b.store(first_counter, self._field(b, ctx, COUNTERS))
        team64 = b.zext(team, i64)
        blocks = ceil_div(b, args[0], self._block_rows(b, args[1], packed))
        count = self._claims_count(b, blocks, team64, packed)

        def reset(owner: ir.Value) -> None:  # the first block of each thread's share
            b.store(b.sdiv(b.mul(owner, count), team64),
                    b.gep(first_counter, [b.mul(owner, const(COUNTER_STRIDE))]))

        loop(b, const(0), team64, 1, reset, "team.reset")
        run_team = self.hooks.load(b, "parallel")
        region = self.team_packed if packed else self.team_unpacked
        b.call(run_team, [region, b.bitcast(ctx, i8_ptr), team, ir.Constant(i32, 0)])
        return b.trunc(b.load(self._field(b, ctx, FAILED)), i32)

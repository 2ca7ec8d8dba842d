"""The team runtime of CPU parallel loops: one driver per module that runs a region's
chunks on a team of threads (``run_team``, ``team_driver``), the team size a loop asks
for, and the helpers they share. See parallel.py for the loops themselves.

The outermost axis is cut into a few contiguous chunks per thread. Each thread claims the
chunks of its own block one at a time from the block's counter, then those left in the
other blocks: on idle cores every thread runs its own block, and when the OS deschedules
a thread the running ones take over its chunks instead of waiting for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import Repr, i8_ptr, i32, i64, void

MAX_THREADS = 256
CHUNKS_PER_THREAD = 8  # enough for the running threads to absorb a descheduled one's share
MAX_CHUNKS = 512
CHUNK_ALIGN = 64  # iterations: a multiple of any vector loop's width times its unrolling
# runtime.threads.ParallelSettings, which the requested_threads hook points to
SETTINGS_T = ir.LiteralStructType([i32, i32, i64])
# the head of a region's context, set by run_team for team_driver: the region function,
# the block counters, blocks (the team size), chunks, iterations per chunk, axis 0's extent
HEADER_T = ir.LiteralStructType([i8_ptr, i64.as_pointer(), i64, i64, i64, i64])
# region(ctx, lower, upper, chunk, tid, single): see ParallelLoops._emit_region
REGION_T = ir.FunctionType(void, [i8_ptr, i64, i64, i64, i64, ir.IntType(1)])

class TeamRuntime:
    """The team part of the parallel-loop emitter (mixed into ParallelLoops, and so into
    KernelEmitter, whose builder, hooks and helpers it uses)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def _team_size(self, iterations: ir.Value, cost: int) -> ir.Value:
        """The requested thread count (1 to MAX_THREADS), or 1 when the loop's work
        (``iterations`` times ``cost``) is below the runtime's threshold: a team would
        cost more than it saves."""
        settings = self._settings()
        requested = self.b.load(self.b.gep(settings, [ir.Constant(i32, 0), ir.Constant(i32, 0)]))
        min_work = self.b.load(self.b.gep(settings, [ir.Constant(i32, 0), ir.Constant(i32, 2)]))
        at_least_one = self.scalar.op_max(T.i32, requested, ir.Constant(i32, 1))
        threads = self.scalar.op_min(T.i32, at_least_one, ir.Constant(i32, MAX_THREADS))
        needed = self.b.sdiv(self.b.add(min_work, ir.Constant(i64, cost - 1)),
                             ir.Constant(i64, cost))  # ceil(min_work / cost), no overflow
        worth = self.b.icmp_signed(">=", iterations, needed)
        return self.b.select(worth, threads, ir.Constant(i32, 1))

    def _settings(self) -> ir.Value:
        return self.b.bitcast(self.hooks.load(self.b, "requested_threads"),
                              SETTINGS_T.as_pointer())

    def _ceil_div(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """ceil(a / b) for a >= 0 and b > 0."""
        return self.b.sdiv(self.b.sub(self.b.add(a, b), ir.Constant(i64, 1)), b)

    def _helper(self, name: str, fn_type: ir.FunctionType,
                emit: Callable[[ir.Function], None]) -> ir.Function:
        """A function of the module's parallel runtime, emitted on first use."""
        existing = self.module.globals.get(name)
        if isinstance(existing, ir.Function):
            return existing
        fn = ir.Function(self.module, fn_type, name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        # run once per team, not per iteration: LLVM leaves them as they are (optimising
        # and selecting instructions for them cost a sixth of a small kernel's compile)
        fn.attributes.add("optnone")
        saved = self.scalar.builder
        self._start_function(fn)
        emit(fn)
        self._finish_function(fn)
        self.scalar.builder = saved
        return fn

    def _run_team(self) -> ir.Function:
        """``run_team(ctx, region, team, iterations, extent, cost, vectorised)``: cuts
        axis 0 into chunks, sets the context's header and the block counters, runs
        ``team_driver`` on a team of ``team`` threads; returns the number of chunks.

        A team gets CHUNKS_PER_THREAD chunks per thread, fewer when a chunk would hold
        less than a quarter of the threshold's work (claiming one costs an atomic update
        of a cache line the threads share). The chunks of a ``vectorised`` loop (one
        axis, no inner loop) hold whole multiples of CHUNK_ALIGN iterations: elements take
        the same vectorised or scalar path in each chunk as in a serial loop, so results
        do not depend on the chunks."""
        fn_type = ir.FunctionType(i64, [i8_ptr, i8_ptr, i32, i64, i64, i64, ir.IntType(1)])
        return self._helper("kdsl.run_team", fn_type, self._emit_run_team)

    def _emit_run_team(self, fn: ir.Function) -> None:
        ctx, region, team, iterations, extent, cost, vectorised = fn.args
        b, one = self.b, ir.Constant(i64, 1)
        min_work = b.load(b.gep(self._settings(), [ir.Constant(i32, 0), ir.Constant(i32, 2)]))
        team64 = b.zext(team, i64)
        quarter = b.sdiv(min_work, ir.Constant(i64, 4))
        per_chunk = self.scalar.op_max(T.i64, self._ceil_div(quarter, cost), one)
        by_work = self.scalar.op_max(T.i64, b.sdiv(iterations, per_chunk), one)
        wanted = self.scalar.op_min(T.i64, b.mul(team64, ir.Constant(i64, CHUNKS_PER_THREAD)),
                                    by_work)
        count = self.scalar.op_min(T.i64, self.scalar.op_min(T.i64, extent, wanted),
                                   ir.Constant(i64, MAX_CHUNKS))
        count = self.scalar.op_max(T.i64, count, ir.Constant(i64, 0))
        size = self._ceil_div(extent, self.scalar.op_max(T.i64, count, one))
        align = ir.Constant(i64, CHUNK_ALIGN)
        aligned = b.mul(self._ceil_div(self.scalar.op_max(T.i64, size, one), align), align)
        aligned_count = b.select(b.icmp_signed(">", count, one), self._ceil_div(extent, aligned),
                                 count)
        size = b.select(vectorised, aligned, size)
        count = b.select(vectorised, aligned_count, count)
        counters = self._entry_alloca(ir.ArrayType(ir.ArrayType(i64, 8), MAX_THREADS))
        counters.align = 64

        def reset(block: ir.Value, carried: list[Repr]) -> list[Repr]:
            first = b.sdiv(b.mul(block, count), team64)  # the first chunk of each block
            b.store(first, b.gep(counters, [ir.Constant(i32, 0), block, ir.Constant(i32, 0)]))
            return []

        self._counted_loop(ir.Constant(i64, 0), team64, one, [], [], reset)
        header = b.bitcast(ctx, HEADER_T.as_pointer())
        for k, value in enumerate([region, b.bitcast(counters, i64.as_pointer()), team64, count,
                                   size, extent]):
            b.store(value, b.gep(header, [ir.Constant(i32, 0), ir.Constant(i32, k)]))
        run = self.hooks.load(b, "parallel")
        b.call(run, [self._team_driver(), ctx, team, ir.Constant(i32, 0)])
        b.ret(count)

    def _team_driver(self) -> ir.Function:
        """What each thread of a team runs: the unclaimed chunks of its own block one at
        a time (from the block's counter), then those left in the other blocks. On idle
        cores every thread runs its own block (the static split, which keeps a thread on
        the same data from one loop to the next); when the OS deschedules a thread, the
        running ones take over its chunks instead of waiting for it."""
        return self._helper("kdsl.team_driver", ir.FunctionType(void, [i8_ptr]),
                            self._emit_team_driver)

    def _emit_team_driver(self, fn: ir.Function) -> None:
        b, one = self.b, ir.Constant(i64, 1)
        ctx = fn.args[0]
        header = b.bitcast(ctx, HEADER_T.as_pointer())
        region_p, counters, blocks, nchunks, chunk, extent = (
            b.load(b.gep(header, [ir.Constant(i32, 0), ir.Constant(i32, k)])) for k in range(6))
        region = b.bitcast(region_p, REGION_T.as_pointer())
        tid = b.sext(b.call(self.hooks.load(b, "thread_num"), []), i64)
        team = b.sext(b.call(self.hooks.load(b, "num_threads"), []), i64)
        single = b.icmp_signed("==", team, one)

        def visit_block(step: ir.Value, carried: list[Repr]) -> list[Repr]:
            block = b.urem(b.add(tid, step), blocks)  # this thread's block first
            end = b.sdiv(b.mul(b.add(block, one), nchunks), blocks)
            counter = b.gep(counters, [b.mul(block, ir.Constant(i64, 8))])
            claim_bb = fn.append_basic_block("chunk.claim")
            run_bb = fn.append_basic_block("chunk.run")
            done_bb = fn.append_basic_block("chunk.done")
            b.branch(claim_bb)
            b.position_at_end(claim_bb)
            claimed = b.atomic_rmw("add", counter, one, "monotonic")
            b.cbranch(b.icmp_signed("<", claimed, end), run_bb, done_bb)
            b.position_at_end(run_bb)
            lower = self.scalar.op_min(T.i64, b.mul(claimed, chunk), extent)
            upper = self.scalar.op_min(T.i64, b.add(lower, chunk), extent)
            b.call(region, [ctx, lower, upper, claimed, tid, single])
            b.branch(claim_bb)
            b.position_at_end(done_bb)
            return []

        self._counted_loop(ir.Constant(i64, 0), blocks, one, [], [], visit_block)
        b.ret_void()

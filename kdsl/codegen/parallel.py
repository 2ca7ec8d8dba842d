"""Parallel loops on the CPU.

A top-level ``parallel_for`` is outlined into a function of one ``i8*`` context argument
and run on a team of threads (``GOMP_parallel`` through the runtime hooks). The outermost
axis is cut into a few contiguous chunks per thread. Each thread claims the chunks of its
own block one at a time from the block's counter, then those left in the other blocks:
on idle cores every thread runs its own block (the static split, which keeps a thread on
the same data from one loop to the next), and when the OS deschedules a thread (the
cores are shared with other processes or another threading runtime) the running ones
take over its chunks instead of waiting for it. Reductions keep one partial per chunk,
combined in chunk order afterwards, so a result does not depend on which thread ran which
chunk. A loop whose estimated work (iterations times the body's cost, see parallel_cost)
is below the runtime's threshold runs on the calling thread: a team would cost more than
it saves. A parallel loop inside another runs serially.

Scatter privatisation: an array that the region only updates with ``+=``/``-=`` (atomics
whose old value is unused) gets a zeroed private copy per thread when it is small next to
the number of iterations; threads update their copy without atomics and the copies are
added into the array after the region. Contended atomic adds on a small grid (a
particle-to-grid scatter, a histogram) otherwise serialise the threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import (
    ArrayView,
    Repr,
    flat_types,
    flatten,
    i8_ptr,
    i32,
    i64,
    row_major_strides,
    unflatten,
    void,
)
from kdsl.codegen.parallel_cost import body_cost, has_inner_loop
from kdsl.ir.analysis import free_values
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.reductions import reduction_identity
from kdsl.ir.structured import ParallelForOp

MAX_THREADS = 256
CHUNKS_PER_THREAD = 8  # enough for the running threads to absorb a descheduled one's share
MAX_CHUNKS = 512
CHUNK_ALIGN = 64  # iterations: a multiple of any vector loop's width times its unrolling
# runtime.threads.ParallelSettings, which the requested_threads hook points to
SETTINGS_T = ir.LiteralStructType([i32, i32, i64])
PRIVATE_COPY_LIMIT = 1 << 22  # elements; larger scatter targets stay atomic
PRIVATE_COPY_RATIO = 4  # privatise when iterations >= RATIO * elements


def scatter_targets(body: Block, free: list[Value]) -> list[Value]:
    """Arrays the region only updates with ``+=``/``-=`` whose old values are unused."""
    used = {v for op in body.walk() for v in op.operands}
    targets = []
    for array in free:
        if not isinstance(array.type, T.ArrayType) or T.element_scalar(array.type.dtype).is_bool:
            continue
        uses = [op for op in body.walk() if array in op.operands]
        if uses and all(
            op.name == "array_dim" or (
                op.name == "atomic_rmw" and op.operands[0] is array
                and array not in op.operands[1:] and op.attrs["kind"] in ("add", "sub")
                and op.result not in used
            )
            for op in uses
        ) and any(op.name == "atomic_rmw" for op in uses):
            targets.append(array)
    return targets


class ParallelLoops:
    """The parallel-loop part of the kernel emitter (mixed into KernelEmitter, whose
    builder, values and helpers it uses)."""

    # state owned by KernelEmitter
    values: dict[Value, Repr]
    chunk_counters: dict[ir.Function, ir.Value]
    private_copies: dict[Value, tuple[ir.Value, ArrayView]]
    status: ir.Value
    in_parallel: bool
    region_count: int
    single_thread: ir.Value | None

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def emit_parallel_for(self, op: Operation) -> list[Repr]:
        if self.in_parallel:
            return self._serial_parallel_for(op)
        return self._outlined_parallel_for(op)

    # --- reductions -------------------------------------------------------------------

    def _identity(self, kind: str, t: Any) -> Repr:
        scalar_t = T.element_scalar(t)
        c = self.scalar.const(scalar_t, reduction_identity(kind, scalar_t))
        return c if isinstance(t, T.ScalarType) else [c] * t.count

    def _combine(self, kind: str, t: Any, a: Repr, b: Repr) -> Repr:
        scalar_t = T.element_scalar(t)
        if scalar_t.is_bool:  # bool + is or, bool * is and (as the frontend lowers them)
            kind = {"add": "bit_or", "mul": "bit_and"}.get(kind, kind)
        method = getattr(self.scalar, f"op_{kind}")
        if isinstance(t, T.ScalarType):
            return method(scalar_t, a, b)
        return [method(scalar_t, x, y) for x, y in zip(a, b)]

    # --- loops --------------------------------------------------------------------------

    def _nested_loops(self, extents: list[ir.Value], lower: ir.Value,
                      upper: ir.Value, accs: list[Repr], types: list[Any],
                      body: Block) -> list[Repr]:
        """Loops over axis 0 in [lower, upper) and the other axes in full, carrying accs."""
        ndim = len(extents)
        one = ir.Constant(i64, 1)
        zero = ir.Constant(i64, 0)

        def level(axis: int, ivs: list[ir.Value], carried: list[Repr]) -> list[Repr]:
            start, stop = (lower, upper) if axis == 0 else (zero, extents[axis])

            def inner(iv: ir.Value, c: list[Repr]) -> list[Repr]:
                if axis + 1 < ndim:
                    return level(axis + 1, ivs + [iv], c)
                return self._run_body(body, ivs + [iv] + c)

            return self._counted_loop(start, stop, one, carried, types, inner)

        return level(0, [], accs)

    def _serial_parallel_for(self, op: Operation) -> list[Repr]:
        loop = ParallelForOp(op)
        extents = [self.values[v] for v in loop.extents]
        inits = [self.values[v] for v in loop.inits]
        types = [r.type for r in op.results]
        return self._nested_loops(extents, ir.Constant(i64, 0), extents[0], inits, types,
                                  loop.body)

    def _for_each_element(self, shape: list[ir.Value],
                          body: Callable[[list[ir.Value]], None]) -> None:
        def level(axis: int, index: list[ir.Value]) -> None:
            def inner(iv: ir.Value, carried: list[Repr]) -> list[Repr]:
                if axis + 1 < len(shape):
                    level(axis + 1, index + [iv])
                else:
                    body(index + [iv])
                return []

            self._counted_loop(ir.Constant(i64, 0), shape[axis], ir.Constant(i64, 1), [], [], inner)

        level(0, [])

    def _pointer(self, view: ArrayView, index: list[ir.Value], t: ir.Type) -> ir.Value:
        offset: ir.Value = ir.Constant(i64, 0)
        for k, i in enumerate(index):
            offset = self.b.add(offset, self.b.mul(i, view.strides[k]))
        return self.b.bitcast(self.b.gep(view.data, [offset]), t.as_pointer())

    # --- outlining ------------------------------------------------------------------

    def _schedule(self, extents: list[ir.Value], cost: int,
                  vectorised: bool) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(team size, number of chunks, iterations of the outermost axis per chunk).

        The team is the requested thread count (1 to MAX_THREADS), or 1 when the loop's
        work (iterations times ``cost``) is below the runtime's threshold. A team of
        several threads gets CHUNKS_PER_THREAD chunks per thread, fewer when a chunk would
        hold less than a quarter of the threshold's work (claiming one costs an atomic
        update of a cache line the threads share); one thread gets one chunk. The chunks
        of a ``vectorised`` loop (one axis, no inner loop) hold whole multiples of
        CHUNK_ALIGN iterations."""
        settings = self.b.bitcast(self.hooks.load(self.b, "requested_threads"),
                                  SETTINGS_T.as_pointer())
        requested = self.b.load(self.b.gep(settings, [ir.Constant(i32, 0), ir.Constant(i32, 0)]))
        min_work = self.b.load(self.b.gep(settings, [ir.Constant(i32, 0), ir.Constant(i32, 2)]))
        one = ir.Constant(i64, 1)
        at_least_one = self.scalar.op_max(T.i32, requested, ir.Constant(i32, 1))
        threads = self.scalar.op_min(T.i32, at_least_one, ir.Constant(i32, MAX_THREADS))
        iterations: ir.Value = one
        for e in extents:
            iterations = self.b.mul(iterations, e)

        def iterations_for(work: ir.Value) -> ir.Value:  # ceil(work / cost), no overflow
            return self.b.sdiv(self.b.add(work, ir.Constant(i64, cost - 1)), ir.Constant(i64, cost))

        worth = self.b.icmp_signed(">=", iterations, iterations_for(min_work))
        team = self.b.select(worth, threads, ir.Constant(i32, 1))
        team64 = self.b.zext(team, i64)
        per_chunk = self.scalar.op_max(
            T.i64, iterations_for(self.b.sdiv(min_work, ir.Constant(i64, 4))), one)
        by_work = self.scalar.op_max(T.i64, self.b.sdiv(iterations, per_chunk), one)
        by_team = self.scalar.op_min(
            T.i64, self.b.mul(team64, ir.Constant(i64, CHUNKS_PER_THREAD)), by_work)
        wanted = self.b.select(self.b.icmp_signed(">", team64, one), by_team, one)
        count = self.scalar.op_min(T.i64, self.scalar.op_min(T.i64, extents[0], wanted),
                                   ir.Constant(i64, MAX_CHUNKS))
        count = self.scalar.op_max(T.i64, count, ir.Constant(i64, 0))
        size = self._ceil_div(extents[0], self.scalar.op_max(T.i64, count, one))
        if vectorised:
            # whole vector iterations: elements take the same vectorised or scalar path in
            # each chunk as in a serial loop, so results do not depend on the chunks
            align = ir.Constant(i64, CHUNK_ALIGN)
            size = self.b.mul(self._ceil_div(self.scalar.op_max(T.i64, size, one), align), align)
            count = self.b.select(self.b.icmp_signed(">", count, one),
                                  self._ceil_div(extents[0], size), count)
        return team, count, size

    def _ceil_div(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """ceil(a / b) for a >= 0 and b > 0."""
        return self.b.sdiv(self.b.sub(self.b.add(a, b), ir.Constant(i64, 1)), b)

    def _block_counters(self, team: ir.Value, nchunks: ir.Value) -> ir.Value:
        """The kernel's chunk counters, one per block (a cache line each), set to the first
        chunk of each of ``team`` blocks."""
        fn = self.b.function
        if fn not in self.chunk_counters:
            counters = self._entry_alloca(ir.ArrayType(ir.ArrayType(i64, 8), MAX_THREADS))
            counters.align = 64
            self.chunk_counters[fn] = counters
        counters = self.chunk_counters[fn]
        team64 = self.b.zext(team, i64)

        def reset(block: ir.Value, carried: list[Repr]) -> list[Repr]:
            first = self.b.sdiv(self.b.mul(block, nchunks), team64)
            self.b.store(first, self.b.gep(counters, [ir.Constant(i32, 0), block,
                                                      ir.Constant(i32, 0)]))
            return []

        self._counted_loop(ir.Constant(i64, 0), team64, ir.Constant(i64, 1), [], [], reset)
        return self.b.bitcast(counters, i64.as_pointer())

    def _claim_chunks(self, counters: ir.Value, block: ir.Value, blocks: ir.Value,
                      nchunks: ir.Value, run_chunk: Callable[[ir.Value], None]) -> None:
        """Runs the chunks of ``block`` that no thread has claimed yet, one at a time."""
        end = self.b.sdiv(self.b.mul(self.b.add(block, ir.Constant(i64, 1)), nchunks), blocks)
        counter = self.b.gep(counters, [self.b.mul(block, ir.Constant(i64, 8))])
        fn = self.b.function
        claim_bb = fn.append_basic_block("chunk.claim")
        run_bb = fn.append_basic_block("chunk.run")
        done_bb = fn.append_basic_block("chunk.done")
        self.b.branch(claim_bb)
        self.b.position_at_end(claim_bb)
        claimed = self.b.atomic_rmw("add", counter, ir.Constant(i64, 1), "monotonic")
        self.b.cbranch(self.b.icmp_signed("<", claimed, end), run_bb, done_bb)
        self.b.position_at_end(run_bb)
        run_chunk(claimed)
        self.b.branch(claim_bb)
        self.b.position_at_end(done_bb)

    def _private_copies(self, targets: list[Value], extents: list[ir.Value],
                        nthreads: ir.Value,
                        many_updates: bool = False) -> list[tuple[ir.Value, ir.Value]]:
        """(buffer, element count) per scatter target; the buffer is null when not worth it.
        ``many_updates``: each iteration updates many elements (a serial loop of updates,
        as a gradient's reverse sweep makes), so a copy is worth it whatever the count."""
        iterations: ir.Value = ir.Constant(i64, 1)
        for e in extents:
            iterations = self.b.mul(iterations, e)
        if many_updates:
            iterations = ir.Constant(i64, PRIVATE_COPY_LIMIT * PRIVATE_COPY_RATIO)
        threads = self.b.zext(nthreads, i64)
        copies = []
        for array in targets:
            view: ArrayView = self.values[array]
            total: ir.Value = ir.Constant(i64, 1)
            for size in view.shape:
                total = self.b.mul(total, size)
            worth = self.b.and_(
                self.b.icmp_signed(">", threads, ir.Constant(i64, 1)),
                self.b.and_(
                    self.b.icmp_signed("<=", self.b.mul(total, ir.Constant(i64, PRIVATE_COPY_RATIO)),
                                       iterations),
                    self.b.icmp_signed("<=", total, ir.Constant(i64, PRIVATE_COPY_LIMIT)),
                ),
            )
            before = self.b.block
            with self.b.if_then(worth):
                shape = self._entry_alloca(i64, 2)
                self.b.store(threads, self.b.gep(shape, [ir.Constant(i64, 0)]))
                self.b.store(total, self.b.gep(shape, [ir.Constant(i64, 1)]))
                scalar_t = T.element_scalar(array.type.dtype)
                allocated = self.b.call(self.hooks.load(self.b, "allocate"), [
                    self.b.ptrtoint(self.status, i64),
                    ir.Constant(i32, T.SCALAR_TYPES.index(scalar_t)), ir.Constant(i32, 2), shape,
                    ir.Constant(i32, 1), ir.Constant(ir.DoubleType(), 0.0),
                ])
                inside = self.b.block
            buffer = self.b.phi(i8_ptr)
            buffer.add_incoming(ir.Constant(i8_ptr, None), before)
            buffer.add_incoming(allocated, inside)
            copies.append((buffer, total))
        return copies

    def _add_private_copies(self, targets: list[Value],
                            copies: list[tuple[ir.Value, ir.Value]], nthreads: ir.Value) -> None:
        for array, (buffer, total) in zip(targets, copies):
            view: ArrayView = self.values[array]
            scalar_t = T.element_scalar(array.type.dtype)
            lt = flat_types(scalar_t)[0]
            used = self.b.icmp_unsigned("!=", buffer, ir.Constant(i8_ptr, None))
            with self.b.if_then(used):
                def per_thread(tid: ir.Value, carried: list[Repr], view: ArrayView = view,
                               buffer: ir.Value = buffer, total: ir.Value = total,
                               lt: ir.Type = lt, scalar_t: T.ScalarType = scalar_t) -> list[Repr]:
                    private = self._private_view(view, buffer, tid, total, scalar_t)

                    def add(index: list[ir.Value]) -> None:
                        target = self._pointer(view, index, lt)
                        mine = self._pointer(private, index, lt)
                        total_value = self.scalar.op_add(scalar_t, self.b.load(target), self.b.load(mine))
                        self.b.store(total_value, target)

                    self._for_each_element(view.shape, add)
                    return []

                self._counted_loop(ir.Constant(i64, 0), self.b.zext(nthreads, i64),
                                   ir.Constant(i64, 1), [], [], per_thread)

    def _own_when_alone(self, own: ArrayView, private: ArrayView) -> ArrayView:
        """The array's own view in a team of one thread, the thread's copy otherwise."""
        assert self.single_thread is not None
        data = private.data
        if data.type != own.data.type:
            data = self.b.bitcast(data, own.data.type)
        return ArrayView(self.b.select(self.single_thread, own.data, data), list(own.shape),
                         [self.b.select(self.single_thread, a, b)
                          for a, b in zip(own.strides, private.strides)])

    def _private_view(self, view: ArrayView, buffer: ir.Value, tid: ir.Value,
                      total: ir.Value, scalar_t: T.ScalarType) -> ArrayView:
        """Thread ``tid``'s contiguous copy of an array with ``view``'s shape."""
        itemsize = ir.Constant(i64, scalar_t.itemsize)
        data = self.b.gep(buffer, [self.b.mul(self.b.mul(tid, total), itemsize)])
        return ArrayView(data, list(view.shape),
                         row_major_strides(self.b, view.shape, scalar_t.itemsize))

    def _outlined_parallel_for(self, op: Operation) -> list[Repr]:
        loop = ParallelForOp(op)
        ndim, kinds, body = loop.ndim, op.attrs["reductions"], loop.body
        extents = [self.values[v] for v in loop.extents]
        inits = [self.values[v] for v in loop.inits]
        types = [r.type for r in op.results]
        free = free_values(body)  # the extents too: the body may use them
        vectorised = ndim == 1 and not has_inner_loop(body)
        nthreads, nchunks, chunk = self._schedule(extents, body_cost(body), vectorised)
        targets = scatter_targets(body, free)
        copies = self._private_copies(targets, extents, nthreads,
                                      bool(op.attrs.get("many_updates")))
        # the context: status, the chunk schedule, extents, captured values, private copies,
        # reduction partials
        counters = self._block_counters(nthreads, nchunks)
        fields: list[ir.Value] = [self.status, counters, self.b.zext(nthreads, i64), nchunks,
                                  chunk, *extents]
        for v in free:
            fields.extend(flatten(self.values[v], v.type))
        for buffer, total in copies:
            fields.extend([buffer, total])
        partials = []
        for t in types:
            lt = flat_types(t)[0]
            buffer = self._entry_alloca(lt, MAX_CHUNKS * len(flat_types(t)))
            partials.append(buffer)
            fields.append(buffer)
        # constants (such as a contiguous array's strides) stay constants in the region
        passed = [f for f in fields if not isinstance(f, ir.Constant)]
        struct_t = ir.LiteralStructType([f.type for f in passed])
        ctx = self._entry_alloca(struct_t)
        for k, f in enumerate(passed):
            self.b.store(f, self.b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, k)]))
        outlined = self._emit_outlined(body, struct_t, fields, ndim, free, targets, types, kinds)
        ctx_ptr = self.b.bitcast(ctx, i8_ptr)
        fn = self.b.function
        serial_bb = fn.append_basic_block("parallel.serial")
        team_bb = fn.append_basic_block("parallel.team")
        done_bb = fn.append_basic_block("parallel.done")
        self.b.cbranch(self.b.icmp_signed("<=", nthreads, ir.Constant(i32, 1)), serial_bb, team_bb)
        self.b.position_at_end(serial_bb)
        self.b.call(outlined, [ctx_ptr])
        self.b.branch(done_bb)
        self.b.position_at_end(team_bb)
        run_team = self.hooks.load(self.b, "parallel")
        self.b.call(run_team, [outlined, ctx_ptr, nthreads, ir.Constant(i32, 0)])
        self.b.branch(done_bb)
        self.b.position_at_end(done_bb)
        self._add_private_copies(targets, copies, nthreads)
        results = []
        for t, kind, init, buffer in zip(types, kinds, inits, partials):
            width = len(flat_types(t))

            def combine(index: ir.Value, carried: list[Repr], buffer: Any = buffer,
                        width: int = width, t: Any = t, kind: str = kind) -> list[Repr]:
                parts = []
                for c in range(width):
                    slot = self.b.add(self.b.mul(index, ir.Constant(i64, width)), ir.Constant(i64, c))
                    parts.append(self.b.load(self.b.gep(buffer, [slot])))
                return [self._combine(kind, t, carried[0], unflatten(t, parts))]

            (total,) = self._counted_loop(ir.Constant(i64, 0), nchunks, ir.Constant(i64, 1),
                                          [init], [t], combine)
            results.append(total)
        return results

    def _emit_outlined(self, body: Block, struct_t: ir.LiteralStructType,
                       fields: list[ir.Value], ndim: int, free: list[Value], targets: list[Value],
                       types: list[Any], kinds: tuple[str, ...]) -> ir.Function:
        self.region_count += 1
        name = f"{self.kernel.name}.parallel.{self.region_count}"
        fn = ir.Function(self.module, ir.FunctionType(void, [i8_ptr]), name)
        fn.linkage = "internal"
        # called directly by a team of one too: never inlined there (a second copy of the
        # loop, vectorised again, for nothing but compile time)
        fn.attributes.add("noinline")
        saved = (self.scalar.builder, self.status, dict(self.values), self.in_parallel,
                 dict(self.private_copies), self.single_thread)
        self._start_function(fn)
        self.in_parallel = True
        ctx = self.b.bitcast(fn.args[0], struct_t.as_pointer())
        loaded = []
        slot = 0
        for f in fields:
            if isinstance(f, ir.Constant):
                loaded.append(f)
                continue
            pointer = self.b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, slot)])
            loaded.append(self.b.load(pointer))
            slot += 1
        self.status, counters, blocks, nchunks, chunk = loaded[:5]
        extents = loaded[5:5 + ndim]
        position = 5 + ndim
        for v in free:
            width = len(flat_types(v.type))
            self.values[v] = unflatten(v.type, loaded[position:position + width])
            position += width
        tid = self.b.sext(self.b.call(self.hooks.load(self.b, "thread_num"), []), i64)
        team = self.b.sext(self.b.call(self.hooks.load(self.b, "num_threads"), []), i64)
        self.single_thread = self.b.icmp_signed("==", team, ir.Constant(i64, 1))
        for array in targets:
            buffer, total = loaded[position], loaded[position + 1]
            position += 2
            use_copy = self.b.icmp_unsigned("!=", buffer, ir.Constant(i8_ptr, None))
            private = self._private_view(self.values[array], buffer, tid, total,
                                         T.element_scalar(array.type.dtype))
            # a team of one updates the array itself as its copy: one plain path, not two
            self.private_copies[array] = (self.b.or_(use_copy, self.single_thread),
                                          self._own_when_alone(self.values[array], private))
        partials = loaded[position:]

        def run_chunk(index: ir.Value) -> None:
            lower = self.scalar.op_min(T.i64, self.b.mul(index, chunk), extents[0])
            upper = self.scalar.op_min(T.i64, self.b.add(lower, chunk), extents[0])
            accs = [self._identity(kind, t) for kind, t in zip(kinds, types)]
            finals = self._nested_loops(extents, lower, upper, accs, types, body)
            for final, buffer in zip(finals, partials):
                parts = flatten(final)
                for c, part in enumerate(parts):
                    slot = self.b.add(self.b.mul(index, ir.Constant(i64, len(parts))),
                                      ir.Constant(i64, c))
                    self.b.store(part, self.b.gep(buffer, [slot]))

        def visit_block(step: ir.Value, carried: list[Repr]) -> list[Repr]:
            owner = self.b.urem(self.b.add(tid, step), blocks)  # this thread's block first
            self._claim_chunks(counters, owner, blocks, nchunks, run_chunk)
            return []

        self._counted_loop(ir.Constant(i64, 0), blocks, ir.Constant(i64, 1), [], [], visit_block)
        self.b.ret_void()
        self._finish_function(fn)
        (self.scalar.builder, self.status, self.values, self.in_parallel,
         self.private_copies, self.single_thread) = saved
        return fn

    def _private_update(self, op: Operation,
                        atomic: Callable[[], list[ir.Value]]) -> list[Repr] | None:
        """``a[idx] += v`` on a privatised array: a plain update of this thread's copy when
        the copy exists, the atomic otherwise."""
        entry = self.private_copies.get(op.operands[0])
        if entry is None:
            return None
        use_copy, private = entry
        array = op.operands[0]
        saved = self.values[array]
        with self.b.if_else(use_copy) as (then, otherwise):
            with then:
                self.values[array] = private
                pointers = self._element_pointers(op, op.operands[1:-1])
                value = self.values[op.operands[-1]]
                scalar_t = T.element_scalar(op.operands[-1].type)
                combine = self.scalar.op_add if op.attrs["kind"] == "add" else self.scalar.op_sub
                for p, v in zip(pointers, flatten(value)):
                    self.b.store(combine(scalar_t, self.b.load(p), v), p)
                self.values[array] = saved
            with otherwise:
                atomic()
        # the old value is unused (that is what made the array a scatter target)
        zero = self._identity("add", op.result.type)
        return [zero]


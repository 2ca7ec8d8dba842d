"""Parallel loops on the CPU.

A top-level ``parallel_for`` is outlined into a function of one ``i8*`` context argument
and run on a team of threads (``GOMP_parallel`` through the runtime hooks). The outermost
axis is cut into a few contiguous chunks per thread. Each thread claims the chunks of its
own block one at a time from the block's counter, then those left in the other blocks:
on idle cores every thread runs its own block (the static split, which keeps a thread on
the same data from one loop to the next), and when the OS deschedules a thread (the
cores are shared with other processes or another threading runtime) the running ones
take over its chunks instead of waiting for it. The loop body is one function of a chunk's
range (``region``); a loop on the calling thread calls it once for the whole range, with no
schedule and no atomics, and a team's threads call it per chunk from one shared driver
(``team_driver``, started by ``run_team``, both emitted once per module: parallel_team.py).
Reductions keep one partial per chunk, combined in chunk order afterwards, so a result
does not depend on which thread ran which chunk. A loop whose estimated work (iterations
times the body's cost, see parallel_cost) is below the runtime's threshold runs on the
calling thread: a team would cost more than it saves. A parallel loop inside another runs
serially.

Scatter privatisation: an array that the region only updates with ``+=``/``-=`` (atomics
whose old value is unused) gets a zeroed private copy per thread when it is small next to
the number of iterations; threads update their copy without atomics and the copies are
added into the array after the region (by one helper per element type when the array is
contiguous). Contended atomic adds on a small grid (a particle-to-grid scatter, a
histogram) otherwise serialise the threads.

In a loop marked ``many_updates`` (a gradient's reverse sweep) every thread, even one
running alone, updates a copy of its own: the region has one path, plain updates of
memory it knows no other access touches (alias-scope metadata, so that loops vectorise
without run-time overlap checks). Where a team would need copies of an array too large,
the loop runs on the calling thread instead: every thread updating every element
atomically is far slower than one thread's plain updates (85 times slower than the
copies, on two threads, for the n-body energy's gradient), and choosing between the two
paths at each update would make LLVM optimise and vectorise both versions of every loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.abi import ErrorCode
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
from kdsl.codegen.parallel_team import HEADER_T, MAX_CHUNKS, REGION_T, TeamRuntime
from kdsl.ir.analysis import free_values
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.reductions import reduction_identity
from kdsl.ir.structured import ParallelForOp

PRIVATE_COPY_LIMIT = 1 << 22  # elements; larger scatter targets stay atomic
PRIVATE_COPY_RATIO = 4  # privatise when iterations >= RATIO * elements
# merge(array, copies, count, threads): see ParallelLoops._merge_helper
MERGE_T = ir.FunctionType(void, [i8_ptr, i8_ptr, i64, i64])


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


class ParallelLoops(TeamRuntime):
    """The parallel-loop part of the kernel emitter (mixed into KernelEmitter, whose
    builder, values and helpers it uses)."""

    # state owned by KernelEmitter
    values: dict[Value, Repr]
    private_copies: dict[Value, tuple[ir.Value, ArrayView]]
    status: ir.Value
    in_parallel: bool
    region_count: int
    single_thread: ir.Value | None
    copy_scope: CopyScopes | None

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

            hints = ("no-runtime-unroll",) if axis + 1 == ndim and elementwise else ()
            return self._counted_loop(start, stop, one, carried, types, inner, hints)

        # an elementwise body's innermost axis is vectorised, with a scalar remainder of a
        # few iterations that unrolled copies would not speed up (they made LLVM's loop
        # strength reduction a third of the compile time of small tensor statements)
        elementwise = not has_inner_loop(body) and not any(
            op.name == "atomic_rmw" for op in body.walk())
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

    def _private_copies(self, targets: list[Value], extents: list[ir.Value],
                        nthreads: ir.Value,
                        many_updates: bool = False) -> list[tuple[ir.Value, ir.Value]]:
        """(buffer, element count) per scatter target; the buffer is null when not worth it
        (or memory could not hold it), and freed by _add_private_copies.
        ``many_updates``: each iteration updates many elements (a serial loop of updates,
        as a gradient's reverse sweep makes): every thread gets a copy (the team is of one
        thread where an array is too large to copy for each, see _small_enough)."""
        iterations: ir.Value = ir.Constant(i64, 1)
        for e in extents:
            iterations = self.b.mul(iterations, e)
        threads = self.b.zext(nthreads, i64)
        copies = []
        for array in targets:
            view: ArrayView = self.values[array]
            total: ir.Value = ir.Constant(i64, 1)
            for size in view.shape:
                total = self.b.mul(total, size)
            worth: ir.Value = ir.Constant(ir.IntType(1), 1)
            if not many_updates:
                worth = self.b.and_(
                    self.b.icmp_signed(">", threads, ir.Constant(i64, 1)),
                    self.b.and_(
                        self.b.icmp_signed("<=", self.b.mul(total, ir.Constant(i64, PRIVATE_COPY_RATIO)),
                                           iterations),
                        self.b.icmp_signed("<=", total, ir.Constant(i64, PRIVATE_COPY_LIMIT))))
            before = self.b.block
            with self.b.if_then(worth):
                scalar_t = T.element_scalar(array.type.dtype)
                allocated = self.b.call(self._c_function("calloc", i8_ptr, [i64, i64]), [
                    self.b.mul(threads, total), ir.Constant(i64, scalar_t.itemsize)])
                inside = self.b.block
            buffer = self.b.phi(i8_ptr)
            buffer.add_incoming(ir.Constant(i8_ptr, None), before)
            buffer.add_incoming(allocated, inside)
            copies.append((buffer, total))
        return copies

    def _small_enough(self, targets: list[Value]) -> ir.Value:
        """Whether every array in ``targets`` is small enough to copy for each thread."""
        fits: ir.Value = ir.Constant(ir.IntType(1), 1)
        for array in targets:
            total: ir.Value = ir.Constant(i64, 1)
            for size in self.values[array].shape:
                total = self.b.mul(total, size)
            fits = self.b.and_(fits, self.b.icmp_signed("<=", total,
                                                        ir.Constant(i64, PRIVATE_COPY_LIMIT)))
        return fits

    def _add_private_copies(self, targets: list[Value],
                            copies: list[tuple[ir.Value, ir.Value]], nthreads: ir.Value) -> None:
        for array, (buffer, total) in zip(targets, copies):
            view: ArrayView = self.values[array]
            scalar_t = T.element_scalar(array.type.dtype)
            lt = flat_types(scalar_t)[0]
            used = self.b.icmp_unsigned("!=", buffer, ir.Constant(i8_ptr, None))
            if array.type.contiguous:  # element k of the array is element k of each copy
                with self.b.if_then(used):
                    self.b.call(self._merge_helper(scalar_t), [
                        self.b.bitcast(view.data, i8_ptr), buffer, total,
                        self.b.zext(nthreads, i64)])
                continue
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
        self._free_copies(copies)

    def _free_copies(self, copies: list[tuple[ir.Value, ir.Value]]) -> None:
        free = self._c_function("free", void, [i8_ptr])
        for buffer, _ in copies:  # free(NULL) does nothing
            self.b.call(free, [buffer])

    def _c_function(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """A C library function (the private copies' memory is the C heap's: no call into
        the runtime, whichever path the kernel was called on)."""
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, args), name)

    def _merge_helper(self, scalar_t: T.ScalarType) -> ir.Function:
        """``merge(array, copies, count, threads)``: ``array[k] += copies[t * count + k]``
        for every thread t and k < count (the private copies of a contiguous array added
        into it); one vectorised loop per element type and module, not one per array."""
        return self._helper(f"kdsl.merge_copies.{scalar_t}", MERGE_T,
                            lambda fn: self._emit_merge(fn, scalar_t))

    def _emit_merge(self, fn: ir.Function, scalar_t: T.ScalarType) -> None:
        b, one, zero = self.b, ir.Constant(i64, 1), ir.Constant(i64, 0)
        target, copies, count, threads = fn.args
        for pointer in (target, copies):
            pointer.add_attribute("noalias")  # a copy is memory of its own
        lt = flat_types(scalar_t)[0]
        target_p = b.bitcast(target, lt.as_pointer())
        copies_p = b.bitcast(copies, lt.as_pointer())

        def per_thread(tid: ir.Value, carried: list[Repr]) -> list[Repr]:
            base = b.mul(tid, count)

            def add(k: ir.Value, carried: list[Repr]) -> list[Repr]:
                p = b.gep(target_p, [k])
                q = b.gep(copies_p, [b.add(base, k)])
                b.store(self.scalar.op_add(scalar_t, b.load(p), b.load(q)), p)
                return []

            self._counted_loop(zero, count, one, [], [], add)
            return []

        self._counted_loop(zero, threads, one, [], [], per_thread)
        b.ret_void()

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
        cost = body_cost(body)
        iterations: ir.Value = ir.Constant(i64, 1)
        for e in extents:
            iterations = self.b.mul(iterations, e)
        nthreads = self._team_size(iterations, cost)
        targets = scatter_targets(body, free)
        many_updates = bool(op.attrs.get("many_updates")) and bool(targets)
        if many_updates:  # arrays too large to copy for a team: this thread alone
            nthreads = self.b.select(self._small_enough(targets), nthreads, ir.Constant(i32, 1))
        copies = self._private_copies(targets, extents, nthreads, many_updates)
        if many_updates:  # a copy memory could not hold: a MemoryError, not a crash
            failed: ir.Value = ir.Constant(ir.IntType(1), 0)
            for buffer, _ in copies:
                failed = self.b.or_(failed, self.b.icmp_unsigned("==", buffer,
                                                                  ir.Constant(i8_ptr, None)))
            with self.b.if_then(failed, likely=False):
                self._free_copies(copies)
            self._fail_if(failed, ErrorCode.MEMORY, op, "allocation", stop=True)
        # the context: a header run_team fills in, then the status, extents, captured
        # values, private copies and reduction partials
        fields: list[ir.Value] = [self.status, *extents]
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
        struct_t = ir.LiteralStructType([HEADER_T, *[f.type for f in passed]])
        ctx = self._entry_alloca(struct_t)
        for k, f in enumerate(passed):
            self.b.store(f, self.b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, k + 1)]))
        region_args = (body, struct_t, fields, ndim, free, targets, types, kinds)
        region = self._emit_region(*region_args, many_updates)
        ctx_ptr = self.b.bitcast(ctx, i8_ptr)
        fn = self.b.function
        serial_bb = fn.append_basic_block("parallel.serial")
        team_bb = fn.append_basic_block("parallel.team")
        done_bb = fn.append_basic_block("parallel.done")
        self.b.cbranch(self.b.icmp_signed("<=", nthreads, ir.Constant(i32, 1)), serial_bb, team_bb)
        # on the calling thread: the whole range as one chunk, no schedule, no atomics
        self.b.position_at_end(serial_bb)
        zero = ir.Constant(i64, 0)
        self.b.call(region, [ctx_ptr, zero, extents[0], zero, zero, ir.Constant(ir.IntType(1), 1)])
        self.b.branch(done_bb)
        self.b.position_at_end(team_bb)
        team_chunks = self.b.call(self._run_team(), [
            ctx_ptr, self.b.bitcast(region, i8_ptr), nthreads, iterations, extents[0],
            ir.Constant(i64, cost), ir.Constant(ir.IntType(1), int(vectorised)),
        ])
        self.b.branch(done_bb)
        self.b.position_at_end(done_bb)
        nchunks = self.b.phi(i64)
        nchunks.add_incoming(ir.Constant(i64, 1), serial_bb)
        nchunks.add_incoming(team_chunks, team_bb)
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
                                          [init], [t], combine, ("no-vectorize", "no-unroll"))
            results.append(total)
        return results

    def _emit_region(self, body: Block, struct_t: ir.LiteralStructType,
                     fields: list[ir.Value], ndim: int, free: list[Value], targets: list[Value],
                     types: list[Any], kinds: tuple[str, ...],
                     copies_only: bool) -> ir.Function:
        """The loop body as ``region(ctx, lower, upper, chunk, tid, single)``: axis 0 from
        ``lower`` to ``upper``, its reduction partials stored as chunk ``chunk``'s; ``tid``
        is the thread's number and ``single`` whether it runs alone.

        The scatter targets are updated in the thread's copy where one was made and
        atomically otherwise, chosen at each update; with ``copies_only`` (every target
        has a copy for every thread), in the copy alone."""
        self.region_count += 1
        name = f"{self.kernel.name}.parallel.{self.region_count}"
        fn = ir.Function(self.module, REGION_T, name)
        fn.linkage = "internal"
        # called directly on the calling thread too: never inlined there (a second copy
        # of the loop, vectorised again, for nothing but compile time)
        fn.attributes.add("noinline")
        saved = (self.scalar.builder, self.status, dict(self.values), self.in_parallel,
                 dict(self.private_copies), self.single_thread, self.copy_scope)
        self._start_function(fn)
        self.in_parallel = True
        _, lower, upper, index, tid, single = fn.args
        ctx = self.b.bitcast(fn.args[0], struct_t.as_pointer())
        loaded = []
        slot = 1
        for f in fields:
            if isinstance(f, ir.Constant):
                loaded.append(f)
                continue
            pointer = self.b.gep(ctx, [ir.Constant(i32, 0), ir.Constant(i32, slot)])
            loaded.append(self.b.load(pointer))
            slot += 1
        self.status = loaded[0]
        extents = loaded[1:1 + ndim]
        position = 1 + ndim
        for v in free:
            width = len(flat_types(v.type))
            self.values[v] = unflatten(v.type, loaded[position:position + width])
            position += width
        self.single_thread = single
        for array in targets:
            buffer, total = loaded[position], loaded[position + 1]
            position += 2
            private = self._private_view(self.values[array], buffer, tid, total,
                                         T.element_scalar(array.type.dtype))
            if copies_only:
                self.private_copies[array] = (ir.Constant(ir.IntType(1), 1), private)
                continue
            use_copy = self.b.icmp_unsigned("!=", buffer, ir.Constant(i8_ptr, None))
            # a team of one updates the array itself as its copy: one plain path, not two
            self.private_copies[array] = (self.b.or_(use_copy, single),
                                          self._own_when_alone(self.values[array], private))
        self.copy_scope = CopyScopes() if copies_only else None
        partials = loaded[position:]
        accs = [self._identity(kind, t) for kind, t in zip(kinds, types)]
        finals = self._nested_loops(extents, lower, upper, accs, types, body)
        for final, buffer in zip(finals, partials):
            parts = flatten(final)
            for c, part in enumerate(parts):
                slot_index = self.b.add(self.b.mul(index, ir.Constant(i64, len(parts))),
                                        ir.Constant(i64, c))
                self.b.store(part, self.b.gep(buffer, [slot_index]))
        self.b.ret_void()
        if self.copy_scope is not None:
            self.copy_scope.attach(self.module)
        self._finish_function(fn)
        (self.scalar.builder, self.status, self.values, self.in_parallel,
         self.private_copies, self.single_thread, self.copy_scope) = saved
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

        def update_copy() -> None:
            self.values[array] = private
            pointers = self._element_pointers(op, op.operands[1:-1])
            value = self.values[op.operands[-1]]
            scalar_t = T.element_scalar(op.operands[-1].type)
            combine = self.scalar.op_add if op.attrs["kind"] == "add" else self.scalar.op_sub
            first = self.values[op.operands[1]] if len(op.operands) > 2 else None
            for p, v in zip(pointers, flatten(value)):
                old = self.b.load(p)
                store = self.b.store(combine(scalar_t, old, v), p)
                if self.copy_scope is not None:  # memory no other access in the region touches
                    self.copy_scope.note_update(array, first, [old, store])
            self.values[array] = saved

        if isinstance(use_copy, ir.Constant):  # the region always has the copy
            update_copy()
        else:
            with self.b.if_else(use_copy) as (then, otherwise):
                with then:
                    update_copy()
                with otherwise:
                    atomic()
        # the old value is unused (that is what made the array a scatter target)
        zero = self._identity("add", op.result.type)
        return [zero]



class CopyScopes:
    """Alias scopes of the private copies a region updates, so that LLVM vectorises its
    loops without run-time overlap checks: a scope per copy and, for an update at a
    constant first index, per copy and index (a copy is a fresh row-major array: updates
    at different first indices within bounds touch different elements). The region's
    array loads never read a copy. Metadata is attached once the region is emitted, when
    every scope is known."""

    def __init__(self) -> None:
        self.updates: list[tuple[tuple[Value, int | None], list[ir.Instruction]]] = []
        self.loads: list[ir.Instruction] = []

    def note_update(self, array: Value, first: Repr | None, accesses: list[ir.Instruction]) -> None:
        index = first.constant if isinstance(first, ir.Constant) else None
        if not isinstance(index, int) or index < 0:  # a negative index counts from the end
            index = None
        self.updates.append(((array, index), accesses))

    def note_load(self, load: ir.Instruction) -> None:
        self.loads.append(load)

    def attach(self, module: ir.Module) -> None:
        keys = list(dict.fromkeys(key for key, _ in self.updates))
        domain = module.add_metadata([ir.MetaDataString(module, "kdsl.private_copies")])
        scopes = {key: module.add_metadata([ir.MetaDataString(module, f"kdsl.private_copy.{k}"),
                                            domain])
                  for k, key in enumerate(keys)}

        def disjoint(a: tuple[Value, int | None], b: tuple[Value, int | None]) -> bool:
            return a[0] is not b[0] or (a[1] is not None and b[1] is not None and a[1] != b[1])

        for key, accesses in self.updates:
            own = module.add_metadata([scopes[key]])
            others = [scopes[k] for k in keys if disjoint(key, k)]
            for access in accesses:
                access.set_metadata("alias.scope", own)
                if others:
                    access.set_metadata("noalias", module.add_metadata(others))
        if keys:
            every = module.add_metadata(list(scopes.values()))
            for load in self.loads:
                load.set_metadata("noalias", every)

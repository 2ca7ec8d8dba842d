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

Private copies of the arrays a loop scatters into, and their merging: parallel_copies.py.
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
    unflatten,
)
from kdsl.codegen.parallel_copies import CopyScopes, Owned, PrivateCopies, scatter_targets
from kdsl.codegen.parallel_cost import body_cost, has_inner_loop
from kdsl.codegen.parallel_team import HEADER_T, MAX_CHUNKS, REGION_T, TeamRuntime
from kdsl.ir.analysis import free_values
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.reductions import reduction_identity
from kdsl.ir.structured import ParallelForOp

__all__ = ["CopyScopes", "ParallelLoops", "scatter_targets"]


class ParallelLoops(PrivateCopies, TeamRuntime):
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
        # not in a loop of loops (an inner loop scattering into a copy vectorises better:
        # the n-body energy's product took 8% longer), but in one run in blocks
        owned = (self._first_thread_owns(targets, free)
                 if many_updates and (vectorised or op.attrs.get("blocked")) else None)
        copies = self._private_copies(targets, extents, nthreads, many_updates, owned)
        if many_updates:  # a copy memory could not hold: a MemoryError, not a crash
            failed = self._copies_failed(targets, copies, nthreads, owned)
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
        if owned is not None:
            fields.append(owned.first)
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
        region = self._emit_region(*region_args, many_updates, owned)
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
        self._add_private_copies(targets, copies, nthreads, owned)
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
                     copies_only: bool, owned: Owned | None = None) -> ir.Function:
        """The loop body as ``region(ctx, lower, upper, chunk, tid, single)``: axis 0 from
        ``lower`` to ``upper``, its reduction partials stored as chunk ``chunk``'s; ``tid``
        is the thread's number and ``single`` whether it runs alone.

        The scatter targets are updated in the thread's copy where one was made and
        atomically otherwise, chosen at each update; with ``copies_only`` (every target
        has a copy for every thread), in the copy alone, which for the ``owned`` targets
        is the array itself in the first thread."""
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
        # whether the first thread's copies of the owned targets are the arrays themselves
        owns = loaded[position + 2 * len(targets)] if owned is not None else None
        for array in targets:
            buffer, total = loaded[position], loaded[position + 1]
            position += 2
            scalar_t = T.element_scalar(array.type.dtype)
            if owned is not None and owns is not None and array in owned.targets:
                private = self._first_thread_view(self.values[array], buffer, tid, total,
                                                  scalar_t, owns)
            else:
                private = self._private_view(self.values[array], buffer, tid, total, scalar_t)
            if copies_only:
                self.private_copies[array] = (ir.Constant(ir.IntType(1), 1), private)
                continue
            use_copy = self.b.icmp_unsigned("!=", buffer, ir.Constant(i8_ptr, None))
            # a team of one updates the array itself as its copy: one plain path, not two
            self.private_copies[array] = (self.b.or_(use_copy, single),
                                          self._own_when_alone(self.values[array], private))
        if owns is not None:
            position += 1
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

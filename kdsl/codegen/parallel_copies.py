"""Private copies of the arrays a CPU parallel loop scatters into (see parallel.py).

Scatter privatisation: an array that the region only updates with ``+=``/``-=`` (atomics
whose old value is unused) gets a zeroed private copy per thread when it is small next to
the number of iterations; threads update their copy without atomics and the copies are
added into the array after the region (by one helper per element type when the array is
contiguous). Contended atomic adds on a small grid (a particle-to-grid scatter, a
histogram) otherwise serialise the threads.

In a loop marked ``many_updates`` (a gradient's reverse sweep) every thread, even one
running alone, updates memory of its own: the region has one path, plain updates of
memory it knows no other access touches (alias-scope metadata, so that loops vectorise
without run-time overlap checks). The first thread updates a contiguous array the kernel
was given or made itself, the others a copy each (a thread alone allocates, zeroes and
adds back nothing, two threads one copy) in a loop without inner loops or one run in
blocks (vjp_pipeline.py), when every array of the region is contiguous
and, checked at run time, no other one shares memory with it (an array passed for two
arguments, whose adjoints are then one array: two targets, or a target and an array the
region reads, must see each other's memory as apart, as copies are). Where a team would need copies of an array too large,
the loop runs on the calling thread instead: every thread updating every element
atomically is far slower than one thread's plain updates (85 times slower than the
copies, on two threads, for the n-body energy's gradient), and choosing between the two
paths at each update would make LLVM optimise and vectorise both versions of every loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import (
    ArrayView,
    Repr,
    flat_types,
    flatten,
    i8_ptr,
    i64,
    row_major_strides,
    void,
)
from kdsl.ir.core import Block, Operation, Value

PRIVATE_COPY_LIMIT = 1 << 22  # elements; larger scatter targets stay atomic
PRIVATE_COPY_RATIO = 4  # privatise when iterations >= RATIO * elements
# merge(array, copies, count, threads): see ParallelLoops._merge_helper
MERGE_T = ir.FunctionType(void, [i8_ptr, i8_ptr, i64, i64])
MERGE_VECTOR_BYTES = 64  # the merge's vectors (one AVX-512 register, two AVX2 ones)


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


@dataclass(frozen=True)
class Owned:
    """The targets of a ``many_updates`` loop its first thread may update itself, and
    ``first``: whether it does (an i64, 1 or 0, checked at run time)."""

    targets: frozenset[Value]
    first: ir.Value


class PrivateCopies:
    """The private-copy part of the parallel-loop emitter (mixed into ParallelLoops, and
    so into KernelEmitter, whose builder, values and helpers it uses)."""

    values: dict[Value, Repr]
    private_copies: dict[Value, tuple[ir.Value, ArrayView]]
    single_thread: ir.Value | None
    copy_scope: CopyScopes | None

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def _first_thread_owns(self, targets: list[Value], free: list[Value]) -> Owned | None:
        """The targets of a ``many_updates`` loop that its first thread may update itself
        (contiguous arguments of the kernel and arrays it makes, in a region whose arrays
        are all contiguous), and whether it does: they share no memory with the region's
        other arrays."""
        arrays = [v for v in free if isinstance(v.type, T.ArrayType)]
        if not arrays or not all(a.type.contiguous for a in arrays):
            return None
        made = set(self.kernel.args)
        made.update(op.result for op in self.kernel.body.walk() if op.name == "array_new")
        owned = frozenset(a for a in targets if a in made)
        if not owned:
            return None
        apart: ir.Value = ir.Constant(ir.IntType(1), 1)
        spans = {a: self._span(a) for a in arrays}
        for target in owned:
            start, end = spans[target]
            for other in arrays:
                if other is not target:
                    other_start, other_end = spans[other]
                    disjoint = self.b.or_(self.b.icmp_unsigned("<=", end, other_start),
                                          self.b.icmp_unsigned("<=", other_end, start))
                    apart = self.b.and_(apart, disjoint)
        return Owned(owned, self.b.zext(apart, i64))

    def _span(self, array: Value) -> tuple[ir.Value, ir.Value]:
        """The first and last-plus-one addresses of a contiguous array's elements."""
        view: ArrayView = self.values[array]
        total: ir.Value = ir.Constant(i64, T.element_scalar(array.type.dtype).itemsize)
        for size in view.shape:
            total = self.b.mul(total, size)
        start = self.b.ptrtoint(view.data, i64)
        return start, self.b.add(start, total)

    def _private_copies(self, targets: list[Value], extents: list[ir.Value],
                        nthreads: ir.Value, many_updates: bool = False,
                        owned: Owned | None = None) -> list[tuple[ir.Value, ir.Value]]:
        """(buffer, element count) per scatter target; the buffer is null when not worth it
        (or memory could not hold it), and freed by _add_private_copies.
        ``many_updates``: each iteration updates many elements (a serial loop of updates,
        as a gradient's reverse sweep makes): every thread gets a copy (the team is of one
        thread where an array is too large to copy for each, see _small_enough), but for
        the ``owned`` targets, which the first thread updates itself."""
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
            count = threads
            if owned is not None and array in owned.targets:
                count = self.b.sub(threads, owned.first)
                worth = self.b.icmp_signed(">", count, ir.Constant(i64, 0))
            elif not many_updates:
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
                    self.b.mul(count, total), ir.Constant(i64, scalar_t.itemsize)])
                inside = self.b.block
            buffer = self.b.phi(i8_ptr)
            buffer.add_incoming(ir.Constant(i8_ptr, None), before)
            buffer.add_incoming(allocated, inside)
            copies.append((buffer, total))
        return copies

    def _copies_failed(self, targets: list[Value], copies: list[tuple[ir.Value, ir.Value]],
                       nthreads: ir.Value, owned: Owned | None) -> ir.Value:
        """Whether memory could not hold a copy a ``many_updates`` loop needs."""
        failed: ir.Value = ir.Constant(ir.IntType(1), 0)
        for array, (buffer, _) in zip(targets, copies):
            missing = self.b.icmp_unsigned("==", buffer, ir.Constant(i8_ptr, None))
            if owned is not None and array in owned.targets:  # a thread alone needs none
                count = self.b.sub(self.b.zext(nthreads, i64), owned.first)
                missing = self.b.and_(missing, self.b.icmp_signed(">", count,
                                                                  ir.Constant(i64, 0)))
            failed = self.b.or_(failed, missing)
        return failed

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

    def _add_private_copies(self, targets: list[Value], copies: list[tuple[ir.Value, ir.Value]],
                            nthreads: ir.Value, owned: Owned | None = None) -> None:
        for array, (buffer, total) in zip(targets, copies):
            view: ArrayView = self.values[array]
            scalar_t = T.element_scalar(array.type.dtype)
            lt = flat_types(scalar_t)[0]
            used = self.b.icmp_unsigned("!=", buffer, ir.Constant(i8_ptr, None))
            if array.type.contiguous:  # element k of the array is element k of each copy
                count = self.b.zext(nthreads, i64)
                if owned is not None and array in owned.targets:  # the first thread's
                    count = self.b.sub(count, owned.first)  # updates are in it already
                with self.b.if_then(used):
                    self.b.call(self._merge_helper(scalar_t), [
                        self.b.bitcast(view.data, i8_ptr), buffer, total, count])
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
        into it); one loop per element type and module, not one per array."""
        return self._helper(f"kdsl.merge_copies.{scalar_t}", MERGE_T,
                            lambda fn: self._emit_merge(fn, scalar_t))

    def _emit_merge(self, fn: ir.Function, scalar_t: T.ScalarType) -> None:
        """The merge, written in vectors of MERGE_VECTOR_BYTES (then one element at a
        time for the rest): LLVM leaves the team helpers unoptimised, and a loop of one
        element per iteration, unoptimised, took a sixth of the soft-body step's product
        on two threads (the other thread waiting)."""
        b, one, zero = self.b, ir.Constant(i64, 1), ir.Constant(i64, 0)
        target, copies, count, threads = fn.args
        for pointer in (target, copies):
            pointer.add_attribute("noalias")  # a copy is memory of its own
        lt = flat_types(scalar_t)[0]
        size = scalar_t.itemsize
        lanes = max(1, MERGE_VECTOR_BYTES // size)
        target_p = b.bitcast(target, lt.as_pointer())
        copies_p = b.bitcast(copies, lt.as_pointer())
        whole = b.and_(count, ir.Constant(i64, -lanes))  # lanes is a power of two
        vector_p = ir.VectorType(lt, lanes).as_pointer()

        def add_at(k: ir.Value, base: ir.Value, wide: bool) -> None:
            p = b.gep(target_p, [k])
            q = b.gep(copies_p, [b.add(base, k)])
            if wide:
                p, q = b.bitcast(p, vector_p), b.bitcast(q, vector_p)
            x, y = b.load(p, align=size), b.load(q, align=size)
            b.store(b.fadd(x, y) if scalar_t.is_float else b.add(x, y), p, align=size)

        def per_thread(tid: ir.Value, carried: list[Repr]) -> list[Repr]:
            base = b.mul(tid, count)

            def add_vector(k: ir.Value, carried: list[Repr]) -> list[Repr]:
                add_at(k, base, True)
                return []

            def add_element(k: ir.Value, carried: list[Repr]) -> list[Repr]:
                add_at(k, base, False)
                return []

            self._counted_loop(zero, whole, ir.Constant(i64, lanes), [], [], add_vector)
            self._counted_loop(whole, count, one, [], [], add_element)
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

    def _first_thread_view(self, own: ArrayView, buffer: ir.Value, tid: ir.Value,
                           total: ir.Value, scalar_t: T.ScalarType,
                           owns: ir.Value) -> ArrayView:
        """Where ``owns`` (1, or 0: the first thread updates the array itself or not), the
        array itself for thread 0 and copy ``tid - 1`` for the others; else copy ``tid``
        (a contiguous array: its strides are its copies')."""
        private = self._private_view(own, buffer, self.b.sub(tid, owns), total, scalar_t)
        data = private.data
        if data.type != own.data.type:
            data = self.b.bitcast(data, own.data.type)
        first = self.b.and_(self.b.icmp_signed("==", tid, ir.Constant(i64, 0)),
                            self.b.icmp_signed("!=", owns, ir.Constant(i64, 0)))
        return ArrayView(self.b.select(first, own.data, data), list(own.shape),
                         private.strides)

    def _private_view(self, view: ArrayView, buffer: ir.Value, tid: ir.Value,
                      total: ir.Value, scalar_t: T.ScalarType) -> ArrayView:
        """Thread ``tid``'s contiguous copy of an array with ``view``'s shape."""
        itemsize = ir.Constant(i64, scalar_t.itemsize)
        data = self.b.gep(buffer, [self.b.mul(self.b.mul(tid, total), itemsize)])
        return ArrayView(data, list(view.shape),
                         row_major_strides(self.b, view.shape, scalar_t.itemsize))

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

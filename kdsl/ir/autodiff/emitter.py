"""Emission of a gradient: the forward sweep, then the reverse sweep, region by region.

Each structured region is reversed where it stands: a serial loop becomes a loop running
its iterations backwards, which restores the loop-carried values of the iteration from
per-iteration storage filled by the forward sweep, recomputes the body from them, and
runs the body's adjoint; a branch becomes a branch on the same condition; a parallel loop
becomes a parallel loop whose adjoints of shared values are reductions and whose adjoints
of array elements are atomic updates (demoted later where no two iterations collide).
Only values that vary with the differentiated arguments get adjoints, and only
loop-carried values the reverse sweep reads are stored.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kdsl import types as T
from kdsl.errors import CompileError
from kdsl.ir.autodiff.memory import (
    copy_elements,
    snapshot_storage,
    written_state,
    zeros_like_array,
)
from kdsl.ir.autodiff.tensor_activity import TENSOR_OPS
from kdsl.ir.autodiff.tensor_rules import prepare_tensor_storage
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.location import SourceLocation
from kdsl.ir.structured import ForOp, ParallelForOp, WhileOp

# effects the forward sweep performed once; recomputation in the reverse sweep skips them
_SKIPPED_WHEN_RECOMPUTING = frozenset({
    "array_store", "atomic_rmw", "print", "assert", "raise_index_error", "raise_shape_error",
    "raise_value_error", "array_free",
})
_INDEX = T.i64
CHECKPOINT_AFTER = 64
"""Loops of more iterations keep what the reverse sweep needs every ~sqrt(n) iterations."""


@dataclass
class LoopTape:
    """What the forward sweep kept of one serial loop: its trip count and the storage of
    the loop-carried values the reverse sweep reads (and copies of the arrays it updates
    in place). Long loops keep them only every ``segment`` iterations (checkpoints,
    ``segments`` of them): the reverse sweep runs each segment again from its checkpoint,
    so that memory grows with the square root of the trip count."""

    trip: Value
    storage: dict[Value, Value] = field(default_factory=dict)
    start: Value | None = None
    step: Value | None = None
    snapshots: dict[Value, Value] = field(default_factory=dict)  # state array -> copies
    segment: Value | None = None  # None: every iteration is kept
    segments: Value | None = None


@dataclass
class ReductionTape:
    """The winning iteration (linear index) of each min/max reduction of a parallel
    loop, and whether the initial value won instead."""

    winners: dict[int, tuple[Value, Value]]
    snapshots: dict[Value, Value] = field(default_factory=dict)  # state array -> its copy


def located_error(message: str, location: SourceLocation) -> CompileError:
    return CompileError(message, location)


class AdjointEmitter:
    """Builds the forward and reverse sweeps of a function into the current block."""

    def __init__(self, builder: IRBuilder, varied: set[Value], varied_arrays: set[Value],
                 adjoint_arrays: dict[Value, Value], needed: set[Value]) -> None:
        self.b = builder
        self.varied = varied
        self.varied_arrays = varied_arrays
        self.adjoint_arrays = adjoint_arrays
        # vector arrays the kernel only reads: their adjoints are summed component by
        # component in an array of their own (see memory.component_adjoint)
        self.component_adjoints: dict[Value, Value] = {}
        self.needed = needed
        self.stateful: set[Value] = set()  # arrays updated in place (see memory.py)
        self.bases: dict[Value, Value] = {}  # the array each view refers to
        self._activity: dict[Operation, bool] = {}
        self.old_values: dict[Operation, Value] = {}  # what a store of state overwrote
        self.parallel_depth = 0
        # adjoints of elements read at an index fixed across a loop, summed in registers
        # the reverse loop carries (see ReverseSweep._invariant_loads)
        self.load_registers: dict[tuple[Value, ...], Value] = {}
        self.adj: dict[Value, Value] = {}
        self.routed: set[Value] | None = None  # None: guard every product
        self.current: Operation | None = None
        self._result: Value | None = None
        self._mapping: dict[Value, Value] = {}
        self.tape_arrays: set[Value] = set()  # storage of saved values (see tape_bytes.py)
        # ops computed on the way back instead of in the forward sweep (see deferral.py)
        self.deferred: Container[Operation] = frozenset()

    # --- helpers for rules --------------------------------------------------------------

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.b.create(name, operands, attrs).result

    def const(self, value: float, t: Any) -> Value:
        if isinstance(t, T.ScalarType):
            return self.b.constant(value, t)
        return self.op("splat", self.b.constant(value, T.element_scalar(t)), type=t)

    def zero(self, t: Any) -> Value:
        return self.const(0.0, t)

    def guarded(self, g: Value, value: Value) -> Value:
        """``value`` where the adjoint ``g`` is not zero, else 0 (no 0 * inf), for ops
        whose adjoint a routing op (a select, min, max) may have zeroed."""
        if not isinstance(g.type, T.ScalarType):
            return value
        if self.routed is not None and not (
                self.current is not None and any(r in self.routed for r in self.current.results)):
            return value
        is_zero = self.op("eq", g, self.const(0.0, g.type))
        return self.op("select", is_zero, self.const(0.0, value.type), value)

    def scaled(self, g: Value, derivative: Value) -> Value:
        return self.guarded(g, self.op("mul", g, derivative))

    def result(self, op: Operation) -> Value:
        if self._result is not None:
            return self._result
        return self._mapping.get(op.results[0], op.results[0])

    @contextmanager
    def result_override(self, value: Value) -> Iterator[None]:
        saved, self._result = self._result, value
        try:
            yield
        finally:
            self._result = saved

    def add_all(self, values: Sequence[Value]) -> Value:
        total = values[0]
        for v in values[1:]:
            total = self.op("add", total, v)
        return total

    def sum_components(self, v: Value) -> Value:
        return self.add_all([self.op("extract", v, index=k) for k in range(T.element_count(v.type))])

    # --- adjoints ----------------------------------------------------------------------

    def accumulate(self, v: Value, contribution: Value) -> None:
        if v not in self.varied:
            return
        previous = self.adj.get(v)
        self.adj[v] = contribution if previous is None else self.op("add", previous, contribution)

    def adjoint_or_zero(self, v: Value) -> Value:
        found = self.adj.get(v)
        return found if found is not None else self.zero(v.type)

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Adjoints set inside are forgotten after (a region's values are its own)."""
        saved = dict(self.adj)
        saved_arrays = dict(self.adjoint_arrays)
        try:
            yield
        finally:
            self.adj = saved
            self.adjoint_arrays.clear()
            self.adjoint_arrays.update(saved_arrays)

    # --- the forward sweep --------------------------------------------------------------

    def forward(self, ops: Sequence[Operation], m: dict[Value, Value],
                recompute: bool) -> dict[Operation, Any]:
        """Emits ``ops`` (without their terminator); keeps tapes of the loops at this level
        whose reverse needs them. ``recompute`` skips effects the first sweep performed."""
        tapes: dict[Operation, Any] = {}
        for op in ops:
            if op.name in ("yield", "condition", "return"):
                continue
            if recompute and self.skipped_when_recomputing(op):
                continue
            if op in self.deferred:  # computed by emit_deferred, after the reverse sweep
                for r in op.results:
                    m.pop(r, None)
                continue
            self.b.location = op.location
            state = self.region_state(op, ops) if op.regions else []
            active = any(r in self.varied for r in op.results) or bool(state)
            if op.name == "for" and active:
                tapes[op] = self._forward_for(op, m, recompute, state)
            elif op.name == "while" and active:
                tapes[op] = self._forward_while(op, m, recompute, state)
            elif op.name in ("parallel_for", "if") and active:
                snapshots = self.take_snapshots(state, m)
                storage = self._candidate_storage(op, m) if op.name == "parallel_for" else {}
                new = self.clone(op, m, recompute)
                winners = (self._reduction_winners(op, m, new, storage)
                           if storage and new is not None else None)
                tapes[op] = ReductionTape(winners.winners if winners else {}, snapshots)
            else:
                if (op.name in ("array_store", "atomic_rmw") and op.operands[0] in self.stateful
                        and self.parallel_depth == 0):
                    indices = [m.get(v, v) for v in op.operands[1:-1]]
                    array = m.get(op.operands[0], op.operands[0])
                    self.old_values[op] = self.b.create("array_load", [array, *indices]).result
                self.clone(op, m, recompute)
                if op.name == "array_new" and op.result in self.varied_arrays:
                    self.adjoint_arrays[op.result] = zeros_like_array(self, m[op.result])
                elif op.name in ("array_view", "array_transpose") and (
                        op.operands[0] in self.adjoint_arrays):  # the same view of the adjoint
                    self.adjoint_arrays[op.result] = self.b.value(
                        op.name, self.adjoint_arrays[op.operands[0]],
                        *(m.get(v, v) for v in op.operands[1:]), **op.attrs)
                elif op.name in TENSOR_OPS and op.results and op.result in self.varied_arrays:
                    prepare_tensor_storage(self, op, m)  # type: ignore[arg-type]
        return tapes

    def region_state(self, op: Operation, ops: Sequence[Operation]) -> list[Value]:
        """The state arrays the region ``op`` (one of ``ops``) writes that the reverse
        sweep must see as they were before it. Not an array made earlier in the same block
        whose values do not vary, when neither ``op`` nor any op between the array's
        making and ``op`` takes part in the gradient: no adjoint work reads it before it is
        made again (scratch arrays of a sort, a neighbour grid's cells)."""
        state = written_state(op, self.stateful)
        if not state or self._active(op):
            return state
        position = next(k for k, o in enumerate(ops) if o is op)
        made = {o.results[0]: k for k, o in enumerate(ops[:position]) if o.name == "array_new"}
        kept = []
        for array in state:
            k = made.get(array)
            if k is None or array in self.varied_arrays or any(
                    self._active(o) and self._reads(o, array) for o in ops[k + 1:position]):
                kept.append(array)
        return kept

    def _active(self, op: Operation) -> bool:
        """Whether the reverse sweep has work in ``op``: values that vary, or writes of
        arrays that do."""
        found = self._activity.get(op)
        if found is None:
            found = any(
                any(r in self.varied for r in inner.results)
                or inner.name in ("array_store", "atomic_rmw")
                and self.bases.get(inner.operands[0], inner.operands[0]) in self.varied_arrays
                for inner in op.walk())
            self._activity[op] = found
        return found

    def _reads(self, op: Operation, array: Value) -> bool:
        return any(inner.name in ("array_load", "atomic_rmw")
                   and self.bases.get(inner.operands[0], inner.operands[0]) is array
                   for inner in op.walk())

    def emit_deferred(self, ops: Sequence[Operation], m: dict[Value, Value]) -> None:
        """After the reverse sweep of ``ops``: the deferred ops whose results it did not
        give (those of loops it ran), in their order."""
        for op in ops:
            if op in self.deferred and not all(r in m for r in op.results):
                self.b.location = op.location
                self.clone(op, m, True)

    def skipped_when_recomputing(self, op: Operation) -> bool:
        """Effects the first sweep performed: output, errors, writes of arrays no
        recomputation reads (writes of state are replayed)."""
        if op.name in ("array_store", "atomic_rmw"):
            return op.operands[0] not in self.stateful
        return op.name in _SKIPPED_WHEN_RECOMPUTING

    def take_snapshots(self, state: Sequence[Value], m: dict[Value, Value]) -> dict[Value, Value]:
        snapshots = {}
        for array in state:
            current = m.get(array, array)
            snapshots[array] = snapshot_storage(self, current, None)
            copy_elements(self, current, [], snapshots[array], [], current)
        return snapshots

    def restore_snapshots(self, snapshots: dict[Value, Value], m: dict[Value, Value],
                          index: Value | None = None) -> None:
        prefix = [index] if index is not None else []
        for array, copy in snapshots.items():
            current = m.get(array, array)
            copy_elements(self, copy, prefix, current, [], current)

    def clone(self, op: Operation, m: dict[Value, Value], recompute: bool) -> Operation | None:
        if op.name == "stop_gradient":
            m[op.result] = m.get(op.operands[0], op.operands[0])
            return None
        regions = [self.clone_block(r, m, recompute) for r in op.regions]
        new = Operation(op.name, [m.get(v, v) for v in op.operands], [r.type for r in op.results],
                        dict(op.attrs), regions, op.location)
        for old, fresh in zip(op.results, new.results):
            fresh.name_hint = old.name_hint
            m[old] = fresh
        if op.name == "constant":
            self.b.known_constants[new.result] = op.attrs["value"]
        self.b.block.append(new)
        return new

    def clone_block(self, block: Block, m: dict[Value, Value], recompute: bool,
                    prologue: Any = None) -> Block:
        new = Block([Value(a.type, a.name_hint) for a in block.args])
        m.update(zip(block.args, new.args))
        with self.b.at(new):
            if prologue is not None:
                prologue(new)
            for op in block.ops:
                if recompute and self.skipped_when_recomputing(op):
                    continue
                self.clone(op, m, recompute)
        return new

    def _constant_of(self, v: Value) -> Any:
        return self.b.known_constants.get(v)

    def _trip_count(self, start: Value, stop: Value, step: Value) -> Value:
        zero = self.b.constant(0, _INDEX)
        if self._constant_of(step) == 1:
            return self.op("max", self.op("sub", stop, start), zero)
        one = self.b.constant(1, _INDEX)
        span = self.op("add", self.op("sub", stop, start), self.op("sub", step, one))
        return self.op("max", self.op("floordiv", span, step), zero)

    def _storage(self, values: Sequence[Value], size: Value) -> dict[Value, Value]:
        storage = {
            v: self.b.create("array_new", [size], {
                "type": T.ArrayType(v.type, 1, True), "fill": "empty"}).result
            for v in values
        }
        self.tape_arrays.update(storage.values())
        return storage

    def _forward_for(self, op: Operation, m: dict[Value, Value], recompute: bool,
                     state: Sequence[Value]) -> LoopTape:
        loop = ForOp(op)
        start, stop, step = (m.get(v, v) for v in (loop.start, loop.stop, loop.step))
        body = loop.body
        stored = [a for a in loop.carried if a in self.needed]
        trip = self._trip_count(start, stop, step)
        tape = LoopTape(trip, {}, start, step)
        if stored or state:
            self._plan_checkpoints(tape)
            assert tape.segments is not None
            tape.storage = self._storage(stored, tape.segments)
            tape.snapshots = {a: snapshot_storage(self, m.get(a, a), tape.segments)
                              for a in state}

        def save(new: Block) -> None:
            if not stored and not state:
                return
            if self._constant_of(step) == 1:
                k = self.op("sub", new.args[0], start)
            else:
                k = self.op("floordiv", self.op("sub", new.args[0], start), step)
            self._save_checkpoint(tape, k, {a: m[a] for a in stored}, m)

        regions = [self.clone_block(body, m, recompute, save)]
        new = Operation("for", [m.get(v, v) for v in op.operands], [r.type for r in op.results],
                        dict(op.attrs), regions, op.location)
        for old, fresh in zip(op.results, new.results):
            fresh.name_hint = old.name_hint
            m[old] = fresh
        self.b.block.append(new)
        return tape

    def _plan_checkpoints(self, tape: LoopTape) -> None:
        """Segments of about sqrt(trip) iterations for loops of more than
        CHECKPOINT_AFTER iterations; one iteration each (everything kept) otherwise."""
        one = self.b.constant(1, _INDEX)
        root = self.op("cast", self.op("sqrt", self.op("cast", tape.trip, type=T.f64)),
                       type=_INDEX)
        long = self.op("gt", tape.trip, self.b.constant(CHECKPOINT_AFTER, _INDEX))
        tape.segment = self.op("select", long, self.op("add", root, one), one)
        span = self.op("add", tape.trip, self.op("sub", tape.segment, one))
        tape.segments = self.op("floordiv", span, tape.segment)

    def _save_checkpoint(self, tape: LoopTape, k: Value, values: dict[Value, Value],
                         m: dict[Value, Value]) -> None:
        """At the first iteration of each segment, what it starts from."""
        assert tape.segment is not None
        zero = self.b.constant(0, _INDEX)
        starts = self.op("eq", self.op("mod", k, tape.segment), zero)
        then, otherwise = Block(), Block()
        with self.b.at(then):
            index = self.op("floordiv", k, tape.segment)
            for a, value in values.items():
                self.b.create("array_store", [tape.storage[a], index, value])
            for a, copies in tape.snapshots.items():
                current = m.get(a, a)
                copy_elements(self, current, [], copies, [index], current)
            self.b.create("yield", [])
        with self.b.at(otherwise):
            self.b.create("yield", [])
        self.b.create("if", [starts], {"types": []}, [then, otherwise], [])

    def _counted_while(self, op: Operation, m: dict[Value, Value], recompute: bool,
                       tape: LoopTape | None) -> Operation:
        """A copy of a while loop that also counts its iterations (and stores the values
        its body starts from, when ``storage`` is given)."""
        w = WhileOp(op)
        before, body = w.before, w.body
        if len(before.ops[-1].operands) != 1:
            raise located_error("this form of while loop cannot be differentiated", op.location)
        zero = self.b.constant(0, _INDEX)
        new_before = self.clone_block(before, m, recompute)
        new_before.args.append(Value(_INDEX, "count"))

        def save(new: Block) -> None:
            if tape is not None:
                self._save_checkpoint(tape, counter,
                                      {a: m[a] for a in body.args if a in tape.storage}, m)

        counter = Value(_INDEX, "count")
        new_body = self.clone_block(body, m, recompute, save)
        new_body.args.append(counter)
        terminator = new_body.ops[-1]
        with self.b.at(new_body):
            new_body.ops.pop()
            following = self.op("add", counter, self.b.constant(1, _INDEX))
            self.b.create("yield", [*terminator.operands, following])
        new = Operation("while", [*(m.get(v, v) for v in w.inits), zero],
                        [*(r.type for r in op.results), _INDEX], dict(op.attrs),
                        [new_before, new_body], op.location)
        self.b.block.append(new)
        return new

    def _forward_while(self, op: Operation, m: dict[Value, Value], recompute: bool,
                       state: Sequence[Value]) -> LoopTape:
        """Runs the loop counting its iterations, then (when the reverse sweep needs
        values of each iteration) a second time, from the same state, storing them."""
        before_run = self.take_snapshots(state, m)
        counted = self._counted_while(op, m, recompute, None)
        for old, fresh in zip(op.results, counted.results):
            fresh.name_hint = old.name_hint
            m[old] = fresh
        count = counted.results[-1]
        stored = [a for a in WhileOp(op).body.args if a in self.needed]
        tape = LoopTape(count)
        if stored or state:
            self._plan_checkpoints(tape)
            assert tape.segments is not None
            tape.storage = self._storage(stored, tape.segments)
            tape.snapshots = {a: snapshot_storage(self, m.get(a, a), tape.segments)
                              for a in state}
            after_run = self.take_snapshots(state, m)
            self.restore_snapshots(before_run, m)
            inner = dict(m)
            self._counted_while(op, inner, True, tape)
            self.restore_snapshots(after_run, m)
        return tape

    def _candidate_storage(self, op: Operation, m: dict[Value, Value]) -> dict[int, Value]:
        """For each min/max reduction of ``op`` that varies, an array for the candidate of
        each iteration."""
        kinds = op.attrs["reductions"]
        picked = [k for k, kind in enumerate(kinds)
                  if kind in ("min", "max") and op.results[k] in self.varied]
        for k, kind in enumerate(kinds):
            if kind not in ("add", "min", "max") and op.results[k] in self.varied:
                raise located_error(
                    f"a '{kind}' reduction cannot be differentiated yet; accumulate a sum "
                    "of logarithms instead", op.location)
        if not picked:
            return {}
        loop = ParallelForOp(op)
        extents = [m.get(v, v) for v in loop.extents]
        count = extents[0]
        for extent in extents[1:]:
            count = self.op("mul", count, extent)
        return {k: self._storage([loop.partials[k]], count)[loop.partials[k]] for k in picked}

    def _reduction_winners(self, op: Operation, m: dict[Value, Value], new: Operation,
                           stored: dict[int, Value]) -> ReductionTape:
        """The winning iteration of each min/max reduction that varies: the loop ``new``
        (the forward copy of ``op``) stores each iteration's candidate in ``stored``, and a
        search loop compares them with the result (stored, not recomputed: a recomputation
        may round differently, by a vector variant of a math function)."""
        picked = list(stored)
        storage = list(stored.values())
        loop = ParallelForOp(op)
        ndim = loop.ndim
        extents = [m.get(v, v) for v in loop.extents]
        new_body = ParallelForOp(new).body
        terminator = new_body.ops.pop()
        with self.b.at(new_body):
            # each iteration's own value: the body again from the reduction's identity (the
            # same ops in the same loop, so that they round as those the loop reduced)
            inner = dict(m)
            inner.update(zip(loop.ivs, new_body.args[:ndim]))
            kinds = op.attrs["reductions"]
            for k, arg in enumerate(loop.partials):
                inner[arg] = self.reduction_identity(kinds[k], arg.type)
            for inner_op in loop.body.ops[:-1]:
                if not self.skipped_when_recomputing(inner_op):
                    self.clone(inner_op, inner, True)
            linear = self.linear_index(new_body.args[:ndim], extents)
            yielded = loop.body.ops[-1].operands
            for array, k in zip(storage, picked):
                self.b.create("array_store", [array, linear, inner.get(yielded[k], yielded[k])])
        new_body.ops.append(terminator)
        none = self.b.constant(2**62, _INDEX)
        search_body = Block([Value(_INDEX, a.name_hint) for a in loop.ivs]
                            + [Value(_INDEX, "winner") for _ in picked])
        with self.b.at(search_body):
            linear = self.linear_index(search_body.args[:ndim], extents)
            partials = []
            for slot, k in enumerate(picked):
                value = self.b.create("array_load", [storage[slot], linear]).result
                won = self.op("eq", value, m[op.results[k]])
                candidate = self.op("select", won, linear, none)
                partials.append(self.op("min", search_body.args[ndim + slot], candidate))
            self.b.create("yield", partials)
        search = self.b.create("parallel_for", [*extents, *[none for _ in picked]],
                               {"ndim": ndim, "reductions": tuple("min" for _ in picked)},
                               [search_body], [_INDEX for _ in picked])
        winners = {}
        for slot, k in enumerate(picked):
            init = m.get(loop.inits[k], loop.inits[k])
            initial_wins = self.op("eq", init, m[op.results[k]])
            winners[k] = (search.results[slot], initial_wins)
        return ReductionTape(winners)

    def reduction_identity(self, kind: str, t: Any) -> Value:
        value = {"add": 0.0, "mul": 1.0, "min": float("inf"), "max": float("-inf")}[kind]
        if not T.element_scalar(t).is_float:
            scalar = T.element_scalar(t)
            value = {"add": 0, "mul": 1}.get(kind, 0)
            return self.b.constant(value, scalar)
        return self.const(value, t)

    def linear_index(self, ivs: Sequence[Value], extents: Sequence[Value]) -> Value:
        index = ivs[0]
        for iv, extent in zip(ivs[1:], extents[1:]):
            index = self.op("add", self.op("mul", index, extent), iv)
        return index

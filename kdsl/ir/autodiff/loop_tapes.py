"""The forward sweep of serial loops: what a loop keeps for its reversal (its trip
count, the loop-carried values the reverse sweep reads, copies of the arrays it updates in
place), every iteration or only at checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from kdsl import types as T
from kdsl.ir.autodiff.emitter_base import _INDEX, EmitterBase, located_error
from kdsl.ir.autodiff.memory import copy_elements, snapshot_storage
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.structured import ForOp, WhileOp
from kdsl.records import dataclass

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


class LoopTapes(EmitterBase):
    """The forward copies of ``for`` and ``while`` loops, with their tapes."""

    def _forward_for(self, op: Operation, m: dict[Value, Value], recompute: bool,
                     state: Sequence[Value]) -> LoopTape:
        loop = ForOp(op)
        start, stop, step = (m.get(v, v) for v in (loop.start, loop.stop, loop.step))
        body = loop.body
        stored = [a for a in loop.carried if a in self.needed]
        trip = self._trip_count(start, stop, step)
        tape = LoopTape(trip, {}, start, step)
        if stored or state:
            self._plan_storage(tape, stored, state, m)

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

    def _plan_storage(self, tape: LoopTape, stored: Sequence[Value], state: Sequence[Value],
                      m: dict[Value, Value]) -> None:
        """The checkpoints of ``tape``'s loop and the storage they fill: the loop-carried
        values in ``stored`` and copies of the arrays in ``state``, one per segment."""
        self._plan_checkpoints(tape)
        assert tape.segments is not None
        tape.storage = self._storage(stored, tape.segments)
        tape.snapshots = {a: snapshot_storage(self, m.get(a, a), tape.segments) for a in state}

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
            self._plan_storage(tape, stored, state, m)
            after_run = self.take_snapshots(state, m)
            self.restore_snapshots(before_run, m)
            inner = dict(m)
            self._counted_while(op, inner, True, tape)
            self.restore_snapshots(after_run, m)
        return tape

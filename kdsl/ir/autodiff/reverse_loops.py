"""The reversal of serial loops: iterations in reverse order, each restoring its
loop-carried values (from storage the forward sweep filled, or by running a segment again
from its checkpoint), recomputing the body and running its adjoint; and loops whose
carried values are only summed, reversed in their own order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kdsl.ir.analysis import free_values
from kdsl.ir.autodiff.emitter import _INDEX, LoopTape
from kdsl.ir.autodiff.memory import copy_elements, snapshot_storage
from kdsl.ir.autodiff.reverse_arrays import ArrayAdjoints, LoadKey
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.structured import ForOp
from kdsl.records import dataclass


def carried_loop(builder: Any, bounds: Sequence[Value], inits: Sequence[Value],
                 body: Block) -> list[Value]:
    """A ``for`` loop over ``body`` (whose yield is emitted); values the body yields
    unchanged are not carried: their uses and the loop's result become the initial value
    (a carried adjoint nothing inside the loop adds to). Returns the loop's values."""
    from kdsl.ir.core import replace_all_uses

    terminator = body.ops[-1]
    kept = []
    for k, arg in enumerate(body.args[1:]):
        if terminator.operands[k] is arg:
            replace_all_uses(body, arg, inits[k])
        else:
            kept.append(k)
    body.args = [body.args[0]] + [body.args[1 + k] for k in kept]
    terminator.operands = [terminator.operands[k] for k in kept]
    loop = builder.create("for", [*bounds, *(inits[k] for k in kept)], {}, [body])
    values = list(inits)
    for k, r in zip(kept, loop.results):
        values[k] = r
    return values


@dataclass
class _LoopPlan:
    """What the reversal of one serial loop works with."""

    body: Block
    iv: Value | None  # a for loop's induction variable (None for a while loop)
    inits: Sequence[Value]
    carried: Sequence[Value]
    active: list[int]
    free: list[Value]
    loads: dict[LoadKey, Any]


class LoopReversal(ArrayAdjoints):
    """The adjoints of ``for`` and ``while`` loops."""

    def _reverse_loop(self, op: Operation, m: dict[Value, Value], tape: LoopTape, body: Block,
                      iv: Value | None, carried: Sequence[Value],
                      inits: Sequence[Value]) -> None:
        """Iterations in reverse order: restore the carried values, recompute, adjoint.
        With per-iteration storage, segment by segment from checkpoints (see LoopTape)."""
        active = [k for k, a in enumerate(carried) if a in self.varied]
        free = [v for v in free_values(op.regions) if v in self.varied]
        loads = self._invariant_loads(body)
        initial = ([self.adjoint_or_zero(op.results[k]) for k in active]
                   + [self.adjoint_or_zero(f) for f in free]
                   + [self.zero(t) for t in loads.values()])
        zero = self.b.constant(0, _INDEX)
        plan = _LoopPlan(body, iv, inits, carried, active, free, loads)
        if tape.segment is None:
            results = self._reverse_iterations(op, m, tape, plan, initial, zero, tape.trip,
                                               tape.storage, tape.snapshots, zero)
        else:
            results = self._reverse_segments(op, m, tape, plan, initial)
        for slot, k in enumerate(active):
            self.accumulate(inits[k], results[slot])
        for f, r in zip(free, results[len(active):]):
            self.adj[f] = r
        if loads:
            ran = self.op("gt", tape.trip, self.b.constant(0, _INDEX))
            self._flush_registers(loads, results[len(active) + len(free):], ran, m)
        if tape.snapshots:  # the state as it was before the loop
            ran = self.op("gt", tape.trip, zero)
            then, otherwise = Block(), Block()
            with self.b.at(then):
                self.restore_snapshots(tape.snapshots, m, zero)
                self.b.create("yield", [])
            with self.b.at(otherwise):
                self.b.create("yield", [])
            self.b.create("if", [ran], {"types": []}, [then, otherwise], [])

    def _reverse_segments(self, op: Operation, m: dict[Value, Value], tape: LoopTape,
                          plan: _LoopPlan, initial: list[Value]) -> list[Value]:
        """Segments last to first: from the checkpoint at its start, a segment runs again
        storing what each of its iterations starts from, then its iterations reverse."""
        assert tape.segment is not None and tape.segments is not None
        zero = self.b.constant(0, _INDEX)
        one = self.b.constant(1, _INDEX)
        outer = Block([Value(_INDEX, "segment")] + [Value(v.type, v.name_hint) for v in initial])
        with self.b.at(outer), self.scope():
            index = self.op("sub", self.op("sub", tape.segments, one), outer.args[0])
            first = self.op("mul", index, tape.segment)
            end = self.op("min", self.op("add", first, tape.segment), tape.trip)
            length = self.op("sub", end, first)
            storage = self._storage(list(tape.storage), length)
            snapshots = {a: snapshot_storage(self, m.get(a, a), length) for a in tape.snapshots}
            self.restore_snapshots(tape.snapshots, m, index)
            start_values = self._checkpoint_values(plan, m, tape, index)
            last = self._run_segment(op, m, tape, plan, first, self.op("sub", length, one),
                                     start_values, storage, snapshots)
            final = self.op("sub", length, one)
            for a, array in storage.items():
                self.b.create("array_store", [array, final, last[a]])
            for a, copies in snapshots.items():
                current = m.get(a, a)
                copy_elements(self, current, [], copies, [final], current)
            results = self._reverse_iterations(op, m, tape, plan, list(outer.args[1:]), first,
                                               length, storage, snapshots, first)
            self.b.create("yield", results)
        return carried_loop(self.b, [zero, tape.segments, one], initial, outer)

    def _checkpoint_values(self, plan: _LoopPlan, m: dict[Value, Value], tape: LoopTape,
                           index: Value) -> list[Value]:
        values = []
        for k, a in enumerate(plan.carried):
            if a in tape.storage:
                values.append(self.b.create("array_load", [tape.storage[a], index]).result)
            else:  # never read by the reverse sweep: any value of its type will do
                values.append(m.get(plan.inits[k], plan.inits[k]))
        return values

    def _run_segment(self, op: Operation, m: dict[Value, Value], tape: LoopTape,
                     plan: _LoopPlan, first: Value, count: Value, start_values: list[Value],
                     storage: dict[Value, Value], snapshots: dict[Value, Value]) -> dict[Value, Value]:
        """Runs ``count`` iterations from ``first`` again, storing at slot k - first what
        iteration k starts from; returns the values the next iteration starts from."""
        zero = self.b.constant(0, _INDEX)
        one = self.b.constant(1, _INDEX)
        body = plan.body
        loop_body = Block([Value(_INDEX, "k")] + [Value(v.type, a.name_hint)
                                                  for v, a in zip(start_values, plan.carried)])
        with self.b.at(loop_body), self.scope():
            slot = loop_body.args[0]
            inner = dict(m)
            if plan.iv is not None:
                assert tape.start is not None and tape.step is not None
                k = self.op("add", first, slot)
                inner[plan.iv] = self.op("add", tape.start, self.op("mul", k, tape.step))
            inner.update(zip(plan.carried, loop_body.args[1:]))
            for a, array in storage.items():
                self.b.create("array_store", [array, slot, inner[a]])
            for a, copies in snapshots.items():
                current = m.get(a, a)
                copy_elements(self, current, [], copies, [slot], current)
            for inner_op in body.ops[:-1]:
                if not self.skipped_when_recomputing(inner_op):
                    self.clone(inner_op, inner, True)
            yielded = body.ops[-1].operands
            self.b.create("yield", [inner.get(v, v) for v in yielded])
        loop = self.b.create("for", [zero, count, one, *start_values], {}, [loop_body])
        return dict(zip(plan.carried, loop.results))

    def _reverse_iterations(self, op: Operation, m: dict[Value, Value], tape: LoopTape,
                            plan: _LoopPlan, initial: list[Value], first: Value, count: Value,
                            storage: dict[Value, Value], snapshots: dict[Value, Value],
                            offset: Value) -> list[Value]:
        """Iterations first + count - 1 down to first, each restored from slot k - offset."""
        body, carried, active, free, loads = (plan.body, plan.carried, plan.active, plan.free,
                                              plan.loads)
        zero = self.b.constant(0, _INDEX)
        one = self.b.constant(1, _INDEX)
        new_body = Block([Value(_INDEX, "r")]
                         + [Value(carried[k].type, f"d_{carried[k].name_hint}") for k in active]
                         + [Value(f.type, f"d_{f.name_hint}") for f in free]
                         + [Value(t, "d_element") for t in loads.values()])
        registers = self.load_registers
        saved_registers = dict(registers)
        first_register = 1 + len(active) + len(free)
        registers.update(zip(loads, new_body.args[first_register:]))
        with self.b.at(new_body), self.scope():
            k_iter = self.op("sub", self.op("sub", self.op("add", first, count), one),
                             new_body.args[0])
            slot = self.op("sub", k_iter, offset)
            inner = dict(m)
            if plan.iv is not None:  # a for loop: its induction variable
                assert tape.start is not None and tape.step is not None
                inner[plan.iv] = self.op("add", tape.start, self.op("mul", k_iter, tape.step))
            self.restore_snapshots(snapshots, m, slot)
            for k, a in enumerate(carried):
                if a in storage:
                    inner[a] = self.b.create("array_load", [storage[a], slot]).result
                else:  # never read by the reverse sweep: any value of its type will do
                    inner[a] = m.get(plan.inits[k], plan.inits[k])
            for f, arg in zip(free, new_body.args[1 + len(active):]):
                self.adj[f] = arg
            tapes = self.forward(body.ops, inner, recompute=True)
            yielded = body.ops[-1].operands
            for position, k in enumerate(active):
                self.accumulate(yielded[k], new_body.args[1 + position])
            self.reverse(body.ops, inner, tapes)
            self._mapping = m
            outs = [self.adjoint_or_zero(carried[k]) for k in active]
            outs += [self.adj[f] for f in free]
            outs += [registers[key] for key in loads]
            self.b.create("yield", outs)
        registers.clear()
        registers.update(saved_registers)
        return carried_loop(self.b, [zero, count, one], initial, new_body)

    def _reverse_fused_loop(self, op: Operation, m: dict[Value, Value]) -> None:
        """A deferred for loop (its carried values that vary are only summed): one loop, in
        the loop's own order, carrying its values as it did and the adjoints of the values
        it reads; each iteration recomputes the body and runs its adjoint, seeded with the
        adjoints of the loop's results (the same in every iteration)."""
        loop = ForOp(op)
        body = loop.body
        start, stop, step = (m.get(v, v) for v in (loop.start, loop.stop, loop.step))
        free = [v for v in free_values(op.regions) if v in self.varied]
        loads = self._invariant_loads(body)
        seeds = {k: self.adj[r] for k, r in enumerate(op.results) if r in self.adj}
        carried = len(loop.carried)
        new_body = Block([Value(_INDEX, loop.iv.name_hint)]
                         + [Value(a.type, a.name_hint) for a in loop.carried]
                         + [Value(f.type, f"d_{f.name_hint}") for f in free]
                         + [Value(t, "d_element") for t in loads.values()])
        registers = self.load_registers
        saved_registers = dict(registers)
        registers.update(zip(loads, new_body.args[1 + carried + len(free):]))
        with self.b.at(new_body), self.scope():
            inner = dict(m)
            inner[loop.iv] = new_body.args[0]
            inner.update(zip(loop.carried, new_body.args[1:1 + carried]))
            for f, arg in zip(free, new_body.args[1 + carried:]):
                self.adj[f] = arg
            tapes = self.forward(body.ops, inner, recompute=True)
            yielded = body.ops[-1].operands
            for k, g in seeds.items():
                self.accumulate(yielded[k], g)
            self.reverse(body.ops, inner, tapes)
            self._mapping = m
            self.emit_deferred(body.ops, inner)
            outs = [inner.get(v, v) for v in yielded]
            outs += [self.adj[f] for f in free]
            outs += [registers[key] for key in loads]
            self.b.create("yield", outs)
        registers.clear()
        registers.update(saved_registers)
        initial = ([m.get(v, v) for v in loop.inits] + [self.adjoint_or_zero(f) for f in free]
                   + [self.zero(t) for t in loads.values()])
        results = carried_loop(self.b, [start, stop, step], initial, new_body)
        m.update(zip(op.results, results))
        for k, g in seeds.items():
            self.accumulate(loop.inits[k], g)
        for f, r in zip(free, results[carried:]):
            self.adj[f] = r
        if loads:
            # the test the loop itself makes before its first iteration, where it is one
            # (code generation can then tell that the sums are zero when it is false)
            ran = (self.op("lt", start, stop) if self._constant_of(step) == 1
                   else self.op("gt", self._trip_count(start, stop, step),
                                self.b.constant(0, _INDEX)))
            self._flush_registers(loads, results[carried + len(free):], ran, m)

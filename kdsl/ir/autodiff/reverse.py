"""The reverse sweep: adjoints of straight-line ops from the registry's rules, and the
reversal of loops, branches and parallel loops (see emitter.py for the forward sweep)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kdsl import types as T
from kdsl.ir.analysis import free_values
from kdsl.ir.autodiff.activity import is_float
from kdsl.ir.autodiff.bits import check_bits_round_trips
from kdsl.ir.autodiff.emitter import (
    _SKIPPED_WHEN_RECOMPUTING,
    AdjointEmitter,
    LoopTape,
    ReductionTape,
    located_error,
)
from kdsl.ir.autodiff.memory import array_bases, copy_elements, snapshot_storage
from kdsl.ir.autodiff.tensor_activity import REVERSED_HERE, check_tensor_ops
from kdsl.ir.autodiff.tensor_rules import TensorAdjoints, flush_tensor_adjoints
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.ops import lookup
from kdsl.ir.structured import ForOp, IfOp, ParallelForOp, WhileOp

_INDEX = T.i64


def _defined_in(block: Block) -> set[Value]:
    defined = set(block.args)
    for op in block.walk():
        defined.update(op.results)
        for region in op.regions:
            defined.update(region.args)
    return defined


LoadKey = tuple[Value, ...]


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


class ReverseSweep(AdjointEmitter):
    """The adjoint of each op, last to first.

    The adjoint of an element a loop reads at an index fixed across the loop (``x[i]``
    inside a loop over ``j``) is summed in a register the reverse loop carries and added
    into the adjoint array once, after it (``load_registers``).
    """


    def reverse(self, ops: Sequence[Operation], m: dict[Value, Value],
                tapes: dict[Operation, Any]) -> None:
        self._mapping = m
        for op in reversed(ops):
            if op.name in ("yield", "condition", "return"):
                continue
            if op.name in REVERSED_HERE:
                TensorAdjoints.of(self, op).reverse(op, m)
                self._mapping = m
                continue
            flush_tensor_adjoints(self, op)  # before anything else reads the adjoint arrays
            if op.name in ("array_store", "atomic_rmw"):
                self._reverse_store(op, m)
                continue
            if op.name in _SKIPPED_WHEN_RECOMPUTING:
                continue
            state = self.region_state(op, ops) if op.regions else []
            if not state and not any(r in self.adj for r in op.results):
                continue
            self.b.location = op.location
            if op in self.deferred and op.name != "parallel_for":
                if op.name == "for":
                    self._reverse_fused_loop(op, m)
                else:
                    self._reverse_linear(op)
            elif op.name == "for":
                loop = ForOp(op)
                self._reverse_loop(op, m, tapes[op], loop.body, loop.iv, loop.carried, loop.inits)
            elif op.name == "while":
                w = WhileOp(op)
                self._reverse_loop(op, m, tapes[op], w.body, None, w.body.args, w.inits)
            elif op.name == "if":
                self.restore_snapshots(tapes[op].snapshots, m)
                self._reverse_if(op, m)
                self.restore_snapshots(tapes[op].snapshots, m)
            elif op.name == "parallel_for":
                snapshots = tapes[op].snapshots if op in tapes else {}
                self.restore_snapshots(snapshots, m)
                self.parallel_depth += 1
                try:
                    self._reverse_parallel_for(op, m, tapes.get(op))
                finally:
                    self.parallel_depth -= 1
                self.restore_snapshots(snapshots, m)
            elif op.name == "array_load":
                self._accumulate_array(op, m)
            elif op.name == "call":
                self._reverse_custom_gradient(op, m)
            else:
                self._reverse_op(op, m)
            self._mapping = m
        flush_tensor_adjoints(self)

    def _reverse_custom_gradient(self, op: Operation, m: dict[Value, Value]) -> None:
        """A func with a hand-written gradient: call it with the arguments and the adjoint
        of the result; it returns one adjoint per argument."""
        count = op.attrs["arguments"]
        arguments = [m.get(v, v) for v in op.operands[:count]]
        captures = [m.get(v, v) for v in op.operands[count:]]
        types = [v.type for v in op.operands[:count]]
        call = self.b.create("call", [*arguments, self.adj[op.result], *captures],
                             {"callee": op.attrs["gradient"], "types": types}, result_types=types)
        for v, adjoint in zip(op.operands[:count], call.results):
            if is_float(v.type):
                self.accumulate(v, adjoint)

    def _reverse_linear(self, op: Operation) -> None:
        """``+``, ``-`` and negation of operands of the result's type."""
        g = self.adj[op.results[0]]
        if op.name == "neg":
            self.accumulate(op.operands[0], self.op("neg", g))
            return
        self.accumulate(op.operands[0], g)
        self.accumulate(op.operands[1], g if op.name == "add" else self.op("neg", g))

    def _reverse_store(self, op: Operation, m: dict[Value, Value]) -> None:
        """``a[i] = v``: v receives the adjoint of the element, which the store overwrote
        (so it is cleared); ``a[i] += v`` passes it on unchanged."""
        array, value = op.operands[0], op.operands[-1]
        self.b.location = op.location
        indices = [m.get(v, v) for v in op.operands[1:-1]]
        old = self.old_values.get(op)
        if old is not None:  # the state as it was before the store
            self.b.create("array_store", [m.get(array, array), *indices, old])
        adjoint_array = self.adjoint_arrays.get(array)
        if adjoint_array is None:
            return
        g = self.b.create("array_load", [adjoint_array, *indices]).result
        if op.name == "array_store":
            self.b.create("array_store", [adjoint_array, *indices, self.zero(g.type)])
        elif op.attrs["kind"] == "sub":
            g = self.op("neg", g)
        self.accumulate(value, g)

    def _reverse_op(self, op: Operation, m: dict[Value, Value]) -> None:
        if len(op.results) != 1:
            raise located_error(f"'{op.name}' cannot be differentiated", op.location)
        rule = lookup(op.name).adjoint
        if rule is None:
            raise located_error(
                f"'{op.name}' has no derivative rule; its result cannot be differentiated",
                op.location)
        g = self.adj[op.result]
        self.current = op
        operands = [m.get(v, v) for v in op.operands]
        for v, contribution in zip(op.operands, rule(self, op, operands, g)):
            if contribution is not None:
                self.accumulate(v, contribution)

    def _accumulate_array(self, op: Operation, m: dict[Value, Value]) -> None:
        if op.operands[0] not in self.adjoint_arrays:
            return
        self._add_to_array(tuple(op.operands), m, self.adj[op.result])

    def _add_to_array(self, key: LoadKey, m: dict[Value, Value], value: Value) -> None:
        registers = self.load_registers
        if key in registers:
            registers[key] = self.op("add", registers[key], value)
            return
        array, *indices = key
        mapped = [m.get(v, v) for v in indices]
        components = self.component_adjoints.get(array)
        if components is not None:
            for c in range(T.element_count(value.type)):
                part = self.op("extract", value, index=c)
                self.b.create("atomic_rmw", [components, self.b.constant(c, _INDEX), *mapped, part],
                              {"kind": "add", "implicit": True})
            return
        self.b.create("atomic_rmw", [self.adjoint_arrays[array], *mapped, value],
                      {"kind": "add", "implicit": True})

    def _invariant_loads(self, body: Block) -> dict[LoadKey, Any]:
        """Elements every iteration of the loop reads at indices defined outside it."""
        defined = _defined_in(body)
        found: dict[LoadKey, Any] = {}
        for op in body.ops:
            if (op.name == "array_load" and op.operands[0] in self.adjoint_arrays
                    and op.result in self.varied
                    and not any(v in defined for v in op.operands[1:])):
                found.setdefault(tuple(op.operands), op.result.type)
        return found

    # --- branches -----------------------------------------------------------------------

    def _reverse_if(self, op: Operation, m: dict[Value, Value]) -> None:
        free = [v for v in free_values(op.regions) if v in self.varied]
        seeds = [self.adj.get(r) for r in op.results]
        branches: list[tuple[Block, list[Value | None]]] = []
        for region in op.regions:
            block = Block()
            with self.b.at(block), self.scope():
                inner = dict(m)
                tapes = self.forward(region.ops, inner, recompute=True)
                for v, g in zip(region.ops[-1].operands, seeds):
                    if g is not None:
                        self.accumulate(v, g)
                self.reverse(region.ops, inner, tapes)
                self._mapping = m
                branches.append((block, [self.adj.get(f) for f in free]))
        kept = [k for k, f in enumerate(free) if any(b[1][k] is not None for b in branches)]
        for block, found in branches:
            with self.b.at(block):
                outs: list[Value] = []
                for k in kept:
                    value = found[k]
                    outs.append(value if value is not None else self.adjoint_or_zero(free[k]))
                self.b.create("yield", outs)
        condition = IfOp(op).condition
        new = self.b.create("if", [m.get(condition, condition)],
                            {"types": [free[k].type for k in kept]},
                            [b for b, _ in branches], [free[k].type for k in kept])
        for k, r in zip(kept, new.results):
            self.adj[free[k]] = r

    # --- serial loops -------------------------------------------------------------------

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

    def _flush_registers(self, loads: dict[LoadKey, Any], sums: Sequence[Value], ran: Value,
                         m: dict[Value, Value]) -> None:
        """Adds the summed adjoints of invariant elements into their arrays (only when
        the loop ran, ``ran``: otherwise its indices were never checked)."""
        registers = self.load_registers
        outer = [(key, v) for key, v in zip(loads, sums) if key in registers]
        for key, v in outer:  # an enclosing loop sums them in its own register
            self._add_to_array(key, m, v)
        direct = [(key, v) for key, v in zip(loads, sums) if key not in registers]
        if not direct:
            return
        then, otherwise = Block(), Block()
        with self.b.at(then):
            for key, v in direct:
                self._add_to_array(key, m, v)
            self.b.create("yield", [])
        with self.b.at(otherwise):
            self.b.create("yield", [])
        self.b.create("if", [ran], {"types": []}, [then, otherwise], [])

    # --- parallel loops -----------------------------------------------------------------

    def _reverse_parallel_for(self, op: Operation, m: dict[Value, Value],
                              tape: ReductionTape | None) -> None:
        """The adjoint loop; for a deferred loop it also sums the iterations' partial values,
        giving the loop's results."""
        loop = ParallelForOp(op)
        ndim = loop.ndim
        kinds = op.attrs["reductions"]
        body = loop.body
        deferred = op in self.deferred
        free = [v for v in free_values(op.regions) if v in self.varied]
        extents = [m.get(v, v) for v in loop.extents]
        winners = tape.winners if tape is not None else {}
        seeds = {k: self.adj[r] for k, r in enumerate(op.results) if r in self.adj}
        partials = [Value(a.type, a.name_hint) for a in loop.partials] if deferred else []
        new_body = Block([Value(_INDEX, a.name_hint) for a in loop.ivs]
                         + [Value(f.type, f"d_{f.name_hint}") for f in free] + partials)
        with self.b.at(new_body), self.scope():
            inner = dict(m)
            inner.update(zip(loop.ivs, new_body.args[:ndim]))
            for k, arg in enumerate(loop.partials):
                inner[arg] = partials[k] if deferred else self.reduction_identity(kinds[k], arg.type)
            for f, arg in zip(free, new_body.args[ndim:]):
                self.adj[f] = arg
            tapes = self.forward(body.ops, inner, recompute=True)
            linear = self.linear_index(new_body.args[:ndim], extents) if winners else None
            yielded = body.ops[-1].operands
            for k, g in seeds.items():
                if k in winners:
                    assert linear is not None
                    winner, initial_wins = winners[k]
                    mine = self.op("eq", linear, winner)
                    mine = self.op("bit_and", mine, self.op("logical_not", initial_wins))
                    g = self.op("select", mine, g, self.zero(g.type))
                self.accumulate(yielded[k], g)
            self.reverse(body.ops, inner, tapes)
            self._mapping = m
            outs = [self.adj[f] for f in free]
            if deferred:
                self.emit_deferred(body.ops, inner)
                outs += [inner.get(v, v) for v in yielded]
            self.b.create("yield", outs)
        many_updates = any(
            inner.name in ("for", "while") and any(o.name == "atomic_rmw" for o in inner.walk())
            for inner in new_body.walk())
        reductions = tuple("add" for _ in free) + (tuple(kinds) if deferred else ())
        attrs: dict[str, Any] = {"ndim": ndim, "reductions": reductions}
        if many_updates:
            attrs["many_updates"] = True
        inits = [self.adjoint_or_zero(f) for f in free]
        if deferred:
            inits += [m.get(v, v) for v in loop.inits]
        new = self.b.create("parallel_for", [*extents, *inits], attrs, [new_body],
                            [v.type for v in inits])
        for f, r in zip(free, new.results):
            self.adj[f] = r
        if deferred:
            m.update(zip(op.results, new.results[len(free):]))
        for k, g in seeds.items():
            init = loop.inits[k]
            if k in winners:
                g = self.op("select", winners[k][1], g, self.zero(g.type))
            self.accumulate(init, g)

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


def check_differentiable(body: Block, varied: set[Value], varied_arrays: set[Value],
                         stateful: set[Value]) -> None:
    """Constructs whose gradient would not be exact are located errors."""
    check_tensor_ops(body, varied, varied_arrays)
    check_bits_round_trips(body, varied)
    bases = array_bases(body)
    used = {v for op in body.walk() for v in op.operands}
    for op in body.walk():
        if op.name in ("array_store", "atomic_rmw"):
            target = op.operands[0]
            array = bases.get(target, target)
            if array in stateful and target is not array:
                raise located_error(
                    "an in-place update through a view cannot be differentiated yet; index "
                    "the array itself", op.location)
            if array in stateful and isinstance(array.type, T.ArrayType) and array.type.ndim > 3:
                raise located_error(
                    "in-place updates of arrays of more than 3 axes cannot be differentiated yet",
                    op.location)
            if op.name == "atomic_rmw" and (array in stateful or op.operands[-1] in varied):
                if op.result in used:
                    raise located_error(
                        "the old value an atomic update returns cannot be differentiated",
                        op.location)
                if op.attrs["kind"] not in ("add", "sub"):
                    raise located_error(
                        f"an atomic {op.attrs['kind']} cannot be differentiated", op.location)
        if op.name == "call" and "gradient" not in op.attrs:
            raise located_error("calls that were not inlined cannot be differentiated",
                                op.location)
        if op.name == "parallel_for":
            for kind, r in zip(op.attrs["reductions"], op.results):
                if r in varied and kind not in ("add", "min", "max"):
                    raise located_error(
                        f"a '{kind}' reduction cannot be differentiated yet", op.location)
        if not op.regions and op.name not in ("array_load", "array_store", "atomic_rmw",
                                              "yield", "condition", "return", "call",
                                              *REVERSED_HERE):
            if any(r in varied for r in op.results) and lookup(op.name).adjoint is None:
                raise located_error(
                    f"'{op.name}' has no derivative rule; its result cannot be differentiated",
                    op.location)
        for r in op.results:
            if r in varied and not is_float(r.type):
                raise located_error("this value cannot be differentiated", op.location)

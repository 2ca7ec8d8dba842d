"""The reverse sweep: adjoints of straight-line ops from the registry's rules, and the
reversal of loops, branches and parallel loops (see emitter.py for the forward sweep)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kdsl import types as T
from kdsl.ir.autodiff.activity import is_float
from kdsl.ir.autodiff.emitter import (
    _SKIPPED_WHEN_RECOMPUTING,
    AdjointEmitter,
    LoopTape,
    ReductionTape,
    located_error,
)
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.ops import lookup

_INDEX = T.i64


def free_values(blocks: Sequence[Block]) -> list[Value]:
    """Values used in ``blocks`` but defined outside them, in order of first use."""
    defined: set[Value] = set()
    for block in blocks:
        defined.update(block.args)
        for op in block.walk():
            defined.update(op.results)
            for region in op.regions:
                defined.update(region.args)
    seen: dict[Value, None] = {}
    for block in blocks:
        for op in block.walk():
            for v in op.operands:
                if v not in defined:
                    seen.setdefault(v, None)
    return list(seen)


class ReverseSweep(AdjointEmitter):
    """The adjoint of each op, last to first."""

    def reverse(self, ops: Sequence[Operation], m: dict[Value, Value],
                tapes: dict[Operation, Any]) -> None:
        self._mapping = m
        for op in reversed(ops):
            if op.name in ("yield", "condition", "return") or op.name in _SKIPPED_WHEN_RECOMPUTING:
                continue
            if not any(r in self.adj for r in op.results):
                continue
            self.b.location = op.location
            if op.name == "for":
                self._reverse_loop(op, m, tapes[op], op.regions[0], 1, op.operands[3:])
            elif op.name == "while":
                self._reverse_loop(op, m, tapes[op], op.regions[1], 0, op.operands)
            elif op.name == "if":
                self._reverse_if(op, m)
            elif op.name == "parallel_for":
                self._reverse_parallel_for(op, m, tapes.get(op))
            elif op.name == "array_load":
                self._accumulate_array(op, m)
            else:
                self._reverse_op(op, m)
            self._mapping = m

    def _reverse_op(self, op: Operation, m: dict[Value, Value]) -> None:
        if len(op.results) != 1:
            raise located_error(f"'{op.name}' cannot be differentiated", op.location)
        rule = lookup(op.name).adjoint
        if rule is None:
            raise located_error(
                f"'{op.name}' has no derivative rule; its result cannot be differentiated",
                op.location)
        g = self.adj[op.result]
        operands = [m.get(v, v) for v in op.operands]
        for v, contribution in zip(op.operands, rule(self, op, operands, g)):
            if contribution is not None:
                self.accumulate(v, contribution)

    def _accumulate_array(self, op: Operation, m: dict[Value, Value]) -> None:
        array = op.operands[0]
        adjoint_array = self.adjoint_arrays.get(array)
        if adjoint_array is None:
            return
        indices = [m.get(v, v) for v in op.operands[1:]]
        self.b.create("atomic_rmw", [adjoint_array, *indices, self.adj[op.result]],
                      {"kind": "add", "implicit": True})

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
        new = self.b.create("if", [m.get(op.operands[0], op.operands[0])],
                            {"types": [free[k].type for k in kept]},
                            [b for b, _ in branches], [free[k].type for k in kept])
        for k, r in zip(kept, new.results):
            self.adj[free[k]] = r

    # --- serial loops -------------------------------------------------------------------

    def _reverse_loop(self, op: Operation, m: dict[Value, Value], tape: LoopTape, body: Block,
                      first_carried: int, inits: Sequence[Value]) -> None:
        """Iterations in reverse order: restore the carried values, recompute, adjoint."""
        carried = body.args[first_carried:]
        active = [k for k, a in enumerate(carried) if a in self.varied]
        free = [v for v in free_values(op.regions) if v in self.varied]
        seeds = [self.adjoint_or_zero(op.results[k]) for k in active]
        free_init = [self.adjoint_or_zero(f) for f in free]
        zero = self.b.constant(0, _INDEX)
        one = self.b.constant(1, _INDEX)
        new_body = Block([Value(_INDEX, "r")]
                         + [Value(carried[k].type, f"d_{carried[k].name_hint}") for k in active]
                         + [Value(f.type, f"d_{f.name_hint}") for f in free])
        with self.b.at(new_body), self.scope():
            reversed_index = new_body.args[0]
            k_iter = self.op("sub", self.op("sub", tape.trip, one), reversed_index)
            inner = dict(m)
            if first_carried:  # a for loop: its induction variable
                assert tape.start is not None and tape.step is not None
                inner[body.args[0]] = self.op("add", tape.start, self.op("mul", k_iter, tape.step))
            for k, a in enumerate(carried):
                if a in tape.storage:
                    inner[a] = self.b.create("array_load", [tape.storage[a], k_iter]).result
                else:  # never read by the reverse sweep: any value of its type will do
                    inner[a] = m.get(inits[k], inits[k])
            for f, arg in zip(free, new_body.args[1 + len(active):]):
                self.adj[f] = arg
            tapes = self.forward(body.ops, inner, recompute=True)
            yielded = body.ops[-1].operands
            for slot, k in enumerate(active):
                self.accumulate(yielded[k], new_body.args[1 + slot])
            self.reverse(body.ops, inner, tapes)
            self._mapping = m
            outs = [self.adjoint_or_zero(carried[k]) for k in active]
            outs += [self.adj[f] for f in free]
            self.b.create("yield", outs)
        new = self.b.create("for", [zero, tape.trip, one, *seeds, *free_init], {}, [new_body])
        for slot, k in enumerate(active):
            self.accumulate(inits[k], new.results[slot])
        for f, r in zip(free, new.results[len(active):]):
            self.adj[f] = r

    # --- parallel loops -----------------------------------------------------------------

    def _reverse_parallel_for(self, op: Operation, m: dict[Value, Value],
                              tape: ReductionTape | None) -> None:
        ndim = op.attrs["ndim"]
        kinds = op.attrs["reductions"]
        body = op.regions[0]
        free = [v for v in free_values(op.regions) if v in self.varied]
        extents = [m.get(v, v) for v in op.operands[:ndim]]
        winners = tape.winners if tape is not None else {}
        seeds = {k: self.adj[r] for k, r in enumerate(op.results) if r in self.adj}
        new_body = Block([Value(_INDEX, a.name_hint) for a in body.args[:ndim]]
                         + [Value(f.type, f"d_{f.name_hint}") for f in free])
        with self.b.at(new_body), self.scope():
            inner = dict(m)
            inner.update(zip(body.args[:ndim], new_body.args[:ndim]))
            for k, arg in enumerate(body.args[ndim:]):
                inner[arg] = self.reduction_identity(kinds[k], arg.type)
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
            self.b.create("yield", [self.adj[f] for f in free])
        new = self.b.create(
            "parallel_for", [*extents, *[self.adjoint_or_zero(f) for f in free]],
            {"ndim": ndim, "reductions": tuple("add" for _ in free)}, [new_body],
            [f.type for f in free])
        for f, r in zip(free, new.results):
            self.adj[f] = r
        for k, g in seeds.items():
            init = op.operands[ndim + k]
            if k in winners:
                g = self.op("select", winners[k][1], g, self.zero(g.type))
            self.accumulate(init, g)


def check_differentiable(body: Block, varied: set[Value], varied_arrays: set[Value]) -> None:
    """Constructs whose gradient would not be exact are located errors."""
    bases: dict[Value, Value] = {}
    for op in body.walk():
        if op.name in ("array_view", "array_transpose", "cast") and isinstance(
                op.results[0].type, T.ArrayType):
            bases[op.results[0]] = bases.get(op.operands[0], op.operands[0])
    loaded = {bases.get(op.operands[0], op.operands[0])
              for op in body.walk() if op.name == "array_load"}
    for op in body.walk():
        if op.name in ("tensor_map", "tensor_reduce", "tensor_assign", "tensor_matmul"):
            raise located_error(
                "whole-array expressions cannot be differentiated yet; write the loop", op.location)
        if op.name in ("array_store", "atomic_rmw"):
            array, value = bases.get(op.operands[0], op.operands[0]), op.operands[-1]
            if op.name == "atomic_rmw" and any(
                    op.result in o.operands for o in body.walk()) and value in varied:
                raise located_error(
                    "the old value an atomic update returns cannot be differentiated",
                    op.location)
            if array in loaded:
                raise located_error(
                    "an array read in the kernel is also written here: gradients through "
                    "in-place updates are not supported yet", op.location)
        if op.name == "call":
            raise located_error("calls that were not inlined cannot be differentiated",
                                op.location)
        if op.name == "parallel_for":
            for kind, r in zip(op.attrs["reductions"], op.results):
                if r in varied and kind not in ("add", "min", "max"):
                    raise located_error(
                        f"a '{kind}' reduction cannot be differentiated yet", op.location)
        if not op.regions and op.name not in ("array_load", "array_store", "atomic_rmw",
                                              "yield", "condition", "return"):
            if any(r in varied for r in op.results) and lookup(op.name).adjoint is None:
                raise located_error(
                    f"'{op.name}' has no derivative rule; its result cannot be differentiated",
                    op.location)
        for r in op.results:
            if r in varied and not is_float(r.type):
                raise located_error("this value cannot be differentiated", op.location)

"""The reversal of parallel loops: the adjoint loop is parallel too; adjoints of
shared values are its reductions, those of array elements atomic updates (made plain
where no two iterations collide, or per-thread copies, by later passes and code
generation), and a min/max reduction's adjoint goes to the winning iteration alone."""

from __future__ import annotations

from typing import Any

from kdsl.ir.analysis import free_values
from kdsl.ir.autodiff.emitter import _INDEX, ReductionTape
from kdsl.ir.autodiff.reverse_arrays import ArrayAdjoints
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.structured import ParallelForOp


class ParallelReversal(ArrayAdjoints):
    """The adjoints of ``parallel_for`` loops."""

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

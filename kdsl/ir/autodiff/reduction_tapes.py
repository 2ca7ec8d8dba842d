"""The forward sweep of parallel loops with min/max reductions that vary: which
iteration won each reduction (the reverse sweep routes the adjoint to it alone)."""

from __future__ import annotations

from dataclasses import field

from kdsl.ir.autodiff.emitter_base import _INDEX, EmitterBase, located_error
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.structured import ParallelForOp
from kdsl.records import dataclass


@dataclass
class ReductionTape:
    """The winning iteration (linear index) of each min/max reduction of a parallel
    loop, and whether the initial value won instead."""

    winners: dict[int, tuple[Value, Value]]
    snapshots: dict[Value, Value] = field(default_factory=dict)  # state array -> its copy
    # a branch's copy in the forward sweep, and the values of its branches by the original
    # ones: the reversed branch reads them instead of computing them again (reverse.py)
    forward: Operation | None = None
    values: dict[Value, Value] = field(default_factory=dict)


class ReductionTapes(EmitterBase):
    """The search for the winners of a parallel loop's min/max reductions."""

    def _candidate_storage(self, op: Operation, m: dict[Value, Value]) -> dict[int, Value]:
        """For each min/max reduction of ``op`` that varies, an array for the candidate of
        each iteration."""
        kinds = op.attrs["reductions"]
        picked = [k for k, kind in enumerate(kinds)
                  if kind in ("min", "max") and op.results[k] in self.varied]
        for k, kind in enumerate(kinds):
            if kind not in ("add", "min", "max") and op.results[k] in self.varied:
                from kdsl.ir.autodiff.checks import reduction_location  # (imports this module)

                raise located_error(
                    f"a '{kind}' reduction cannot be differentiated yet; accumulate a sum "
                    "of logarithms instead", reduction_location(op, k))
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

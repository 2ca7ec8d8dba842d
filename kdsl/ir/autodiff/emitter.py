"""Emission of a gradient: the forward sweep, then the reverse sweep, region by region.

Each structured region is reversed where it stands: a serial loop becomes a loop running
its iterations backwards, which restores the loop-carried values of the iteration from
per-iteration storage filled by the forward sweep, recomputes the body from them, and
runs the body's adjoint; a branch becomes a branch on the same condition; a parallel loop
becomes a parallel loop whose adjoints of shared values are reductions and whose adjoints
of array elements are atomic updates (demoted later where no two iterations collide).
Only values that vary with the differentiated arguments get adjoints, and only
loop-carried values the reverse sweep reads are stored.

This file holds the forward sweep's dispatch; the rest is split by concern: the state and
helpers both sweeps share (emitter_base.py), what serial loops keep for their reversal
(loop_tapes.py) and the winners of min/max reductions (reduction_tapes.py); the reverse
sweep of straight-line ops and branches (reverse.py), of array reads (reverse_arrays.py),
serial loops (reverse_loops.py) and parallel loops (reverse_parallel.py); and what
cannot be differentiated exactly (checks.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kdsl.ir.autodiff.emitter_base import (  # noqa: F401  (names other modules import)
    _INDEX,
    _SKIPPED_WHEN_RECOMPUTING,
    EmitterBase,
    located_error,
)
from kdsl.ir.autodiff.loop_tapes import CHECKPOINT_AFTER, LoopTape, LoopTapes  # noqa: F401  (tests, reverse_loops)
from kdsl.ir.autodiff.memory import written_state, zeros_like_array
from kdsl.ir.autodiff.reduction_tapes import ReductionTape, ReductionTapes
from kdsl.ir.autodiff.tensor_activity import TENSOR_OPS
from kdsl.ir.autodiff.tensor_rules import prepare_tensor_storage
from kdsl.ir.core import Operation, Value


class AdjointEmitter(LoopTapes, ReductionTapes):
    """Builds the forward and reverse sweeps of a function into the current block (the
    reverse sweep's part is ReverseSweep, in reverse.py)."""

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
                if op.name == "if" and new is not None:
                    tapes[op].forward = new
                    tapes[op].values = {r: m[r] for region in op.regions
                                        for inner in region.ops for r in inner.results if r in m}
            else:
                if (op.name in ("array_store", "atomic_rmw") and op.operands[0] in self.stateful
                        and self.parallel_depth == 0):
                    indices = [m.get(v, v) for v in op.operands[1:-1]]
                    array = m.get(op.operands[0], op.operands[0])
                    self.old_values[op] = self.b.create("array_load", [array, *indices]).result
                self.clone(op, m, recompute)
                if op.name == "array_new" and op.result in self.varied_arrays:
                    self.adjoint_arrays[op.result] = zeros_like_array(self, m[op.result])
                elif op.name in ("array_view", "array_transpose", "cast") and (
                        op.operands[0] in self.adjoint_arrays):  # the same view of the adjoint
                    # (a cast of an array only forgets what its type knew: t = a, then t
                    # bound to a new array, makes a an array of t's type)
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

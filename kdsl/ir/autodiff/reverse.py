"""The reverse sweep: adjoints of straight-line ops from the registry's rules and of
branches, dispatching loops to reverse_loops.py and parallel loops to reverse_parallel.py
(see emitter.py for the forward sweep, checks.py for what cannot be differentiated)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kdsl import types as T
from kdsl.ir.analysis import free_values
from kdsl.ir.autodiff.activity import is_float
from kdsl.ir.autodiff.checks import check_differentiable  # noqa: F401  (imported from here)
from kdsl.ir.autodiff.emitter import _SKIPPED_WHEN_RECOMPUTING, ReductionTape, located_error
from kdsl.ir.autodiff.reverse_loops import LoopReversal
from kdsl.ir.autodiff.reverse_parallel import ParallelReversal
from kdsl.ir.autodiff.tensor_activity import REVERSED_HERE
from kdsl.ir.autodiff.tensor_rules import TensorAdjoints, flush_tensor_adjoints
from kdsl.ir.core import Block, Operation, Value, replace_all_uses
from kdsl.ir.ops import lookup
from kdsl.ir.structured import ForOp, IfOp, WhileOp

# ops a reversed branch copies rather than reading their values from the forward sweep
_COPIED_NOT_READ = frozenset({"constant", "splat", "extract", "make_vector", "insert",
                              "array_dim"})


class ReverseSweep(LoopReversal, ParallelReversal):
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
                self._reverse_if(op, m, tapes[op])
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

    def _reverse_if(self, op: Operation, m: dict[Value, Value], tape: ReductionTape) -> None:
        """The branch on the same condition, each side the adjoint of the original's side.
        A side of straight-line ops reads the values the forward sweep's copy of the
        branch computed (as extra results of that copy) instead of computing them again:
        the adjoint then starts with every value at hand, not with the longest chain of
        the recomputation (square roots, divisions), and the code is shorter."""
        free = [v for v in free_values(op.regions) if v in self.varied]
        seeds = [self.adj.get(r) for r in op.results]
        forward = tape.forward if self._values_reusable(op, tape) else None
        branches: list[tuple[Block, list[Value | None]]] = []
        for side, region in enumerate(op.regions):
            block = Block()
            with self.b.at(block), self.scope():
                inner = dict(m)
                if forward is not None:
                    stand_ins = self._stand_ins(region, inner)
                    tapes: dict[Operation, Any] = {}
                else:
                    tapes = self.forward(region.ops, inner, recompute=True)
                for v, g in zip(region.ops[-1].operands, seeds):
                    if g is not None:
                        self.accumulate(v, g)
                self.reverse(region.ops, inner, tapes)
                self._mapping = m
                branches.append((block, [self.adj.get(f) for f in free]))
            if forward is not None:
                self._read_forward_values(forward, side, block, stand_ins, tape.values)
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

    def _values_reusable(self, op: Operation, tape: ReductionTape) -> bool:
        """Whether the reversed ``op`` can read its values from the forward sweep's copy:
        sides of straight-line ops (no regions, no effects) whose values are scalars and
        vectors, which a branch can yield."""
        if tape.forward is None:
            return False
        for region in op.regions:
            for inner in region.ops[:-1]:
                if inner.regions or inner.name in _SKIPPED_WHEN_RECOMPUTING:
                    return False
                if inner not in self.deferred and any(  # deferred: computed after the sweep
                        not isinstance(r.type, (T.ScalarType, T.VectorType))
                        or r not in tape.values for r in inner.results):
                    return False
        return True

    def _stand_ins(self, region: Block, inner: dict[Value, Value]) -> dict[Value, Value]:
        """Maps (in ``inner``) the values of a branch's side to stand-ins for the forward
        copy's values, returned by the original ones; ops that only move components or
        give constants are copied instead, so that later passes see through them (the
        component of a splat, a constant operand)."""
        stand_ins: dict[Value, Value] = {}
        for o in region.ops[:-1]:
            if o in self.deferred:  # as the forward sweep leaves them
                for r in o.results:
                    inner.pop(r, None)
            elif o.name in _COPIED_NOT_READ:
                self.clone(o, inner, True)
            else:
                for r in o.results:
                    stand_ins[r] = inner[r] = Value(r.type, r.name_hint)
        return stand_ins

    def _read_forward_values(self, forward: Operation, side: int, block: Block,
                             stand_ins: dict[Value, Value], values: dict[Value, Value]) -> None:
        """Makes the forward copy ``forward`` of a branch yield, from side ``side``, each
        value whose stand-in the reversed side ``block`` reads (the other side yields a
        zero, never read: the reversed branch takes the same side), and the reversed side
        read that result instead."""
        used = {v for inner in block.walk() for v in inner.operands}
        for original, stand_in in stand_ins.items():
            if stand_in not in used:
                continue
            for k, region in enumerate(forward.regions):
                terminator = region.ops.pop()
                with self.b.at(region):
                    out = values[original] if k == side else self.zero(original.type)
                region.ops.append(terminator)
                terminator.operands = [*terminator.operands, out]
            result = Value(original.type, original.name_hint)
            forward.attrs["types"] = [*forward.attrs.get("types", []), original.type]
            forward.results.append(result)
            replace_all_uses(block, stand_in, result)

"""Values the gradient computes on its way back rather than in a forward pass of their own.

An op is *deferred* when nothing but the kernel's value (or what its block yields) depends
on its result and the reverse sweep never reads that result: the forward sweep skips it,
and the block's outputs are computed after the block's reverse sweep. Two kinds of loop
give their results on the way back, so that they run only once:

- a parallel loop whose reductions that vary are sums: its adjoint loop recomputes every
  iteration anyway, and sums the iterations' partial values as the loop did;
- a serial loop whose carried values that vary are only summed (``e += f(j)``, each
  carried value used once, by the ``+=`` that gives its next value): the adjoint of such
  a value is the same in every iteration, so the adjoint loop may run its iterations in
  their own order, carrying the loop's values as the loop did.

Deferred loops have no effects (stores, output, errors) and read no array the kernel
updates in place; other deferred ops are pure ops that do not vary, and ``+``, ``-`` of
values that do (whose adjoints read no operand).
"""

from __future__ import annotations

from collections import Counter

from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.structured import ForOp

_EFFECTS = frozenset({
    "array_store", "atomic_rmw", "print", "assert", "raise_index_error", "raise_shape_error",
    "raise_value_error", "array_free", "array_new", "call", "stop_gradient", "while",
})
_TERMINATORS = ("yield", "condition", "return")
LINEAR_SAME_TYPE = ("add", "sub", "neg")
"""Ops whose adjoint is their result's (or its negation) for each operand of its type."""


def is_linear_same_type(op: Operation) -> bool:
    return op.name in LINEAR_SAME_TYPE and all(v.type == op.results[0].type for v in op.operands)


class Deferral:
    """Which ops of a function are deferred (see the module's docstring)."""

    def __init__(self, body: Block, varied: set[Value], needed: set[Value],
                 stateful: set[Value], bases: dict[Value, Value]) -> None:
        self.varied = varied
        self.needed = needed
        self.stateful = stateful
        self.bases = bases
        self.ops: set[Operation] = set()
        self._visit(body)

    def __contains__(self, op: object) -> bool:
        return op in self.ops

    def _visit(self, block: Block) -> None:
        self.ops |= self._deferred_in(block)
        for op in block.ops:
            if op.name == "while":  # only its body is swept op by op
                self._visit(op.regions[1])
            else:
                for region in op.regions:
                    self._visit(region)

    def _deferred_in(self, block: Block) -> set[Operation]:
        candidates = {op for op in block.ops if self._candidate(op)}
        changed = True
        while changed:
            changed = False
            defined_by = {r: op for op in candidates for r in op.results}
            for op in block.ops:
                # a deferred loop runs on the way back, before the other deferred ops
                if op in candidates and not op.regions or op.name in _TERMINATORS:
                    continue
                for inner in op.walk():
                    for v in inner.operands:
                        user = defined_by.get(v)
                        if user is not None and user in candidates:
                            candidates.discard(user)
                            changed = True
        return candidates

    def _candidate(self, op: Operation) -> bool:
        if not op.results or op.name in _TERMINATORS:
            return False
        if any(r in self.needed for r in op.results):
            return False
        if op.name == "parallel_for":
            return self._pure(op) and all(
                kind == "add" for kind, r in zip(op.attrs["reductions"], op.results)
                if r in self.varied)
        if op.name == "for":
            return self._pure(op) and sums_only(op, self.varied)
        if op.regions or not self._pure(op):
            return False
        if any(r in self.varied for r in op.results):
            return is_linear_same_type(op)
        return True

    def _pure(self, op: Operation) -> bool:
        for inner in op.walk():
            if inner.name in _EFFECTS:
                return False
            if inner.name == "array_load":
                array = inner.operands[0]
                if self.bases.get(array, array) in self.stateful:
                    return False
        return True


def sums_only(op: Operation, varied: set[Value]) -> bool:
    """Whether each carried value of the for loop ``op`` that varies is only summed: used
    once, by the ``+``/``-`` (as its left operand) that gives the value the body yields for
    it, or yielded unchanged."""
    loop = ForOp(op)
    body = loop.body
    yielded = body.ops[-1].operands
    uses: Counter[Value] = Counter(v for inner in body.walk() for v in inner.operands)
    defined_by = {r: inner for inner in body.ops for r in inner.results}
    for k, a in enumerate(loop.carried):
        if a not in varied:
            continue
        y = yielded[k]
        if uses[a] != 1:
            return False
        if y is a:
            continue
        update = defined_by.get(y)
        if update is None or uses[y] != 1 or not is_linear_same_type(update):
            return False
        if not (update.name in ("add", "sub") and update.operands[0] is a
                or update.name == "add" and update.operands[1] is a):
            return False
    return True


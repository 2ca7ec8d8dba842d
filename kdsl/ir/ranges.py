"""A small range analysis: which integer values are provably non-negative.

Sources of non-negative values: constants >= 0, array sizes, values of unsigned and bool
types, parallel loop variables (they count from 0), the variable of a serial loop whose
start is non-negative (its step is positive). It propagates through the arithmetic that
keeps signs (``+``, ``*``, ``//``, ``%`` by a non-negative divisor, ``min``, ``max``,
``&``, ``|``, ``>>``, widening casts, selects and branches) and through loop-carried
values: a carried value is non-negative when its initial value and every value yielded
for it are, found by an optimistic fixed point (assume all, drop those that fail).

Integer overflow is ignored: a sum of non-negative values that wraps around is far out of
any array's bounds either way.
"""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.structured import ForOp, ParallelForOp, WhileOp

_BOTH = frozenset({"add", "mul", "floordiv", "min", "bit_or", "bit_xor"})
_EITHER = frozenset({"max", "bit_and"})


def _integral(v: Value) -> bool:
    t = v.type
    return isinstance(t, T.ScalarType) and not t.is_float


def _always_non_negative(t: object) -> bool:
    return isinstance(t, T.ScalarType) and (t.is_bool or (t.is_integer and not t.is_signed))


class NonNegative:
    """The non-negative integer values of a function body (``v in facts``)."""

    def __init__(self, body: Block) -> None:
        self.assumed = {arg for op in body.walk() for arg in _carried_args(op) if _integral(arg)}
        while True:
            self.known: set[Value] = set()
            self._block(body)
            failed = {arg for op in body.walk() for arg, sources in _carried_sources(op)
                      if arg in self.assumed and not all(s in self.known for s in sources)}
            if not failed:
                return
            self.assumed -= failed

    def __contains__(self, v: Value) -> bool:
        return v in self.known or _always_non_negative(v.type)

    # --- the forward walk ----------------------------------------------------------------

    def _block(self, block: Block) -> None:
        for op in block.ops:
            self._region_args(op)
            for region in op.regions:
                self._block(region)
            for k, r in enumerate(op.results):
                if _integral(r) and self._result(op, k):
                    self.known.add(r)

    def _region_args(self, op: Operation) -> None:
        if op.name == "parallel_for":
            self.known.update(ParallelForOp(op).ivs)
        elif op.name == "for" and ForOp(op).start in self:
            self.known.add(ForOp(op).iv)
        self.known.update(a for a in _carried_args(op) if a in self.assumed)

    def _result(self, op: Operation, k: int) -> bool:
        name, operands = op.name, op.operands
        if _always_non_negative(op.results[k].type) or name == "array_dim":
            return True
        if name == "constant":
            return bool(op.attrs["value"] >= 0)
        if name == "for":
            body = op.regions[0]
            return operands[3 + k] in self and body.ops[-1].operands[k] in self
        if name == "while":  # the results are the carried values the condition saw
            return op.regions[0].args[k] in self
        if name == "if":
            return all(region.ops[-1].operands[k] in self for region in op.regions)
        if name == "select":
            return operands[1] in self and operands[2] in self
        if name in _BOTH:
            return all(v in self for v in operands)
        if name in _EITHER:
            return any(v in self for v in operands)
        if name == "mod":  # Python's %: the sign of the divisor
            return operands[1] in self
        if name == "shr":
            return operands[0] in self
        if name == "cast":
            return self._cast(op)
        return False

    def _cast(self, op: Operation) -> bool:
        source, target = op.operands[0].type, op.result.type
        if not (isinstance(source, T.ScalarType) and isinstance(target, T.ScalarType)):
            return False
        if source.is_float or not target.is_signed:
            return False
        if _always_non_negative(source):
            return target.bits > source.bits
        return op.operands[0] in self and target.bits >= source.bits


def _carried_args(op: Operation) -> list[Value]:
    """Block arguments of a serial loop that carry values between iterations."""
    return [arg for arg, _ in _carried_sources(op)]


def _carried_sources(op: Operation) -> list[tuple[Value, list[Value]]]:
    """Each carried block argument with every value that can flow into it. The body of a
    ``while`` takes the values its condition region was given."""
    if op.name == "for":
        loop = ForOp(op)
        yielded = loop.body.ops[-1].operands
        return [(arg, [init, y]) for arg, init, y in zip(loop.carried, loop.inits, yielded)]
    if op.name == "while":
        cycle = WhileOp(op)
        yielded = cycle.body.ops[-1].operands
        pairs = [(arg, [init, y]) for arg, init, y in zip(cycle.before.args, cycle.inits, yielded)]
        return pairs + [(arg, [v]) for arg, v in zip(cycle.body.args, cycle.before.args)]
    return []

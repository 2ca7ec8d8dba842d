"""A small range analysis: a constant lower bound of integer values, enough to prove
indices non-negative.

Sources: constants, array sizes (>= 0), values of unsigned and bool types (>= 0),
parallel loop variables (they count from 0), the variable of a serial loop (its start's
bound; its step is positive). Bounds propagate through ``+``, ``-`` of a constant, ``*``
and ``//`` of non-negative values, ``%`` by a non-negative divisor, ``min``, ``max``,
``&``, ``|``, ``>>``, widening casts, selects and branches, so ``a[i - 1]`` in
``for i in range(1, n)`` is proved, and through loop-carried values: a carried value is
non-negative when its initial value and every value yielded for it are, found by an
optimistic fixed point (assume all, drop those that fail).

Integer overflow is ignored: a sum of non-negative values that wraps around is far out of
any array's bounds either way.
"""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.structured import ForOp, ParallelForOp, WhileOp

_NON_NEGATIVE_IF_BOTH = frozenset({"bit_or", "bit_xor"})


def _integral(v: Value) -> bool:
    t = v.type
    return isinstance(t, T.ScalarType) and not t.is_float


def _always_non_negative(t: object) -> bool:
    return isinstance(t, T.ScalarType) and (t.is_bool or (t.is_integer and not t.is_signed))


class NonNegative:
    """Lower bounds of the integer values of a function body; ``v in facts`` when ``v``
    is provably non-negative."""

    def __init__(self, body: Block) -> None:
        self.assumed = {arg for op in body.walk() for arg in _carried_args(op) if _integral(arg)}
        while True:
            self.lower: dict[Value, int] = {}
            self.constants: set[Value] = set()
            self._block(body)
            failed = {arg for op in body.walk() for arg, sources in _carried_sources(op)
                      if arg in self.assumed and not all(s in self for s in sources)}
            if not failed:
                return
            self.assumed -= failed

    def __contains__(self, v: Value) -> bool:
        bound = self.bound(v)
        return bound is not None and bound >= 0

    def bound(self, v: Value) -> int | None:
        """A lower bound of ``v``, if one is known."""
        if v in self.lower:
            return self.lower[v]
        return 0 if _always_non_negative(v.type) else None

    # --- the forward walk ----------------------------------------------------------------

    def _block(self, block: Block) -> None:
        for op in block.ops:
            self._region_args(op)
            for region in op.regions:
                self._block(region)
            for k, r in enumerate(op.results):
                bound = self._result(op, k) if _integral(r) else None
                if bound is not None:
                    self.lower[r] = bound

    def _region_args(self, op: Operation) -> None:
        if op.name == "parallel_for":
            self.lower.update((iv, 0) for iv in ParallelForOp(op).ivs)
        elif op.name == "for" and self.bound(ForOp(op).start) is not None:
            self.lower[ForOp(op).iv] = self.bound(ForOp(op).start)  # type: ignore[assignment]
        self.lower.update((a, 0) for a in _carried_args(op) if a in self.assumed)

    def _result(self, op: Operation, k: int) -> int | None:
        name = op.name
        if _always_non_negative(op.results[k].type) or name == "array_dim":
            return 0
        if name == "constant":
            self.constants.add(op.result)
            return int(op.attrs["value"])
        if name == "for":
            return _smallest(self.bound(op.operands[3 + k]),
                             self.bound(op.regions[0].ops[-1].operands[k]))
        if name == "while":  # the results are the carried values the condition saw
            return self.bound(op.regions[0].args[k])
        if name == "if":
            return _smallest(*(self.bound(region.ops[-1].operands[k]) for region in op.regions))
        if name == "select":
            return _smallest(self.bound(op.operands[1]), self.bound(op.operands[2]))
        if name == "cast":
            return self._cast(op)
        return self._arithmetic(name, [self.bound(v) for v in op.operands], op)

    def _arithmetic(self, name: str, bounds: list[int | None], op: Operation) -> int | None:
        a, b = (bounds + [None, None])[:2]
        if name == "add":
            return None if a is None or b is None else a + b
        if name == "sub":  # only minus a constant: other right operands have no upper bound
            right = op.operands[1]
            return None if a is None or right not in self.constants else a - self.lower[right]
        if name in ("mul", "floordiv"):
            if a is None or b is None or a < 0 or b < 0:
                return None
            return a * b if name == "mul" else 0
        if name == "min":
            return _smallest(a, b)
        if name == "max":
            known = [x for x in (a, b) if x is not None]
            return max(known) if known else None
        if name == "mod":  # Python's %: the sign of the divisor
            return 0 if b is not None and b >= 0 else None
        if name == "bit_and":
            return 0 if (a is not None and a >= 0) or (b is not None and b >= 0) else None
        if name in _NON_NEGATIVE_IF_BOTH:
            return 0 if a is not None and b is not None and min(a, b) >= 0 else None
        if name == "shr":
            return 0 if a is not None and a >= 0 else None
        return None

    def _cast(self, op: Operation) -> int | None:
        source, target = op.operands[0].type, op.result.type
        if not (isinstance(source, T.ScalarType) and isinstance(target, T.ScalarType)):
            return None
        if source.is_float or not target.is_signed:
            return None
        if _always_non_negative(source):
            return 0 if target.bits > source.bits else None
        return self.bound(op.operands[0]) if target.bits >= source.bits else None


def _smallest(*bounds: int | None) -> int | None:
    return None if any(b is None for b in bounds) else min(bounds)  # type: ignore[type-var]


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

"""Named views of the structured control-flow ops, so that no pass reads them by operand
position.

- ``for (start, stop, step, *inits) body(iv, *carried) -> yield carried``, step > 0
- ``parallel_for (*extents, *inits) body(*ivs, *partials) -> yield partials``; attrs ndim,
  reductions (one per partial)
- ``while (*inits) before(*carried) -> condition %cond, *carried; body(*carried) -> yield``
- ``if %cond then() -> yield; else() -> yield``

A view wraps an op without copying it: ``ForOp(op).iv`` is the op's loop variable now.
"""

from __future__ import annotations

from kdsl.ir.core import Block, Operation, Value
from kdsl.records import dataclass

FOR_BOUNDS = 3  # start, stop, step come before the initial values of a for loop


@dataclass(frozen=True)
class ForOp:
    """A serial counted loop."""

    op: Operation

    @property
    def start(self) -> Value:
        return self.op.operands[0]

    @property
    def stop(self) -> Value:
        return self.op.operands[1]

    @property
    def step(self) -> Value:
        return self.op.operands[2]

    @property
    def inits(self) -> list[Value]:
        return self.op.operands[FOR_BOUNDS:]

    @property
    def body(self) -> Block:
        return self.op.regions[0]

    @property
    def iv(self) -> Value:
        return self.body.args[0]

    @property
    def carried(self) -> list[Value]:
        """The body's arguments holding the loop-carried values."""
        return self.body.args[1:]

    @property
    def results(self) -> list[Value]:
        return self.op.results


@dataclass(frozen=True)
class ParallelForOp:
    """A parallel loop nest over ``ndim`` axes, with reductions."""

    op: Operation

    @property
    def ndim(self) -> int:
        return int(self.op.attrs["ndim"])

    @property
    def extents(self) -> list[Value]:
        return self.op.operands[:self.ndim]

    @property
    def inits(self) -> list[Value]:
        return self.op.operands[self.ndim:]

    @property
    def body(self) -> Block:
        return self.op.regions[0]

    @property
    def ivs(self) -> list[Value]:
        return self.body.args[:self.ndim]

    @property
    def partials(self) -> list[Value]:
        """The body's arguments holding each reduction's partial value."""
        return self.body.args[self.ndim:]

    @property
    def results(self) -> list[Value]:
        return self.op.results


@dataclass(frozen=True)
class WhileOp:
    """A loop testing its condition (in ``before``) before each run of ``body``."""

    op: Operation

    @property
    def inits(self) -> list[Value]:
        return self.op.operands

    @property
    def before(self) -> Block:
        return self.op.regions[0]

    @property
    def body(self) -> Block:
        return self.op.regions[1]

    @property
    def results(self) -> list[Value]:
        return self.op.results


@dataclass(frozen=True)
class IfOp:
    """A two-way branch giving values."""

    op: Operation

    @property
    def condition(self) -> Value:
        return self.op.operands[0]

    @property
    def then_block(self) -> Block:
        return self.op.regions[0]

    @property
    def else_block(self) -> Block:
        return self.op.regions[1]

    @property
    def results(self) -> list[Value]:
        return self.op.results


def loop_inits(op: Operation) -> list[Value] | None:
    """The initial values of a loop's carried values (None when ``op`` is no loop)."""
    match op.name:
        case "for":
            return ForOp(op).inits
        case "parallel_for":
            return ParallelForOp(op).inits
        case "while":
            return WhileOp(op).inits
    return None

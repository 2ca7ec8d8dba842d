"""What ``kd.Tape`` records: the calls, the stretches of calls between checkpoints, and the
floats kernels return under the tape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kdsl import types as T

if TYPE_CHECKING:
    from kdsl.runtime.kernel import Kernel
    from kdsl.runtime.tape import Tape
    from kdsl.runtime.tape_plans import RecordPlan
    from kdsl.runtime.tape_repeat import Repeat

NOTHING_KEPT: frozenset[int] = frozenset()


class TapeScalar(float):
    """A float a kernel returned under a tape from active arguments: ``tape.backward``
    takes it as the loss, and later calls under the tape that take it pass gradients
    back to the call that returned it."""

    tape: Tape
    call: int

    def __new__(cls, value: float, tape: Tape, call: int) -> TapeScalar:
        made = super().__new__(cls, value)
        made.tape = tape
        made.call = call
        return made


class Call:
    """One recorded kernel call."""

    __slots__ = ("kernel", "plan", "args", "plain", "argnums", "written", "snapshots", "keep",
                 "gradient", "returned", "returned_types", "repeat")

    def __init__(self, kernel: Kernel, plan: RecordPlan, args: tuple, plain: tuple,
                 argnums: tuple[int, ...], written: tuple[int, ...]) -> None:
        self.kernel = kernel
        self.plan = plan
        self.args = args  # as given (TapeScalars included): their ids name the arrays
        self.plain = plain  # as passed (NumPy arrays for kdsl CPU arrays, floats)
        self.argnums = argnums  # the arguments differentiated; () for a call with no gradient
        self.written = written  # the ids of the arrays it writes
        self.snapshots: dict[int, Any] = {}  # id(array) -> a copy before the call
        # the arrays (by id) whose copy from before the call the way back reads again
        # after the call's own product (the product overwrites the copy it is given)
        self.keep: frozenset[int] | set[int] = NOTHING_KEPT
        # a call that writes no array and returns a float: its gradient, taken when
        # recorded (by the gradient kernel, which also gives the value), scaled on the
        # way back
        self.gradient: tuple | None = None
        # the arrays the call returned (one, or a tuple's), through whose floating-point
        # ones gradients flow back, and their types
        self.returned: tuple | None = None
        self.returned_types: tuple[T.ArrayType, ...] | None = None
        # what recorded it, where the call before was alike (tape_repeat.py)
        self.repeat: Repeat | None = None


class Segment:
    """Calls from ``start`` on (``checkpoint_every`` of them): the arrays they write, as
    they were before the first of them wrote each (by id)."""

    __slots__ = ("start", "checkpoint")

    def __init__(self, start: int) -> None:
        self.start = start
        self.checkpoint: dict[int, Any] = {}

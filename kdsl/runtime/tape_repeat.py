"""A call ``kd.Tape`` records again as it recorded the one before: a Python time loop
calls ``step(x, v, ...)`` with the same arrays hundreds of times in a row.

After two such calls in a row the tape's bookkeeping is where it will stay for every
further one (the arrays active, those read since written, the copies a call keeps: each
call of the same arrays takes it to the same place), so what the second call decided
(the arguments differentiated, which arrays to copy and which scratch array to pass
instead) holds for the next ones: a ``Repeat`` keeps it, and records those calls with a
check of the arguments' identity instead of the decisions. It also runs the calls'
vector-Jacobian products on the way back with what it found for the first of them.

Only for CPU calls through the compiled call path, of kernels that return nothing,
with NumPy or kdsl arrays and plain scalars (no ``TapeScalar``), on tapes without
checkpoints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kdsl.runtime.arrays import DeviceArray
from kdsl.runtime.fast_call import SLOW
from kdsl.runtime.tape_memory import COPIES, zeros_like
from kdsl.runtime.tape_records import Call

if TYPE_CHECKING:
    from kdsl.runtime.fast_call import FastCall
    from kdsl.runtime.kernel import Kernel
    from kdsl.runtime.tape_plans import RecordPlan, ReversePlan

_PLAIN_SCALARS = frozenset({float, int, bool})


def same_arguments(a: Call, b: Call) -> bool:
    """Whether two recorded calls are of one kernel and plan with the same arrays (the
    same objects, holding the same NumPy arrays) and plain scalars."""
    if a.kernel is not b.kernel or a.plan is not b.plan or len(a.args) != len(b.args):
        return False
    arrays = a.plan.arrays
    for k, (x, y) in enumerate(zip(a.args, b.args)):
        if k in arrays:
            if x is not y or a.plain[k] is not b.plain[k]:
                return False
        elif type(x) not in _PLAIN_SCALARS or type(y) not in _PLAIN_SCALARS:
            return False
    return True


class Repeat:
    """What recording a call like ``call`` (the second of two alike in a row) decided,
    for the calls alike that follow it."""

    __slots__ = ("kernel", "plan", "fast", "args", "plain", "arrays", "scalars", "device_arrays",
                 "watched", "copies", "copied_bytes", "argnums", "written", "keep",
                 "reverse")

    def __init__(self, call: Call, scratch: dict[int, Any], copied_bytes: int) -> None:
        plan = call.plan
        assert plan.fast is not None
        self.kernel: Kernel = call.kernel
        self.plan: RecordPlan = plan
        self.fast: FastCall = plan.fast
        self.args, self.plain = call.args, call.plain
        self.arrays = plan.arrays
        self.scalars = tuple(k for k in range(len(call.args)) if k not in plan.arrays)
        self.device_arrays = tuple(k for k in plan.arrays if type(call.args[k]) is DeviceArray)
        # floating-point kdsl arrays not differentiated: one given requires_grad=True
        # since is no longer a constant
        self.watched = tuple(k for k in plan.float_arrays
                             if k not in call.argnums and type(call.args[k]) is DeviceArray)
        positions = {id(call.args[k]): k for k in plan.written}
        # (id, position, None to copy it or the scratch array passed in its place, the
        # pool's free arrays of its kind or None for a copy from malloc)
        self.copies = tuple((key, positions[key], scratch.get(key),
                             COPIES.free_list(call.plain[positions[key]]))
                            for key in call.snapshots)
        self.copied_bytes = copied_bytes
        self.argnums, self.written, self.keep = call.argnums, call.written, call.keep
        self.reverse: _RepeatedReverse | None = None

    @staticmethod
    def eligible(call: Call, previous: Call | None, result: Any) -> bool:
        plan = call.plan
        return (previous is not None and result is None and plan.fast is not None
                and not plan.hidden and plan.returned_types is None and not plan.scalar_result
                and all(type(call.args[k]) is DeviceArray or call.plain[k] is call.args[k]
                        for k in plan.arrays)
                and same_arguments(call, previous))

    def record(self, calls: list[Call], args: tuple) -> Any:
        """Records and runs a call with ``args`` (the tape's state that of the call before):
        the bytes copied, or SLOW (nothing done) where the call is not like this one's."""
        if len(args) != len(self.args):
            return SLOW
        given = self.args
        for k in self.arrays:
            if args[k] is not given[k]:
                return SLOW
        same = self.plain
        for k in self.device_arrays:
            if args[k]._data is not same[k]:
                return SLOW
        plain = list(same)
        for k in self.scalars:
            a = plain[k] = args[k]
            if type(a) not in _PLAIN_SCALARS:
                return SLOW
        for k in self.watched:
            if args[k].requires_grad:
                return SLOW
        if not self.plan.current():
            return SLOW
        taken = {}
        for key, k, copy, free in self.copies:
            if copy is None and free:  # COPIES.copy_with(free, plain[k]), inline
                try:
                    copy = free.pop()
                    copy[...] = plain[k]
                except IndexError:  # taken by another thread since
                    copy = None
            taken[key] = copy if copy is not None else COPIES.copy_with(free, plain[k])
        plain_args = tuple(plain)
        fast = self.fast
        raw = fast.function(*plain_args)
        if raw is not None:
            if raw is SLOW:
                return SLOW
            fast.finish(raw, plain_args)  # raises the kernel's error
        call = Call(self.kernel, self.plan, args, plain_args, self.argnums, self.written)
        call.snapshots = taken
        call.keep = self.keep
        call.repeat = self
        calls.append(call)
        return self.copied_bytes


class _RepeatedReverse:
    """The way back of the calls a ``Repeat`` recorded: their vector-Jacobian product,
    and where its arguments come from."""

    __slots__ = ("plan", "arrays", "adjoints", "walk")

    def __init__(self, plan: ReversePlan, call: Call) -> None:
        self.plan = plan
        self.arrays = tuple((k, id(call.args[k])) for k in call.plan.arrays)
        self.adjoints = tuple((k, id(call.args[k])) for k in plan.adjoint_positions)
        # the walk in which the product was found current: its compiled call path
        # is taken without checking its dependencies again (no user code runs on the
        # way back)
        self.walk: object = None


def reverse_repeated(call: Call, versions: dict[int, Any], adjoints: dict[int, Any],
                     walk: object) -> int:
    """Runs the vector-Jacobian product of a call a ``Repeat`` recorded (see
    TapeReverse._reverse, of which this is the case of no scalar differentiated, no
    returned array and no seed) in the way back ``walk``; returns the bytes its reverse
    sweep kept."""
    repeat = call.repeat
    assert repeat is not None
    reverse = repeat.reverse
    if reverse is None:
        plan = call.plan.reverse_plan(call.kernel, call.argnums, None,
                                      call.plan.unit_axes(call.plain, call.argnums),
                                      call.plan.writes_shared_memory(call.plain))
        reverse = repeat.reverse = _RepeatedReverse(plan, call)
    args = list(call.plain)
    snapshots, keep = call.snapshots, call.keep
    for k, key in reverse.arrays:
        snapshot = snapshots.get(key)
        if snapshot is None:
            found = versions.get(key)
            if found is not None:
                args[k] = found
        else:
            args[k] = COPIES.copy(snapshot) if key in keep else snapshot
    for k, key in reverse.adjoints:
        adjoint = adjoints.get(key)
        if adjoint is None:
            adjoint = adjoints[key] = zeros_like(args[k])
        args.append(adjoint)
    args.append(0.0)
    product = reverse.plan.product
    fast, unpack = product.fast, product.unpack
    if reverse.walk is walk and fast is not None and unpack is not None:
        raw = fast.function(*args)
        if type(raw) is bytes:
            values = unpack.unpack(raw)
            if values[0]:
                fast.finish(raw, tuple(args))  # raises the kernel's error
            return int(values[-1])
        if raw is not SLOW:  # it ran (a product that makes arrays returns more than bytes)
            result = fast.finish(raw, tuple(args))
            return int(result[-1] if type(result) is tuple else result)
    *_, saved = product(tuple(args))  # checked: SLOW above ran nothing
    fast = product.fast
    if fast is not None and product.unpack is not None and (
            product.own_code_only or fast.deps.unchanged()):
        reverse.walk = walk
    return int(saved)

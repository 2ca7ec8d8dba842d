"""``kd.Tape``: gradients across kernel calls.

Under ``with kd.Tape() as tape:`` every kernel call is recorded with the arrays it was
given; before a call writes arrays, the tape copies them (a snapshot: the arrays as the
call found them). ``tape.backward(loss)`` walks the calls last to first and runs each
one's vector-Jacobian product (kdsl/ir/autodiff/vjp.py) on the arrays as that call saw
them (the snapshots, never the user's arrays, which keep their final values), passing
adjoint arrays from call to call (tape_reverse.py). A call on CPU arrays that writes no
array and returns one float is run by its gradient kernel as it is recorded (without
checkpoints): its product is then that gradient times the seed. An array an active call
returns (new memory, not an argument or a view of one) is active too: the call's product
takes its adjoint as well. What reaches the arrays made with ``requires_grad=True`` is
added into their ``.grad``.

With ``checkpoint_every=k`` the tape copies an array only before its first write in
each stretch of ``k`` calls (a checkpoint); ``backward`` runs each stretch again from its
checkpoint, on copies, taking the per-call copies then.

Which calls need a gradient follows the data: an array is *active* when it requires a
gradient or an active call wrote it; a call is active when one of its floating-point
arguments is active (or is a scalar an active call returned under the tape), and then
every floating-point array it writes becomes active.

A kernel's calls with arguments of one kind share a plan (tape_plans.py): the tape tries
the plan of the kernel's last recorded call first, through the compiled call path, which
checks the arguments in machine code; arguments of another kind find their plan on the
checked path, before any state of the tape changes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from kdsl.errors import CompileError
from kdsl.runtime.arrays import DeviceArray, shared_foreign_array
from kdsl.runtime.fast_call import SLOW
from kdsl.runtime.kernel import Kernel
from kdsl.runtime.tape_memory import (
    COPIES,
    copy_of,
    host_data,
    is_array,
    overlaps,
    share_elements,
)
from kdsl.runtime.tape_plans import RecordPlan, plan_for
from kdsl.runtime.tape_records import Call, Segment, TapeScalar
from kdsl.runtime.tape_repeat import Repeat
from kdsl.runtime.tape_reverse import TapeReverse

__all__ = ["Tape", "TapeScalar"]

_PLAIN_CALL = Kernel.__call__
_RECORDING: list[Tape] = []
_PLAIN_TYPES = frozenset({np.ndarray, float, int, bool})
# the plan of each kernel's last recorded call (tried first for its next call)
_last_plan: weakref.WeakKeyDictionary[Kernel, RecordPlan] = weakref.WeakKeyDictionary()


def _recording_call(kernel: Kernel, *args: Any, **keywords: Any) -> Any:
    """``Kernel.__call__`` while a tape records (installed by ``Tape.__enter__``, so that
    calls outside tapes pay nothing)."""
    tape = _RECORDING[-1] if _RECORDING else None
    if tape is None or tape._busy or type(kernel) is not Kernel:  # kd.grad, kd.jvp: not recorded
        return _PLAIN_CALL(kernel, *args, **keywords)
    repeat = tape._repeat
    if repeat is not None and repeat.kernel is kernel and not keywords:  # see Tape._record
        copied = repeat.record(tape._calls, args)
        if copied is not SLOW:
            tape.memory_bytes += copied
            return None
    if keywords:
        args = kernel.bind_keywords(args, keywords)
    return tape._record(kernel, kernel.with_defaults(args))


def _is_float_array(a: Any) -> bool:
    return is_array(a) and np.dtype(a.dtype).kind == "f"


def _plain_argument(a: Any) -> Any:
    """An argument as kernels take it: a TapeScalar as a float, a kdsl CPU array (or an
    array of another library on the CPU) as its NumPy array."""
    if isinstance(a, TapeScalar):
        return float(a)
    return host_data(shared_foreign_array(a))


def _plain_arguments(args: tuple) -> tuple:
    return tuple([a if type(a) in _PLAIN_TYPES else a._data if type(a) is DeviceArray
                  else _plain_argument(a) for a in args])


class Tape(TapeReverse):
    """Records kernel calls under ``with kd.Tape() as tape:``; ``tape.backward(loss)``
    adds the gradient of ``loss`` into the ``.grad`` of every array made with
    ``requires_grad=True`` that the recorded calls used."""

    def __init__(self, checkpoint_every: int | None = None) -> None:
        if checkpoint_every is not None and (
                not isinstance(checkpoint_every, int) or checkpoint_every < 1):
            raise ValueError("kd.Tape: checkpoint_every must be a positive int (or None), "
                             f"got {checkpoint_every!r}")
        self.checkpoint_every = checkpoint_every
        self._segments: list[Segment] = []
        self._calls: list[Call] = []
        # the active arrays (see the module's doc), by id
        self._active: dict[int, Any] = {}
        self._leaves: dict[int, Any] = {}  # the arrays with requires_grad=True, by id
        # float arrays active calls returned (no gradient flows back through them yet):
        # by id, the array (or a weak reference to it) and the kernel's name
        self._returned: dict[int, tuple[Any, str]] = {}
        self._busy = False
        # arrays (by id) a recorded call read, and whose value its product reads, and
        # none wrote since: a call that writes one must keep a copy of it for those calls
        self._read_since_written: set[int] = set()
        # those an active call read: the next call that writes one keeps its copy from
        # before the call for the way back (Call.keep)
        self._read_by_active: set[int] = set()
        self._scratch: dict[int, Any] = {}  # by array id, see _scratch_for
        # pairs of arrays (by id) known not to share memory, and the arrays themselves
        # (held, so that their ids stay theirs)
        self._apart: dict[tuple[int, int], tuple[Any, Any]] = {}
        # how the last call was recorded, where it was like the one before it (for the
        # next calls alike: tape_repeat.py)
        self._repeat: Repeat | None = None
        # the plans of the calls differentiated, and their kernels
        self._differentiated: dict[RecordPlan, Kernel] = {}
        self.memory_bytes = 0
        """Bytes the tape holds: copies of the arrays the recorded calls overwrote, and the
        gradients of the calls whose gradient was taken as they were recorded."""
        self.saved_bytes = 0
        """The largest storage a call's reverse sweep kept in the last ``backward``."""

    # --- recording ----------------------------------------------------------------------

    def __enter__(self) -> Tape:
        if not _RECORDING:
            Kernel.__call__ = _recording_call  # type: ignore[method-assign,assignment]
        _RECORDING.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _RECORDING.remove(self)
        if not _RECORDING:
            Kernel.__call__ = _PLAIN_CALL  # type: ignore[method-assign]

    def _requires_grad(self, a: Any) -> bool:
        """Whether an array the tape has not seen active requires a gradient (then it is
        active from now on)."""
        if type(a) is DeviceArray and not a.requires_grad or type(a) is np.ndarray:
            return False
        if getattr(a, "requires_grad", False):
            self._active[id(a)] = a
            self._leaves[id(a)] = a
            return True
        return False

    def _record(self, kernel: Kernel, args: tuple) -> Any:
        repeat = self._repeat
        if repeat is not None and repeat.kernel is kernel:
            copied = repeat.record(self._calls, args)
            if copied is not SLOW:
                self.memory_bytes += copied
                return None
        plain = _plain_arguments(args)
        plan = _last_plan.get(kernel)
        if (plan is not None and plan.fast is not None and not plan.scalar_result
                and len(plan.names) == len(args) and plan.current()):
            result = self._record_with(kernel, plan, args, plain, speculative=True)
            if result is not SLOW:
                return result
        self._busy = True
        try:
            plan = plan_for(kernel, plain)
        finally:
            self._busy = False
        _last_plan[kernel] = plan
        return self._record_with(kernel, plan, args, plain, speculative=False)

    def _record_with(self, kernel: Kernel, plan: RecordPlan, args: tuple, plain: tuple,
                     speculative: bool) -> Any:
        """Records and runs a call of ``plan``'s specialisation. ``speculative``: the plan
        is the kernel's last one, and the compiled call path checks that the arguments
        are of its kind: SLOW, with the tape as it was, where they are not."""
        floats = plan.floats
        if self._returned:
            for k in floats:
                self._refuse_returned(args[k], f"argument '{plan.names[k]}' of {kernel.__name__}")
        known = self._active
        active = [k for k in plan.float_arrays
                  if id(args[k]) in known or self._requires_grad(args[k])]
        if known and len(active) < len(plan.float_arrays):
            self._refuse_views_of_active(kernel, plan, args, plain)
        for k in plan.float_scalars:
            a = args[k]
            if type(a) is TapeScalar and a.tape is self:
                active.append(k)
        argnums = plan.argnums_for(tuple(active)) if active else ()
        if argnums and (plan.random or plan.hidden):
            raise TypeError(
                f"kd.Tape cannot differentiate {kernel.__name__}: it reads arrays from "
                "globals or closures or draws random numbers; pass its arrays as arguments")
        if not argnums and not self._calls:  # nothing recorded yet needs this call's state
            return self._run(kernel, plan, plain, speculative)
        every = self.checkpoint_every
        kept: dict[int, Any] = {}  # the copies the stretch of calls holds already
        if every is not None:
            if plan.random:
                raise TypeError(f"kd.Tape(checkpoint_every=...) cannot record {kernel.__name__}: "
                                "it draws random numbers, which a run again would not repeat")
            if len(self._calls) % every:
                kept = self._segments[-1].checkpoint
        written = tuple([id(args[k]) for k in plan.written])
        taken: dict[int, Any] = {}  # the copies made for this call
        copied_bytes = 0
        for k, key in zip(plan.written, written):
            if key in taken or key in kept:
                continue
            a = plain[k]
            if self._needs_no_copy(kernel, plan, plain, k, key, argnums):
                taken[key] = self._scratch_for(key, a)
            else:
                taken[key] = copy_of(a)
                copied_bytes += int(a.nbytes)
        call = Call(kernel, plan, args, plain, argnums, written)
        if argnums and plan.scalar_result and not written and every is None and plan.on_cpu:
            result = self._value_and_gradient(kernel, call)
        else:
            result = self._run(kernel, plan, plain, speculative)
            if result is SLOW:
                return SLOW
        self._commit(call, taken, copied_bytes)
        if every is None and Repeat.eligible(call, self._calls[-2] if len(self._calls) > 1
                                              else None, result):
            scratch = {key: a for key, a in taken.items() if self._scratch.get(key) is a}
            self._repeat = Repeat(call, scratch, copied_bytes)
        if argnums and isinstance(result, (float, np.floating)):
            return TapeScalar(float(result), self, len(self._calls) - 1)
        returned_types = plan.returned_types if argnums else None
        returned = result if type(result) is tuple else (result,)
        if returned_types is not None and self._returns_new_arrays(returned, plain):
            call.returned, call.returned_types = returned, returned_types
            self._active.update((id(r), r) for r in returned if _is_float_array(r))
        elif argnums and result is not None:
            self._remember_returned(result, kernel.__name__)
        return result

    def _refuse_views_of_active(self, kernel: Kernel, plan: RecordPlan, args: tuple,
                                plain: tuple) -> None:
        """A ValueError where a floating-point array argument that carries no gradient
        shares memory with one that does (a view of it, ``x[:, 1]``, or its NumPy array):
        the gradient flowing through it would be lost."""
        known = self._active
        for k in plan.float_arrays:
            if id(args[k]) in known:
                continue
            for other in known.values():
                if share_elements(plain[k], other):
                    raise ValueError(
                        f"kd.Tape: argument '{plan.names[k]}' of {kernel.__name__} shares memory "
                        "with an array that carries gradients under the tape (it is a view of "
                        "it, or its NumPy array) but is not that array; gradients do not flow "
                        "through views: pass the array itself and index it in the kernel")

    def _commit(self, call: Call, taken: dict[int, Any], copied_bytes: int) -> None:
        """Adds a call that ran, with the copies made for it, to the record."""
        self._repeat = None
        every = self.checkpoint_every
        if every is None:
            call.snapshots = taken
        elif len(self._calls) % every == 0:
            segment = Segment(len(self._calls))
            segment.checkpoint = taken
            self._segments.append(segment)
        else:
            self._segments[-1].checkpoint.update(taken)
        self.memory_bytes += copied_bytes
        read_since, read_by_active = self._read_since_written, self._read_by_active
        written = call.written
        for key in written:
            read_since.discard(key)
            if key in read_by_active:
                read_by_active.discard(key)
                call.keep = {key} | call.keep
        args, plan = call.args, call.plan
        if call.argnums and call.gradient is None and plan.read:  # a product to run
            unread = self._unread(call.kernel, plan, call.plain, call.argnums)
            for k in plan.read:
                key = id(args[k])
                if key not in written and k not in unread:
                    read_since.add(key)
                    read_by_active.add(key)
        arrays = call.plan.arrays
        for k in call.argnums:
            if k in arrays:
                self._active[id(args[k])] = args[k]
        if call.argnums and call.gradient is None:
            self._differentiated[call.plan] = call.kernel
        self._calls.append(call)

    @staticmethod
    def _run(kernel: Kernel, plan: RecordPlan, plain: tuple, speculative: bool) -> Any:
        """Runs the call (SLOW where a speculative plan does not take the arguments)."""
        if speculative:
            fast = plan.fast
            assert fast is not None
            raw = fast.function(*plain)
            if raw is None or raw is SLOW:
                return raw
            return fast.finish(raw, plain)
        if plan.hidden:
            return _PLAIN_CALL(kernel, *plain)
        return plan.compiled(plain)

    def _value_and_gradient(self, kernel: Kernel, call: Call) -> Any:
        """Runs a call by its gradient kernel, keeping the gradient (see _Call.gradient)."""
        plan, plain, argnums = call.plan, call.plain, call.argnums
        arrays = [k for k in argnums if k in plan.arrays]
        adjoints = [np.zeros(plain[k].shape, plain[k].dtype) for k in arrays]
        self._busy = True
        try:
            gradient = plan.gradient(kernel, argnums, plan.unit_axes(plain, argnums))
            value, *scalars, _ = gradient((*plain, *adjoints))
        except CompileError:  # raised by backward, where the seed is not zero
            return self._run(kernel, plan, plain, False)
        finally:
            self._busy = False
        by_position = dict(zip(arrays, adjoints))
        scalar_gradients = iter(scalars)
        call.gradient = tuple(by_position[k] if k in by_position else next(scalar_gradients)
                              for k in argnums)
        self.memory_bytes += sum(int(g.nbytes) for g in adjoints)
        return value

    def _needs_no_copy(self, kernel: Kernel, plan: RecordPlan, plain: tuple, k: int,
                       key: int, argnums: tuple[int, ...]) -> bool:
        """Whether the value of the array at ``k`` before the call is never read on the
        way back (a scratch array of its shape is passed instead): no call recorded
        since the array was last written read it, and the call overwrites it before
        reading it, or is not differentiated, or its vector-Jacobian product does not
        read it. CPU arrays of tapes without checkpoints, not sharing memory with other
        arguments."""
        if self.checkpoint_every is not None or key in self._read_since_written or not plan.on_cpu:
            return False
        if plan.overwritten is None:
            from kdsl.runtime.tape_overwritten import overwritten_arguments

            plan.overwritten = self._analysed(
                lambda: overwritten_arguments(kernel, plain, plan.written))
        if k not in plan.overwritten and argnums and k not in self._unread(
                kernel, plan, plain, argnums):
            return False
        a = plain[k]
        known, first = self._apart, id(a)
        for j in plan.arrays:
            if j != k and (first, id(plain[j])) not in known and not self._disjoint(a, plain[j]):
                return False
        return True

    def _unread(self, kernel: Kernel, plan: RecordPlan, plain: tuple,
                argnums: tuple[int, ...]) -> frozenset[int]:
        """The positions of the arrays whose values the call's vector-Jacobian product
        does not read (CPU calls returning no array), found once per plan and argnums."""
        if not plan.on_cpu or plan.returned_types is not None:
            return frozenset()
        unit_axes = plan.unit_axes(plain, argnums)
        found = plan.unread.get((argnums, unit_axes))
        if found is None:
            from kdsl.runtime.tape_overwritten import unread_by_product

            found = plan.unread[(argnums, unit_axes)] = self._analysed(
                lambda: unread_by_product(kernel, plain, argnums, plan.arrays, plan.arrays,
                                          unit_axes))
        return found

    def _analysed(self, analysis: Callable[[], frozenset[int]]) -> frozenset[int]:
        """What an analysis of a kernel finds (nothing where it fails: the arrays are
        then copied)."""
        self._busy = True
        try:
            return analysis()
        except Exception:  # noqa: BLE001
            return frozenset()
        finally:
            self._busy = False

    def _disjoint(self, a: Any, b: Any) -> bool:
        pair = (id(a), id(b))
        if pair in self._apart:
            return True
        if overlaps(a, b):
            return False
        self._apart[pair] = (a, b)
        return True

    def _scratch_for(self, key: int, a: Any) -> Any:
        """One array of ``a``'s shape and dtype per array, for the calls that overwrite
        it before reading it (their products may write it)."""
        found = self._scratch.get(key)
        if found is None:
            found = self._scratch[key] = np.empty(a.shape, a.dtype)
            self.memory_bytes += int(a.nbytes)
        return found

    @staticmethod
    def _returns_new_arrays(returned: tuple, plain: tuple) -> bool:
        """Whether the floating-point arrays a call returned (one at least) are in memory
        of their own (not an argument's, nor one another's: the gradient of a view of an
        argument is not followed)."""
        floats = [r for r in returned if _is_float_array(r)]
        return bool(floats) and not any(
            overlaps(r, a) for k, r in enumerate(floats)
            for a in (*(a for a in plain if is_array(a)), *floats[k + 1:]))

    def _remember_returned(self, result: Any, kernel_name: str) -> None:
        for value in result if isinstance(result, tuple) else (result,):
            if _is_float_array(value):
                try:
                    kept: Any = weakref.ref(value)
                except TypeError:
                    kept = value
                self._returned[id(value)] = (kept, kernel_name)

    def _refuse_returned(self, a: Any, what: str) -> None:
        """A ValueError where ``a`` is a float array an active call returned: the tape
        does not pass gradients back through returned arrays, and treating it as a
        constant would silently give a wrong gradient."""
        found = self._returned.get(id(a))
        if found is None:
            return
        kept, kernel_name = found
        if (kept() if isinstance(kept, weakref.ref) else kept) is not a:
            del self._returned[id(a)]  # that array is gone; its id was reused
            return
        raise ValueError(
            f"kd.Tape: {what} is an array {kernel_name} returned under the tape from arrays "
            "with requires_grad=True; gradients do not flow back through arrays a kernel "
            f"returns: give {kernel_name} an output array to write instead")

    # --- the record ---------------------------------------------------------------------

    def reset(self) -> None:
        """Forgets the recorded calls and the copies kept for them (``.grad`` stays)."""
        self._release_copies()
        self._calls.clear()
        self._segments.clear()
        self._active.clear()
        self._leaves.clear()
        self._returned.clear()
        self._read_since_written.clear()
        self._read_by_active.clear()
        self._scratch.clear()
        self._apart.clear()
        self._repeat = None
        self._differentiated.clear()
        self.memory_bytes = 0

    def _release_copies(self) -> None:
        """Gives the memory of the copies to the next tapes."""
        kept: list[Any] = []
        for call in self._calls:
            kept.extend(call.snapshots.values())
            call.snapshots = {}
        for segment in self._segments:
            kept.extend(segment.checkpoint.values())
            segment.checkpoint = {}
        COPIES.give(kept)

    def __del__(self) -> None:
        try:
            self._release_copies()
        except Exception:  # noqa: BLE001  (at interpreter exit: nothing to keep)
            pass

    Scalar = TapeScalar

    def __repr__(self) -> str:
        return f"<kd.Tape of {len(self._calls)} calls, {self.memory_bytes} bytes kept>"

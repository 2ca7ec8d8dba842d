"""The way back of ``kd.Tape``: ``tape.backward(loss)`` runs the recorded calls'
vector-Jacobian products last to first, on the arrays as each call found them (see
kdsl/runtime/tape.py), and adds what reaches the arrays made with ``requires_grad=True``
into their ``.grad``."""

from __future__ import annotations

from typing import Any

import numpy as np

from kdsl.runtime.tape_memory import (
    add_gradient,
    copy_of,
    empty_like,
    fill_zero,
    is_array,
    ones_like,
    zeros_like,
)
from kdsl.runtime.tape_records import Call, Segment, TapeScalar
from kdsl.runtime.tape_repeat import reverse_repeated


class TapeReverse:
    """``backward`` and ``zero`` of ``kd.Tape`` (the recording half is in tape.py)."""

    checkpoint_every: int | None
    _calls: list[Call]
    _segments: list[Segment]
    _active: dict[int, Any]
    _leaves: dict[int, Any]
    _busy: bool
    _differentiated: dict[Any, Any]  # RecordPlan -> Kernel
    saved_bytes: int

    def _refuse_returned(self, a: Any, what: str) -> None:
        raise NotImplementedError

    def zero(self) -> None:
        """Sets the ``.grad`` of every ``requires_grad=True`` array the tape saw to zero."""
        for leaf in self._leaves.values():
            if leaf.grad is not None:
                fill_zero(leaf.grad)

    def _seed(self, loss: Any) -> tuple[dict[int, Any], dict[int, float]]:
        """The adjoints the walk starts from: of an array (by id), or of a call's value."""
        if isinstance(loss, TapeScalar):
            if loss.tape is not self:
                raise ValueError("tape.backward: the loss was returned under another tape")
            return {}, {loss.call: 1.0}
        if is_array(loss):
            if int(np.prod(loss.shape)) != 1:
                raise ValueError("tape.backward: the loss must be a scalar or a one-element "
                                 f"array, got an array of shape {tuple(loss.shape)}")
            if np.dtype(loss.dtype).kind != "f":
                raise TypeError("tape.backward: the loss must be floating-point, got an array "
                                f"of {loss.dtype}")
            self._refuse_returned(loss, "the loss")
            if id(loss) not in self._active:
                raise ValueError("tape.backward: no recorded call wrote the loss array from "
                                 "arrays with requires_grad=True")
            return {id(loss): ones_like(loss)}, {}
        if isinstance(loss, (float, int, np.number)):
            raise ValueError(
                f"tape.backward: the loss {loss!r} is not a scalar a kernel returned under this "
                "tape from arrays with requires_grad=True (nor a one-element array)")
        raise TypeError(f"tape.backward: the loss must be a scalar a kernel returned under "
                        f"the tape or a one-element array, got {type(loss).__name__}")

    def backward(self, loss: Any) -> None:
        """Adds the gradient of ``loss`` (a scalar a kernel returned under this tape, or a
        one-element array a recorded call wrote) with respect to the value each
        ``requires_grad=True`` array had when the tape first saw it into its ``.grad``."""
        if not self._leaves:
            raise ValueError("tape.backward: no array the tape recorded has requires_grad=True; "
                             "make the parameters with kd.array(..., requires_grad=True)")
        adjoints, scalar_adjoints = self._seed(loss)
        self._refuse_changed_kernels()
        versions: dict[int, Any] = {}  # id -> the array's value at the point of the walk
        self.saved_bytes = 0
        self._busy = True
        try:
            if self.checkpoint_every is None:
                self._walk(range(len(self._calls)), versions, adjoints, scalar_adjoints)
            ends = [segment.start for segment in self._segments[1:]] + [len(self._calls)]
            for segment, end in reversed(list(zip(self._segments, ends))):
                calls = range(segment.start, end)
                self._run_again(segment, calls, versions)
                try:
                    self._walk(calls, versions, adjoints, scalar_adjoints)
                finally:
                    for index in calls:
                        self._calls[index].snapshots = {}
                versions.update(segment.checkpoint)
        finally:
            self._busy = False
        for key, leaf in self._leaves.items():
            found = adjoints.get(key)
            if found is not None:
                add_gradient(leaf, found)

    def _refuse_changed_kernels(self) -> None:
        """A ValueError where a kernel whose product the way back may run is no longer
        what was recorded (its source, a func it calls or a global constant it reads
        changed since): its product would be the new code's, a wrong gradient."""
        for plan, kernel in self._differentiated.items():
            if not plan.current():
                raise ValueError(
                    f"tape.backward: {kernel.__name__} changed after a call of it was "
                    "recorded (its source, a func it calls or a global constant it reads): "
                    "its gradient would be that of the new code; pass the value as an "
                    "argument instead")

    def _walk(self, calls: range, versions: dict[int, Any], adjoints: dict[int, Any],
              scalar_adjoints: dict[int, float]) -> None:
        """The products of ``calls``, last to first (their snapshots at hand)."""
        walk = object()
        for index in reversed(calls):
            call = self._calls[index]
            if call.repeat is not None:  # no seed, no gradient taken, nothing returned
                if call.argnums:
                    for key in call.written:
                        if key in adjoints:
                            saved = reverse_repeated(call, versions, adjoints, walk)
                            if saved > self.saved_bytes:
                                self.saved_bytes = saved
                            break
                if call.snapshots:
                    versions.update(call.snapshots)
                continue
            seed = scalar_adjoints.get(index, 0.0) if scalar_adjoints else 0.0
            if call.gradient is not None:
                if seed != 0.0:
                    self._scale_gradient(call, seed, adjoints, scalar_adjoints)
            elif call.argnums and (seed != 0.0 or any(key in adjoints for key in call.written)
                                   or (call.returned is not None
                                       and any(id(r) in adjoints for r in call.returned))):
                self._reverse(call, versions, adjoints, scalar_adjoints, seed)
            if call.snapshots:
                versions.update(call.snapshots)

    @staticmethod
    def _scale_gradient(call: Call, seed: float, adjoints: dict[int, Any],
                        scalar_adjoints: dict[int, float]) -> None:
        """The product of a call whose gradient was taken when it was recorded."""
        assert call.gradient is not None
        for k, g in zip(call.argnums, call.gradient):
            source = call.args[k]
            if isinstance(source, TapeScalar):
                scalar_adjoints[source.call] = (scalar_adjoints.get(source.call, 0.0)
                                                + seed * float(g))
            elif is_array(source):
                scaled = g * g.dtype.type(seed)
                found = adjoints.get(id(source))
                if found is None:
                    adjoints[id(source)] = scaled
                else:
                    found[...] += scaled

    def _run_again(self, segment: Segment, calls: range, versions: dict[int, Any]) -> None:
        """Runs the calls of a segment again from its checkpoint, on copies, keeping what
        each call's product needs (the arrays it writes, as it found them)."""
        from kdsl.runtime.tape import _PLAIN_CALL

        working = {key: copy_of(a) for key, a in segment.checkpoint.items()}
        for index in calls:
            call = self._calls[index]
            args = list(call.plain)
            for k in call.plan.arrays:
                key = id(call.args[k])
                args[k] = working.get(key, versions.get(key, args[k]))
            for key in call.written:
                if key not in call.snapshots:
                    call.snapshots[key] = copy_of(working[key])
            _PLAIN_CALL(call.kernel, *args)

    def _reverse(self, call: Call, versions: dict[int, Any], adjoints: dict[int, Any],
                 scalar_adjoints: dict[int, float], seed: float) -> None:
        """Runs the call's vector-Jacobian product on the arrays as the call found them
        (it overwrites the arrays the call writes: copies where they are read again)."""
        plan = call.plan.reverse_plan(call.kernel, call.argnums, call.returned_types,
                                      call.plan.unit_axes(call.plain, call.argnums),
                                      call.plan.writes_shared_memory(call.plain))
        args = list(call.plain)
        snapshots, keep, given = call.snapshots, call.keep, call.args
        for k in call.plan.arrays:
            key = id(given[k])
            snapshot = snapshots.get(key)
            if snapshot is None:
                args[k] = versions.get(key, args[k])
            else:
                args[k] = copy_of(snapshot) if key in keep else snapshot
        adjoint_arrays = []
        for k in plan.adjoint_positions:
            key = id(given[k])
            adjoint = adjoints.get(key)
            if adjoint is None:
                adjoint = adjoints[key] = zeros_like(args[k])
            adjoint_arrays.append(adjoint)
        for returned in call.returned or ():  # written by the product
            args.append(empty_like(returned))
        for returned in call.returned or ():  # the adjoints of the float ones, then gone
            if np.dtype(returned.dtype).kind == "f":
                adjoint = adjoints.pop(id(returned), None)
                adjoint_arrays.append(adjoint if adjoint is not None else zeros_like(returned))
        *scalars, saved = plan.product((*args, *adjoint_arrays, seed))
        if saved > self.saved_bytes:
            self.saved_bytes = int(saved)
        for k, g in zip(plan.scalar_positions, scalars):
            source = given[k]
            if isinstance(source, TapeScalar):
                scalar_adjoints[source.call] = scalar_adjoints.get(source.call, 0.0) + float(g)

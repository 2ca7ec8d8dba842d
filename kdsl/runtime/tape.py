"""``kd.Tape``: gradients across kernel calls.

Under ``with kd.Tape() as tape:`` every kernel call is recorded with the arrays it was
given; before a call writes arrays, the tape copies them (a snapshot: the arrays as the
call found them). ``tape.backward(loss)`` walks the calls last to first and runs each
one's vector-Jacobian product (kdsl/ir/autodiff/vjp.py) on the arrays as that call saw
them (the snapshots, never the user's arrays, which keep their final values), passing
adjoint arrays from call to call. A call on CPU arrays that writes no array and returns
one float is run by its ``kd.value_and_grad`` kernel as it is recorded (without
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
"""

from __future__ import annotations

import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.errors import CompileError
from kdsl.runtime.arguments import argument_key
from kdsl.runtime.kernel import Kernel

_PLAIN_CALL = Kernel.__call__
_RECORDING: list[Tape] = []


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


@dataclass
class _Call:
    """One recorded kernel call."""

    kernel: Kernel
    args: tuple  # as given (TapeScalars included)
    argnums: tuple[int, ...]  # the arguments differentiated; () for a call with no gradient
    written: tuple[int, ...]  # the positions of the arrays it writes
    snapshots: dict[int, Any] = field(default_factory=dict)  # id(array) -> copy before
    # a call that writes no array and returns a float: its gradient, taken when recorded
    # (by kd.grad's kernel, which also gives the value), scaled on the way back
    gradient: tuple | None = None
    # the float array the call returned, through which gradients flow back, and its type
    returned: Any = None
    returned_type: T.ArrayType | None = None


@dataclass
class _Segment:
    """Calls from ``start`` on (``checkpoint_every`` of them): the arrays they write, as
    they were before the first of them wrote each (by id)."""

    start: int
    checkpoint: dict[int, Any] = field(default_factory=dict)


def _recording_call(kernel: Kernel, *args: Any) -> Any:
    """``Kernel.__call__`` while a tape records (installed by ``Tape.__enter__``, so that
    calls outside tapes pay nothing)."""
    tape = _RECORDING[-1] if _RECORDING else None
    if tape is None or tape._busy or type(kernel) is not Kernel:  # kd.grad, kd.jvp: not recorded
        return _PLAIN_CALL(kernel, *args)
    return tape._record(kernel, kernel.with_defaults(args))


_gradients: weakref.WeakKeyDictionary[Kernel, dict[tuple[int, ...], Any]] = \
    weakref.WeakKeyDictionary()


def _value_and_gradient(kernel: Kernel, argnums: tuple[int, ...]) -> Any:
    """``kd.value_and_grad(kernel, argnums)``, made once per kernel and argnums."""
    from kdsl.runtime.gradient import value_and_grad

    by_argnums = _gradients.setdefault(kernel, {})
    found = by_argnums.get(argnums)
    if found is None:
        found = by_argnums[argnums] = value_and_grad(kernel, argnums)
    return found


def _is_array(a: Any) -> bool:
    return isinstance(a, np.ndarray) or hasattr(a, "__kdsl_array__")


def _is_float_parameter(p: Any) -> bool:
    t = p.type.dtype if isinstance(p.type, T.ArrayType) else p.type
    return bool(T.element_scalar(t).is_float)


class _CopyPool:
    """The memory of the copies released tapes kept, for the copies of the next ones: a
    training loop that records a run per step touches no fresh pages (page faults and the
    OS's zeroing cost more than the copies). Up to ``limit`` bytes are kept."""

    limit = 1 << 28

    def __init__(self) -> None:
        self.free: dict[int, list[np.ndarray]] = {}  # bytes -> arrays owning that memory
        self.bytes = 0
        self.lock = threading.Lock()

    def copy(self, data: np.ndarray) -> np.ndarray:
        """A C-contiguous copy of ``data``."""
        with self.lock:
            found = self.free.get(data.nbytes)
            owner = found.pop() if found else None
            if owner is not None:
                self.bytes -= data.nbytes
        if owner is None:
            return np.array(data, copy=True, order="C")
        out = owner.reshape(-1).view(np.uint8).view(data.dtype).reshape(data.shape)
        np.copyto(out, data)
        return out

    def give(self, arrays: list[Any]) -> None:
        """Keeps the memory of the NumPy arrays of ``arrays`` nothing else holds."""
        while arrays:
            a = arrays.pop()
            # held by ``a`` and getrefcount's argument only
            if not isinstance(a, np.ndarray) or sys.getrefcount(a) > 2:
                continue
            owner = a if a.flags.owndata else a.base
            if not (isinstance(owner, np.ndarray) and owner.flags.owndata
                    and owner.flags.c_contiguous and owner.nbytes == a.nbytes > 0):
                continue
            with self.lock:
                if self.bytes + a.nbytes > self.limit:
                    continue
                self.free.setdefault(a.nbytes, []).append(owner)
                self.bytes += a.nbytes


_COPIES = _CopyPool()


def _copy(a: Any) -> Any:
    """A copy of an array on its device, to pass to kernels in its place."""
    if getattr(a, "device", "cpu") == "cuda":
        return a.copy()
    return _COPIES.copy(a if isinstance(a, np.ndarray) else a.numpy())


def _zeros_like(a: Any) -> Any:
    if getattr(a, "device", "cpu") == "cuda":
        from kdsl.runtime.arrays import zeros_like

        return zeros_like(a)
    data = a if isinstance(a, np.ndarray) else a.numpy()
    return np.zeros(data.shape, data.dtype)


@dataclass
class _Plan:
    """What recording a call of one specialisation needs to know of it."""

    params: list[Any]  # the parameters of the user's arguments
    written: tuple[int, ...]  # the positions of the arrays it writes
    floats: list[int]  # the positions of its floating-point arguments
    hidden: bool  # it takes hidden arguments (arrays of globals, the random stream)
    returned_type: T.ArrayType | None
    # the written arrays it overwrites before reading them (tape_overwritten.py), found
    # when first needed
    overwritten: frozenset[int] | None = None


_plans: weakref.WeakKeyDictionary[Any, _Plan] = weakref.WeakKeyDictionary()


def _plan_of(compiled: Any, count: int) -> _Plan:
    """The (cached) plan of a specialisation called with ``count`` arguments."""
    found = _plans.get(compiled)
    if found is None or len(found.params) != count:
        params = compiled.params[:count]
        written_all = compiled.meta["written"] if hasattr(compiled, "meta") else compiled.written
        found = _Plan(params, tuple(k for k in written_all if k < count),
                      [k for k, p in enumerate(params) if _is_float_parameter(p)],
                      len(compiled.params) > count, _returned_array_type(compiled))
        _plans[compiled] = found
    return found


def _returned_array_type(compiled: Any) -> T.ArrayType | None:
    """The type of the one array a specialisation returns (None if it returns anything
    else), as an annotation (any layout)."""
    meta = getattr(compiled, "meta", None)
    if meta is not None:  # a CUDA specialisation
        results, returns_tuple = meta["results"], meta.get("returns_tuple", False)
    else:
        results, returns_tuple = compiled.results, compiled.returns_tuple
    if len(results) != 1 or returns_tuple or not isinstance(results[0].type, T.ArrayType):
        return None
    t = results[0].type
    return T.ArrayType(t.dtype, t.ndim)


def _empty_like(a: Any) -> Any:
    if getattr(a, "device", "cpu") == "cuda":
        from kdsl.runtime.arrays import empty

        return empty(a.shape, a.dtype, "cuda")
    data = a if isinstance(a, np.ndarray) else a.numpy()
    return np.empty(data.shape, data.dtype)


def _overlaps(a: Any, b: Any) -> bool:
    """Whether two arrays (on the same device) may share memory."""
    if getattr(a, "device", "cpu") == "cuda" or getattr(b, "device", "cpu") == "cuda":
        if getattr(a, "device", "cpu") != getattr(b, "device", "cpu"):
            return False
        return bool(a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes)
    first = a if isinstance(a, np.ndarray) else a.numpy()
    second = b if isinstance(b, np.ndarray) else b.numpy()
    return bool(np.may_share_memory(first, second))


def _ones_like(a: Any) -> Any:
    if getattr(a, "device", "cpu") == "cuda":
        from kdsl.runtime.arrays import ones

        return ones(a.shape, a.dtype, "cuda")
    data = a if isinstance(a, np.ndarray) else a.numpy()
    return np.ones(data.shape, data.dtype)


def _nbytes(a: Any) -> int:
    return int(a.nbytes)


class Tape:
    """Records kernel calls under ``with kd.Tape() as tape:``; ``tape.backward(loss)``
    adds the gradient of ``loss`` into the ``.grad`` of every array made with
    ``requires_grad=True`` that the recorded calls used."""

    def __init__(self, checkpoint_every: int | None = None) -> None:
        if checkpoint_every is not None and (
                not isinstance(checkpoint_every, int) or checkpoint_every < 1):
            raise ValueError("kd.Tape: checkpoint_every must be a positive int (or None), "
                             f"got {checkpoint_every!r}")
        self.checkpoint_every = checkpoint_every
        self._segments: list[_Segment] = []
        self._calls: list[_Call] = []
        self._active: set[int] = set()  # ids of the active arrays (see the module's doc)
        self._leaves: dict[int, Any] = {}  # the arrays with requires_grad=True, by id
        # float arrays active calls returned (no gradient flows back through them yet):
        # by id, the array (or a weak reference to it) and the kernel's name
        self._returned: dict[int, tuple[Any, str]] = {}
        self._busy = False
        # arrays (by id) a recorded call read and none wrote since: a call that writes
        # one must keep a copy of it for those calls
        self._read_since_written: set[int] = set()
        self._scratch: dict[int, Any] = {}  # by array id, see _scratch_for
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

    def _is_active(self, a: Any) -> bool:
        if isinstance(a, TapeScalar):
            return a.tape is self
        if id(a) in self._active:
            return True
        if getattr(a, "requires_grad", False):
            self._active.add(id(a))
            self._leaves[id(a)] = a
            return True
        return False

    def _record(self, kernel: Kernel, args: tuple) -> Any:
        plain = tuple(float(a) if isinstance(a, TapeScalar) else a for a in args)
        self._busy = True
        try:
            compiled = kernel.specialisation(plain)
        finally:
            self._busy = False
        plan = _plan_of(compiled, len(args))
        params, written, floats = plan.params, plan.written, plan.floats
        for k in floats:
            self._refuse_returned(args[k], f"argument '{params[k].name}' of {kernel.__name__}")
        active = [k for k in floats if self._is_active(args[k])]
        argnums: tuple[int, ...] = ()
        if active:
            argnums = tuple(sorted(set(active) | {k for k in written if k in floats}))
            if kernel.uses_random() or plan.hidden:
                raise TypeError(
                    f"kd.Tape cannot differentiate {kernel.__name__}: it reads arrays from "
                    "globals or closures or draws random numbers; pass its arrays as arguments")
        run = (lambda: _PLAIN_CALL(kernel, *plain)) if plan.hidden else (lambda: compiled(plain))
        if not argnums and not self._calls:  # nothing recorded yet needs this call's state
            return run()
        call = _Call(kernel, args, argnums, written)
        if self.checkpoint_every is None:
            kept = call.snapshots
        else:
            if kernel.uses_random():
                raise TypeError(f"kd.Tape(checkpoint_every=...) cannot record {kernel.__name__}: "
                                "it draws random numbers, which a run again would not repeat")
            if len(self._calls) % self.checkpoint_every == 0:
                self._segments.append(_Segment(len(self._calls)))
            kept = self._segments[-1].checkpoint
        for k in written:
            a = args[k]
            if id(a) not in kept:
                if self._needs_no_copy(kernel, plan, plain, k):
                    kept[id(a)] = self._scratch_for(a)
                else:
                    kept[id(a)] = _copy(a)
                    self.memory_bytes += _nbytes(a)
        for k, a in enumerate(args):  # what later writes must keep for this call
            if _is_array(a):
                if k in written:
                    self._read_since_written.discard(id(a))
                else:
                    self._read_since_written.add(id(a))
        if argnums and self._takes_gradient_now(compiled, plain, written):
            self._busy = True
            try:
                result, call.gradient = _value_and_gradient(kernel, argnums)(*plain)
                self.memory_bytes += sum(_nbytes(g) for g in call.gradient or ()
                                         if hasattr(g, "nbytes"))
            except CompileError:  # raised by backward, where the seed is not zero
                result = run()
            finally:
                self._busy = False
        else:
            result = run()
        for k in argnums:
            if _is_array(args[k]):
                self._active.add(id(args[k]))
        self._calls.append(call)
        if argnums and isinstance(result, (float, np.floating)):
            return TapeScalar(float(result), self, len(self._calls) - 1)
        returned_type = plan.returned_type if argnums else None
        if returned_type is not None and self._returns_new_array(result, plain):
            call.returned, call.returned_type = result, returned_type
            self._active.add(id(result))
        elif argnums:
            self._remember_returned(result, kernel.__name__)
        return result

    def _needs_no_copy(self, kernel: Kernel, plan: _Plan, args: tuple, k: int) -> bool:
        """Whether the call overwrites the array at ``k`` before reading it, and no call
        recorded since the array was last written read it: its value before the call is
        never read on the way back (a scratch array of its shape is passed instead). CPU
        arrays of tapes without checkpoints, not sharing memory with other arguments."""
        a = args[k]
        if (self.checkpoint_every is not None or id(a) in self._read_since_written
                or getattr(a, "device", "cpu") != "cpu"):
            return False
        if plan.overwritten is None:
            from kdsl.runtime.tape_overwritten import overwritten_arguments

            self._busy = True
            try:
                plan.overwritten = overwritten_arguments(kernel, args, plan.written)
            except Exception:  # noqa: BLE001  (not known: the arrays are copied)
                plan.overwritten = frozenset()
            finally:
                self._busy = False
        return k in plan.overwritten and not any(
            j != k and _is_array(b) and _overlaps(a, b) for j, b in enumerate(args))

    def _scratch_for(self, a: Any) -> Any:
        """One array of ``a``'s shape and dtype per array, for the calls that overwrite
        it before reading it (their products may write it)."""
        found = self._scratch.get(id(a))
        if found is None:
            data = a if isinstance(a, np.ndarray) else a.numpy()
            found = self._scratch[id(a)] = np.empty(data.shape, data.dtype)
            self.memory_bytes += _nbytes(a)
        return found

    @staticmethod
    def _returns_new_array(result: Any, args: tuple) -> bool:
        """Whether the call returned a float array in memory of its own (not an
        argument's: the gradient of a view of an argument is not followed)."""
        if not _is_array(result) or np.dtype(result.dtype).kind != "f":
            return False
        return not any(_is_array(a) and _overlaps(result, a) for a in args)

    def _takes_gradient_now(self, compiled: Any, plain: tuple, written: tuple[int, ...]) -> bool:
        """Whether a call's gradient is taken as it is recorded: the call writes no array
        and returns one float (its product is then its gradient times the seed), on the
        CPU, without checkpoints (which run calls again)."""
        results = [getattr(r, "type", r) for r in getattr(compiled, "results", None) or ()]
        return (not written and self.checkpoint_every is None and len(results) == 1
                and isinstance(results[0], T.ScalarType) and results[0].is_float
                and not getattr(compiled, "returns_tuple", False)
                and all(getattr(a, "device", "cpu") == "cpu" for a in plain if _is_array(a)))

    def _remember_returned(self, result: Any, kernel_name: str) -> None:
        for value in result if isinstance(result, tuple) else (result,):
            if _is_array(value) and np.dtype(value.dtype).kind == "f":
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

    # --- the way back -------------------------------------------------------------------

    def _seed(self, loss: Any) -> tuple[dict[int, Any], dict[int, float]]:
        """The adjoints the walk starts from: of an array (by id), or of a call's value."""
        if isinstance(loss, TapeScalar):
            if loss.tape is not self:
                raise ValueError("tape.backward: the loss was returned under another tape")
            return {}, {loss.call: 1.0}
        if _is_array(loss):
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
            return {id(loss): _ones_like(loss)}, {}
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
        versions: dict[int, Any] = {}  # id -> the array's value at the point of the walk
        kept = self._snapshots_read_later()
        self.saved_bytes = 0
        self._busy = True
        try:
            if self.checkpoint_every is None:
                self._walk(range(len(self._calls)), versions, adjoints, scalar_adjoints, kept)
            ends = [segment.start for segment in self._segments[1:]] + [len(self._calls)]
            for segment, end in reversed(list(zip(self._segments, ends))):
                calls = range(segment.start, end)
                self._run_again(segment, calls, versions)
                try:
                    self._walk(calls, versions, adjoints, scalar_adjoints, kept)
                finally:
                    for index in calls:
                        self._calls[index].snapshots = {}
                versions.update(segment.checkpoint)
        finally:
            self._busy = False
        for key, leaf in self._leaves.items():
            found = adjoints.get(key)
            if found is not None:
                _add_gradient(leaf, found)

    def _walk(self, calls: range, versions: dict[int, Any], adjoints: dict[int, Any],
              scalar_adjoints: dict[int, float], kept: dict[int, set[int]]) -> None:
        """The products of ``calls``, last to first (their snapshots at hand)."""
        for index in reversed(calls):
            call = self._calls[index]
            seed = scalar_adjoints.get(index, 0.0)
            if call.gradient is not None:
                if seed != 0.0:
                    self._scale_gradient(call, seed, adjoints, scalar_adjoints)
            elif call.argnums and (seed != 0.0 or any(
                    id(call.args[k]) in adjoints for k in call.written) or (
                    call.returned is not None and id(call.returned) in adjoints)):
                self._reverse(call, versions, adjoints, scalar_adjoints, seed,
                              kept.get(index, set()))
            versions.update(call.snapshots)

    def _scale_gradient(self, call: _Call, seed: float, adjoints: dict[int, Any],
                        scalar_adjoints: dict[int, float]) -> None:
        """The product of a call whose gradient was taken when it was recorded."""
        assert call.gradient is not None
        for k, g in zip(call.argnums, call.gradient):
            source = call.args[k]
            if _is_array(source):
                scaled = (g if isinstance(g, np.ndarray) else g.numpy()) * g.dtype.type(seed)
                found = adjoints.get(id(source))
                if found is None:
                    adjoints[id(source)] = scaled
                else:
                    found[...] += scaled
            elif isinstance(source, TapeScalar):
                scalar_adjoints[source.call] = (scalar_adjoints.get(source.call, 0.0)
                                                + seed * float(g))

    def _run_again(self, segment: _Segment, calls: range, versions: dict[int, Any]) -> None:
        """Runs the calls of a segment again from its checkpoint, on copies, keeping what
        each call's product needs (the arrays it writes, as it found them)."""
        working = {key: _copy(a) for key, a in segment.checkpoint.items()}
        for index in calls:
            call = self._calls[index]
            args = []
            for a in call.args:
                if isinstance(a, TapeScalar):
                    args.append(float(a))
                elif _is_array(a):
                    args.append(working.get(id(a), versions.get(id(a), a)))
                else:
                    args.append(a)
            for k in call.written:
                key = id(call.args[k])
                if key not in call.snapshots:
                    call.snapshots[key] = _copy(working[key])
            _PLAIN_CALL(call.kernel, *args)

    def _snapshots_read_later(self) -> dict[int, set[int]]:
        """For each call (by index), the arrays (by id) whose copy from before the call
        the way back reads again after the call's own product: an earlier call reads the
        array without writing it, and this call is the first to write it after that one."""
        kept: dict[int, set[int]] = {}
        next_writer: dict[int, int] = {}
        for index in reversed(range(len(self._calls))):
            call = self._calls[index]
            written = {id(call.args[k]) for k in call.written}
            if call.argnums:
                for a in call.args:
                    key = id(a)
                    if _is_array(a) and key not in written and key in next_writer:
                        kept.setdefault(next_writer[key], set()).add(key)
            for key in written:
                next_writer[key] = index
        return kept

    def _reverse(self, call: _Call, versions: dict[int, Any], adjoints: dict[int, Any],
                 scalar_adjoints: dict[int, float], seed: float, kept: set[int]) -> None:
        """Runs the call's vector-Jacobian product on the arrays as the call found them
        (it overwrites the arrays the call writes: copies where they are read again)."""
        from kdsl.runtime.vjp_kernel import vjp_kernel

        args = []
        for a in call.args:
            if isinstance(a, TapeScalar):
                args.append(float(a))
            elif _is_array(a):
                key = id(a)
                snapshot = call.snapshots.get(key)
                if snapshot is None:
                    args.append(versions.get(key, a))
                else:
                    args.append(_copy(snapshot) if key in kept else snapshot)
            else:
                args.append(a)
        adjoint_arrays = []
        for k in call.argnums:
            a = call.args[k]
            if _is_array(a):
                if id(a) not in adjoints:
                    adjoints[id(a)] = _zeros_like(a)
                adjoint_arrays.append(adjoints[id(a)])
        if call.returned is not None:  # written by the product; its adjoint, then gone
            returned = call.returned
            args.append(_empty_like(returned))
            adjoint = adjoints.pop(id(returned), None)
            adjoint_arrays.append(adjoint if adjoint is not None else _zeros_like(returned))
        product = vjp_kernel(call.kernel, call.argnums, call.returned_type)
        *scalars, saved = _run(product, (*args, *adjoint_arrays, seed))
        self.saved_bytes = max(self.saved_bytes, int(saved))
        scalar_positions = [k for k in call.argnums if not _is_array(call.args[k])]
        for k, g in zip(scalar_positions, scalars):
            source = call.args[k]
            if isinstance(source, TapeScalar):
                scalar_adjoints[source.call] = scalar_adjoints.get(source.call, 0.0) + float(g)

    def zero(self) -> None:
        """Sets the ``.grad`` of every ``requires_grad=True`` array the tape saw to zero."""
        for leaf in self._leaves.values():
            if leaf.grad is not None:
                _fill_zero(leaf.grad)

    def reset(self) -> None:
        """Forgets the recorded calls and the copies kept for them (``.grad`` stays)."""
        self._release_copies()
        self._calls.clear()
        self._segments.clear()
        self._active.clear()
        self._leaves.clear()
        self._returned.clear()
        self._read_since_written.clear()
        self._scratch.clear()
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
        _COPIES.give(kept)

    def __del__(self) -> None:
        try:
            self._release_copies()
        except Exception:  # noqa: BLE001  (at interpreter exit: nothing to keep)
            pass

    Scalar = TapeScalar

    def __repr__(self) -> str:
        return f"<kd.Tape of {len(self._calls)} calls, {self.memory_bytes} bytes kept>"


def _run(kernel: Kernel, args: tuple) -> Any:
    """``kernel(*args)``; a specialisation compiled before is called directly (the
    products of a tape's calls are called once per call, with arguments of one kind)."""
    compiled = kernel._specialisations.get(tuple(map(argument_key, args)))
    if compiled is None or len(compiled.params) != len(args) or not compiled.deps.unchanged():
        return kernel(*args)
    return compiled(args)


def _fill_zero(a: Any) -> None:
    if getattr(a, "device", "cpu") == "cuda":
        from kdsl.runtime.cuda.driver import get_driver

        get_driver().memset(a.ptr, a.nbytes, 0)
    else:
        a.numpy()[...] = 0


def _add_gradient(leaf: Any, adjoint: Any) -> None:
    """``leaf.grad += adjoint`` (``leaf.grad`` made on first use)."""
    from kdsl.runtime.arrays import DeviceArray

    if leaf.grad is None:
        leaf.grad = adjoint if getattr(leaf, "device", "cpu") == "cuda" else DeviceArray(adjoint)
        return
    if getattr(leaf, "device", "cpu") == "cuda":
        _add_on_device(leaf.grad, adjoint)
    else:
        leaf.grad.numpy()[...] += adjoint


def _add_on_device(target: Any, source: Any) -> None:
    """``target += source`` for CUDA arrays (through the host: once per ``backward``)."""
    from kdsl.runtime.cuda.driver import get_driver

    if not target.flags_c_contiguous:
        raise ValueError("tape.backward: the .grad of a CUDA array must be contiguous")
    total = np.ascontiguousarray(target.numpy() + source.numpy())
    get_driver().copy_to_device(target.ptr, total)

"""The memory ``kd.Tape`` works in: copies of arrays (in memory earlier tapes gave back),
adjoint arrays, and the ``.grad`` of the arrays made with ``requires_grad=True``."""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

from kdsl.runtime.arrays import DeviceArray


def is_array(a: Any) -> bool:
    return isinstance(a, np.ndarray) or hasattr(a, "__kdsl_array__")


def on_cuda(a: Any) -> bool:
    return getattr(a, "device", "cpu") == "cuda"


def host_data(a: Any) -> Any:
    """The NumPy array a CPU array argument holds (a CUDA array as it is)."""
    if type(a) is np.ndarray:
        return a
    if type(a) is DeviceArray:
        return a._data
    unwrap = getattr(a, "__kdsl_array__", None)
    return a if unwrap is None or on_cuda(a) else unwrap()


class CopyPool:
    """The memory of the copies released tapes kept, for the copies of the next ones: a
    training loop that records a run per step touches no fresh pages (page faults and the
    OS's zeroing cost more than the copies). Up to ``limit`` bytes are kept, as arrays of
    the shape and dtype they were made for (a copy of the same shape takes one as it is).
    Copies of fewer than ``smallest`` bytes come from malloc, which keeps small freed
    blocks itself (and costs less than the pool's bookkeeping)."""

    limit = 1 << 28
    smallest = 4096

    def __init__(self) -> None:
        self.free: dict[tuple, list[np.ndarray]] = {}  # (shape, dtype) -> free arrays
        self.bytes = 0
        self.lock = threading.Lock()

    def copy(self, data: np.ndarray) -> np.ndarray:
        """A C-contiguous copy of ``data``."""
        if data.nbytes < self.smallest:
            return data.copy()
        found = self.free.get((data.shape, data.dtype))
        out = None
        if found:
            with self.lock:
                if found:
                    out = found.pop()
                    self.bytes -= out.nbytes
        if out is None:
            out = self._of_the_same_size(data)
        if out is None:
            return np.array(data, copy=True, order="C")
        np.copyto(out, data)
        return out

    def free_list(self, data: np.ndarray) -> list[np.ndarray] | None:
        """The free arrays of ``data``'s shape and dtype (the same list for as long as
        the pool lives; it fills as tapes give their copies back), for ``copy_with``;
        None for copies that come from malloc."""
        if data.nbytes < self.smallest:
            return None
        with self.lock:
            return self.free.setdefault((data.shape, data.dtype), [])

    def copy_with(self, free: list[np.ndarray] | None, data: np.ndarray) -> np.ndarray:
        """``copy(data)``, given its ``free_list``."""
        if free is None:
            return data.copy()
        try:
            out = free.pop()
        except IndexError:
            return self.copy(data)
        with self.lock:
            self.bytes -= out.nbytes
        np.copyto(out, data)
        return out

    def _of_the_same_size(self, data: np.ndarray) -> np.ndarray | None:
        """A free array of ``data``'s size in bytes, seen with its shape and dtype."""
        with self.lock:
            for free in self.free.values():
                if free and free[-1].nbytes == data.nbytes:
                    owner = free.pop()
                    self.bytes -= owner.nbytes
                    break
            else:
                return None
        return owner.reshape(-1).view(np.uint8).view(data.dtype).reshape(data.shape)

    def give(self, arrays: list[Any]) -> None:
        """Keeps the memory of the NumPy arrays of ``arrays`` nothing else holds."""
        kept = []
        while arrays:
            a = arrays.pop()
            # held by ``a`` and getrefcount's argument only
            if type(a) is not np.ndarray or a.nbytes < self.smallest or sys.getrefcount(a) > 2:
                continue
            if a.base is not None:  # a view (of a free array of another shape)
                owner = a.base
                if not (isinstance(owner, np.ndarray) and owner.flags.owndata
                        and owner.flags.c_contiguous and owner.nbytes == a.nbytes > 0):
                    continue
                if not a.flags.c_contiguous:
                    a = owner
            else:
                flags = a.flags
                if not (flags.owndata and flags.c_contiguous and a.nbytes > 0):
                    continue
            kept.append(a)
        with self.lock:
            for a in kept:
                if self.bytes + a.nbytes > self.limit:
                    break
                self.free.setdefault((a.shape, a.dtype), []).append(a)
                self.bytes += a.nbytes


COPIES = CopyPool()


def copy_of(a: Any) -> Any:
    """A copy of an array (NumPy or CUDA, as given) on its device, to pass to kernels."""
    if type(a) is np.ndarray:
        return COPIES.copy(a)
    if on_cuda(a):
        return a.copy()
    return COPIES.copy(host_data(a))


def zeros_like(a: Any) -> Any:
    if on_cuda(a):
        from kdsl.runtime.arrays import zeros_like as device_zeros_like

        return device_zeros_like(a)
    data = host_data(a)
    return np.zeros(data.shape, data.dtype)


def empty_like(a: Any) -> Any:
    if on_cuda(a):
        from kdsl.runtime.arrays import empty

        return empty(a.shape, a.dtype, "cuda")
    data = host_data(a)
    return np.empty(data.shape, data.dtype)


def ones_like(a: Any) -> Any:
    if on_cuda(a):
        from kdsl.runtime.arrays import ones

        return ones(a.shape, a.dtype, "cuda")
    data = host_data(a)
    return np.ones(data.shape, data.dtype)


def overlaps(a: Any, b: Any) -> bool:
    """Whether two arrays (on the same device) may share memory."""
    if on_cuda(a) or on_cuda(b):
        if on_cuda(a) != on_cuda(b):
            return False
        return bool(a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes)
    return bool(np.may_share_memory(host_data(a), host_data(b)))


def fill_zero(a: Any) -> None:
    if on_cuda(a):
        from kdsl.runtime.cuda.driver import get_driver

        get_driver().memset(a.ptr, a.nbytes, 0)
    else:
        a.numpy()[...] = 0


def add_gradient(leaf: Any, adjoint: Any) -> None:
    """``leaf.grad += adjoint`` (``leaf.grad`` made on first use)."""
    if leaf.grad is None:
        leaf.grad = adjoint if on_cuda(leaf) else DeviceArray(adjoint)
        return
    if on_cuda(leaf):
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

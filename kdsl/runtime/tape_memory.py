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
        self.lock = threading.Lock()  # around changes of ``free`` (taking one is atomic)

    @property
    def bytes(self) -> int:
        """The bytes of the free arrays."""
        with self.lock:
            return sum(len(free) * _nbytes(shape, dtype) for (shape, dtype), free in self.free.items())

    def copy(self, data: np.ndarray) -> np.ndarray:
        """A C-contiguous copy of ``data``."""
        if data.nbytes < self.smallest:
            return data.copy()
        found = self.free.get((data.shape, data.dtype))
        out = None
        if found:
            try:
                out = found.pop()
            except IndexError:  # taken by another thread since
                pass
        if out is None:
            out = self._of_the_same_size(data)
        if out is None:
            return np.array(data, copy=True, order="C")
        out[...] = data
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
        out[...] = data  # the same as np.copyto, at half its cost for small arrays
        return out

    def _of_the_same_size(self, data: np.ndarray) -> np.ndarray | None:
        """A free array of ``data``'s size in bytes, seen with its shape and dtype."""
        with self.lock:
            for free in self.free.values():
                if free and free[-1].nbytes == data.nbytes:
                    owner = free.pop()
                    break
            else:
                return None
        return owner.reshape(-1).view(np.uint8).view(data.dtype).reshape(data.shape)

    def give(self, arrays: list[Any]) -> None:
        """Keeps the memory of the NumPy arrays of ``arrays`` nothing else holds."""
        kept = []
        smallest, refcount, ndarray = self.smallest, sys.getrefcount, np.ndarray
        while arrays:
            a = arrays.pop()
            # held by ``a`` and getrefcount's argument only
            if type(a) is not ndarray or refcount(a) > 2 or a.nbytes < smallest:
                continue
            owner = a.base
            if owner is None:  # an array that owns its memory
                if not a.flags.c_contiguous:
                    continue
            else:  # a view (of a free array of another shape)
                if not (type(owner) is ndarray and owner.base is None
                        and owner.flags.c_contiguous and owner.nbytes == a.nbytes):
                    continue
                if not a.flags.c_contiguous:
                    a = owner
            kept.append(a)
        if not kept:
            return
        room = self.limit - self.bytes
        with self.lock:
            for a in kept:
                room -= a.nbytes
                if room < 0:
                    break
                self.free.setdefault((a.shape, a.dtype), []).append(a)


def _nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    count = 1
    for n in shape:
        count *= n
    return count * dtype.itemsize


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


def share_elements(a: Any, b: Any) -> bool:
    """Whether two arrays have an element in common (``overlaps`` also holds for views
    that interleave, such as two columns of one array)."""
    if on_cuda(a) or on_cuda(b):
        return overlaps(a, b)
    first, second = host_data(a), host_data(b)
    return bool(np.may_share_memory(first, second) and np.shares_memory(first, second))


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

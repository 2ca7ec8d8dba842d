"""Halo exchange: filling each local array's ghost layers from the neighbouring blocks.

The axes are exchanged one after the other, each face spanning the whole array along the
other axes, ghosts included, so the corner and edge ghosts arrive in two or three hops.
Every message is a non-blocking send or receive:

- C-contiguous host arrays (what ``Grid.zeros`` makes) are sent straight from their
  memory: each face is an MPI subarray datatype over the array, so MPI reads and writes
  the faces in place (a contiguous face is one block of memory; MPI packs a strided one
  itself). The requests are persistent, made once per array and reused.
- Other arrays go through reused contiguous buffers: strided host faces are packed with
  NumPy; faces of CUDA arrays are packed on the device by a kdsl kernel, and the device
  buffers are handed to MPI through ``__cuda_array_interface__`` where the MPI is
  CUDA-aware, or staged through host buffers otherwise.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

import kdsl as kd
from kdsl.distributed.mpi_runtime import mpi
from kdsl.records import dataclass

if TYPE_CHECKING:
    from kdsl.distributed.cartesian import Grid

#: Plans kept per grid: arrays exchanged in turn (fields of a simulation) reuse theirs.
PLANS_KEPT = 16


def face_slices(grid: Grid, shape: tuple[int, ...], axis: int, width: int
                ) -> dict[str, tuple[slice, ...]]:
    """The four faces of a local array along ``axis``: the interior layers sent to the low
    and high neighbours and the ghost layers received from them."""
    g, n = grid.ghost, grid.local_shape[axis]
    ranges = {
        "send_low": (g, g + width), "send_high": (g + n - width, g + n),
        "recv_low": (g - width, g), "recv_high": (g + n, g + n + width),
    }
    whole = [slice(0, s) for s in shape]
    faces = {}
    for name, (start, stop) in ranges.items():
        index = list(whole)
        index[axis] = slice(start, stop)
        faces[name] = tuple(index)
    return faces


def _tags(axis: int) -> tuple[int, int]:
    """Tags of messages moving up (to the high neighbour) and down along ``axis``."""
    return 2 * axis, 2 * axis + 1


def cuda_aware() -> bool:
    """Whether MPI can read and write CUDA device memory (KDSL_MPI_CUDA_AWARE=0/1
    overrides what the MPI library reports)."""
    override = os.environ.get("KDSL_MPI_CUDA_AWARE")
    if override in ("0", "1"):
        return override == "1"
    query = getattr(mpi(), "Query_cuda_support", None)
    try:
        return bool(query()) if query is not None else False
    except Exception:  # an MPI without the MPIX extension
        return False


# --- plans ------------------------------------------------------------------------------


@dataclass
class DirectPlan:
    """Persistent requests over a C-contiguous host array, one set per axis; an axis
    along which the rank is its own neighbour (periodic, one block) is copied locally."""

    requests: list[list[Any]]
    datatypes: list[Any]
    self_copies: list[list[tuple[tuple[slice, ...], tuple[slice, ...]]]]

    def run(self, array: np.ndarray) -> None:
        MPI = mpi()
        for axis_requests, copies in zip(self.requests, self.self_copies):
            if axis_requests:
                MPI.Prequest.Startall(axis_requests)
                MPI.Request.Waitall(axis_requests)
            for destination, source in copies:
                array[destination] = array[source]

    def free(self) -> None:
        for axis_requests in self.requests:
            for request in axis_requests:
                request.Free()
        for datatype in self.datatypes:
            datatype.Free()


def _make_direct_plan(grid: Grid, array: np.ndarray, width: int) -> DirectPlan:
    MPI = mpi()
    from mpi4py.util.dtlib import from_numpy_dtype

    base = from_numpy_dtype(array.dtype)
    memory = MPI.buffer.fromaddress(array.ctypes.data, array.nbytes)
    shape = list(array.shape)
    requests: list[list[Any]] = []
    datatypes: list[Any] = []
    self_copies: list[list[tuple[tuple[slice, ...], tuple[slice, ...]]]] = []
    for axis in range(grid.ndim):
        low, high = grid.neighbours[axis]
        axis_requests: list[Any] = []
        copies = []
        if low == high == grid.rank:
            faces = face_slices(grid, array.shape, axis, width)
            copies = [(faces["recv_low"], faces["send_high"]),
                      (faces["recv_high"], faces["send_low"])]
        elif not (low == MPI.PROC_NULL and high == MPI.PROC_NULL):
            up, down = _tags(axis)
            faces = face_slices(grid, array.shape, axis, width)
            types = {}
            for name, index in faces.items():
                sizes = [s.stop - s.start for s in index]
                starts = [s.start for s in index]
                datatype = base.Create_subarray(shape, sizes, starts).Commit()
                types[name] = datatype
                datatypes.append(datatype)
            axis_requests = [
                grid.comm.Recv_init([memory, 1, types["recv_low"]], low, up),
                grid.comm.Recv_init([memory, 1, types["recv_high"]], high, down),
                grid.comm.Send_init([memory, 1, types["send_high"]], high, up),
                grid.comm.Send_init([memory, 1, types["send_low"]], low, down),
            ]
        requests.append(axis_requests)
        self_copies.append(copies)
    return DirectPlan(requests, datatypes, self_copies)


@dataclass
class PackedPlan:
    """Contiguous buffers per face, reused for every exchange of one array."""

    device_buffers: dict[tuple[int, str], Any] = field(default_factory=dict)
    host_buffers: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)

    def free(self) -> None:
        self.device_buffers.clear()
        self.host_buffers.clear()


def _is_cuda(array: Any) -> bool:
    return getattr(array, "device", "cpu") == "cuda"


def _host_buffer(plan: PackedPlan, key: tuple[int, str], face: Any) -> np.ndarray:
    buffer = plan.host_buffers.get(key)
    if buffer is None:
        buffer = plan.host_buffers[key] = np.empty(face.shape, face.dtype)
    return buffer


def _device_buffer(plan: PackedPlan, key: tuple[int, str], face: Any) -> Any:
    """``face`` itself when it is contiguous, else a reused contiguous device buffer."""
    if face.flags_c_contiguous:
        return face
    buffer = plan.device_buffers.get(key)
    if buffer is None:
        buffer = plan.device_buffers[key] = kd.empty(face.shape, face.dtype, device="cuda")
    return buffer


def _message_buffer(plan: PackedPlan, key: tuple[int, str], face: Any,
                    through_device: bool) -> Any:
    """The contiguous buffer MPI reads or writes for ``face``: a host buffer for host
    arrays and for staged CUDA arrays, the device buffer (or face) when MPI is CUDA-aware."""
    if _is_cuda(face) and through_device:
        return _device_buffer(plan, key, face)
    return _host_buffer(plan, key, face)


def _pack(plan: PackedPlan, key: tuple[int, str], face: Any, buffer: Any) -> None:
    """Copies a face to be sent into its message buffer."""
    if not _is_cuda(face):
        np.copyto(buffer, face)
        return
    device = _device_buffer(plan, key, face)
    if device is not face:
        copy_strided(device, face)                 # packed on the device
    if device is not buffer:
        _copy_to_host(buffer, device)              # staged through the host


def _unpack(plan: PackedPlan, key: tuple[int, str], face: Any, buffer: Any) -> None:
    """Copies a received message buffer into its ghost face."""
    if not _is_cuda(face):
        np.copyto(face, buffer)
        return
    device = _device_buffer(plan, key, face)
    if device is not buffer:
        _copy_to_device(device, buffer)            # staged through the host
    if device is not face:
        copy_strided(face, device)                 # unpacked on the device


def _run_packed(grid: Grid, plan: PackedPlan, array: Any, width: int) -> None:
    MPI = mpi()
    through_device = _is_cuda(array) and cuda_aware()
    for axis in range(grid.ndim):
        low, high = grid.neighbours[axis]
        if low == MPI.PROC_NULL and high == MPI.PROC_NULL:
            continue
        up, down = _tags(axis)
        faces = {name: array[index]
                 for name, index in face_slices(grid, array.shape, axis, width).items()}
        buffers = {name: _message_buffer(plan, (axis, name), face, through_device)
                   for name, face in faces.items()}
        for name in ("send_low", "send_high"):
            _pack(plan, (axis, name), faces[name], buffers[name])
        if through_device:
            kd.synchronize()                       # MPI reads what the kernels wrote
        MPI.Request.Waitall([
            grid.comm.Irecv(buffers["recv_low"], low, up),
            grid.comm.Irecv(buffers["recv_high"], high, down),
            grid.comm.Isend(buffers["send_high"], high, up),
            grid.comm.Isend(buffers["send_low"], low, down),
        ])
        for name, neighbour in (("recv_low", low), ("recv_high", high)):
            if neighbour != MPI.PROC_NULL:
                _unpack(plan, (axis, name), faces[name], buffers[name])


def _copy_to_host(host: np.ndarray, device: Any) -> None:
    from kdsl.runtime.cuda.driver import get_driver

    get_driver().copy_to_host(host, device.ptr)


def _copy_to_device(device: Any, host: np.ndarray) -> None:
    from kdsl.runtime.cuda.driver import get_driver

    get_driver().copy_to_device(device.ptr, host)


# --- packing kernels (CUDA faces; any layout, any element type) ---------------------------


@kd.kernel
def _copy_1d(dst, src):  # type: ignore[no-untyped-def]
    for i in kd.prange(src.shape[0]):
        dst[i] = src[i]


@kd.kernel
def _copy_2d(dst, src):  # type: ignore[no-untyped-def]
    for i, j in kd.ndrange(src.shape[0], src.shape[1]):
        dst[i, j] = src[i, j]


@kd.kernel
def _copy_3d(dst, src):  # type: ignore[no-untyped-def]
    for i, j, k in kd.ndrange(src.shape[0], src.shape[1], src.shape[2]):
        dst[i, j, k] = src[i, j, k]


@kd.kernel
def _copy_4d(dst, src):  # type: ignore[no-untyped-def]
    for i, j, k in kd.ndrange(src.shape[0], src.shape[1], src.shape[2]):
        for m in range(src.shape[3]):
            dst[i, j, k, m] = src[i, j, k, m]


_COPY_KERNELS = {1: _copy_1d, 2: _copy_2d, 3: _copy_3d, 4: _copy_4d}


def copy_strided(dst: Any, src: Any) -> None:
    """``dst[...] = src`` for two arrays of one shape on one device, by a kdsl kernel."""
    if src.size:
        _COPY_KERNELS[src.ndim](dst, src)


# --- entry point --------------------------------------------------------------------------


class ExchangeCache:
    """The plans of the arrays a grid exchanged last (least recently used dropped)."""

    def __init__(self) -> None:
        self._plans: OrderedDict[tuple[Any, ...], DirectPlan | PackedPlan] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> DirectPlan | PackedPlan | None:
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
        return plan

    def put(self, key: tuple[Any, ...], plan: DirectPlan | PackedPlan) -> None:
        self._plans[key] = plan
        while len(self._plans) > PLANS_KEPT:
            _, dropped = self._plans.popitem(last=False)
            dropped.free()


def _layout_key(array: Any, width: int) -> tuple[Any, ...]:
    if _is_cuda(array):
        return ("cuda", array.ptr, array.shape, array.strides, array.dtype.str, width)
    return ("host", array.ctypes.data, array.shape, array.strides, array.dtype.str, width)


def halo_exchange(grid: Grid, array: Any, width: int) -> None:
    """Fills ``width`` ghost layers of ``array`` on every side from the neighbours."""
    if isinstance(width, bool) or not isinstance(width, int) or not 0 <= width <= grid.ghost:
        raise ValueError(f"halo_exchange width must be an integer from 0 to the grid's ghost "
                         f"width {grid.ghost}, got {width!r}")
    if not _is_cuda(array):
        if isinstance(array, kd.DeviceArray) or not isinstance(array, np.ndarray):
            array = np.asarray(array)
    grid.check_local(array)
    if width == 0 or array.size == 0:
        return
    key = _layout_key(array, width)
    plan = grid._exchanges.get(key)
    if plan is None:
        direct = not _is_cuda(array) and array.flags.c_contiguous
        plan = _make_direct_plan(grid, array, width) if direct else PackedPlan()
        grid._exchanges.put(key, plan)
    if isinstance(plan, DirectPlan):
        if not array.flags.writeable:
            raise ValueError("halo_exchange needs a writeable array")
        plan.run(array)
    else:
        _run_packed(grid, plan, array, width)

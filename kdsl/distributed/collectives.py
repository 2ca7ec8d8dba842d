"""Operations over all ranks: reductions of kernel results, gathering a distributed field
to one rank (for output) and scattering one to its owners."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl.distributed.mpi_runtime import default_comm, mpi
from kdsl.runtime.arrays import _numpy_dtype

if TYPE_CHECKING:
    from kdsl.distributed.cartesian import Grid

_OPS = ("sum", "prod", "min", "max")


def _mpi_op(op: str) -> Any:
    MPI = mpi()
    if op not in _OPS:
        raise ValueError(f"allreduce op must be one of {', '.join(map(repr, _OPS))}, got {op!r}")
    return {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}[op]


def allreduce(x: Any, op: str = "sum", comm: Any = None) -> Any:
    """``x`` (a kernel's scalar or vector result) combined over all ranks of ``comm``.

    A Python number comes back as a Python number, a NumPy scalar or array with its own
    dtype: a float32 result is summed in float32, as a kernel's reduction is.
    """
    mpi_op = _mpi_op(op)
    comm = default_comm(comm)
    if isinstance(x, bool):  # as Python's sum, min and max of bools
        total = int(comm.allreduce(int(x), op=mpi_op))
        return total if op == "sum" else bool(total)
    if isinstance(x, (int, float)) and not isinstance(x, np.generic):
        return type(x)(comm.allreduce(x, op=mpi_op))
    value = np.asarray(x)
    if value.dtype == object or value.dtype.kind not in "biufc":
        raise TypeError(f"allreduce needs a number or an array of numbers, got {type(x).__name__}")
    if value.dtype.kind == "b":  # as NumPy: a sum of bools counts them (int64)
        counts = allreduce(value.astype(np.int64), op, comm)
        return counts if op == "sum" else counts.astype(np.bool_)
    send = np.array(value, order="C")
    result = np.empty_like(send)
    comm.Allreduce(send, result, op=mpi_op)
    return result[()] if value.ndim == 0 else result


def _host(array: Any) -> np.ndarray:
    return array.numpy() if hasattr(array, "numpy") else np.asarray(array)


def _block_shapes(grid: Grid, trailing: tuple[int, ...]) -> list[tuple[tuple[slice, ...],
                                                                          tuple[int, ...]]]:
    """Every rank's global block and the shape of its interior, in rank order."""
    blocks = []
    for rank in range(grid.comm.Get_size()):
        block = grid.block_of(grid.comm.Get_coords(rank))
        blocks.append((block, tuple(s.stop - s.start for s in block) + trailing))
    return blocks


def gather(grid: Grid, array: Any, root: int = 0) -> np.ndarray | None:
    """The global field (interiors only) assembled on ``root``; None elsewhere."""
    grid.check_local(array)
    interior = np.ascontiguousarray(_host(array[grid.interior]))
    trailing = interior.shape[grid.ndim:]
    blocks = _block_shapes(grid, trailing)
    counts = [int(np.prod(shape)) for _, shape in blocks]
    if grid.comm.Get_rank() != root:
        grid.comm.Gatherv(interior, None, root=root)
        return None
    received = np.empty(sum(counts), interior.dtype)
    grid.comm.Gatherv(interior, [received, counts], root=root)
    result = np.empty(grid.shape + trailing, interior.dtype)
    offset = 0
    for (block, shape), count in zip(blocks, counts):
        result[block] = received[offset:offset + count].reshape(shape)
        offset += count
    return result


def scatter(grid: Grid, global_array: np.ndarray | None, root: int = 0,
            dtype: Any = None) -> np.ndarray:
    """A local array (ghosts zero) holding this rank's block of ``root``'s global array."""
    if grid.comm.Get_rank() == root:
        if global_array is None or tuple(np.shape(global_array))[:grid.ndim] != grid.shape:
            raise ValueError(f"scatter needs the global array of shape {grid.shape} on the "
                             f"root rank, got {None if global_array is None else np.shape(global_array)}")
        source = np.asarray(global_array if dtype is None
                            else np.asarray(global_array, _numpy_dtype(dtype)[0]))
        header = (source.dtype.str, source.shape[grid.ndim:])
    else:
        header = None
    dtype_str, trailing = grid.comm.bcast(header, root=root)
    blocks = _block_shapes(grid, tuple(trailing))
    counts = [int(np.prod(shape)) for _, shape in blocks]
    if grid.comm.Get_rank() == root:
        send = np.concatenate([np.ascontiguousarray(source[block]).ravel()
                               for block, _ in blocks])
        message: Any = [send, counts]
    else:
        message = None
    rank = grid.comm.Get_rank()
    received = np.empty(counts[rank], np.dtype(dtype_str))
    grid.comm.Scatterv(message, received, root=root)
    local = np.zeros(tuple(n + 2 * grid.ghost for n in grid.local_shape) + tuple(trailing),
                     np.dtype(dtype_str))
    local[grid.interior] = received.reshape(blocks[rank][1])
    return local

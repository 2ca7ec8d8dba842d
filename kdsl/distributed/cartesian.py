"""A global 1-, 2- or 3-D grid split over the ranks of a communicator on a Cartesian
topology (``MPI.Cart``): which block each rank owns, its neighbours, its local arrays."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from kdsl.distributed import collectives, halo
from kdsl.distributed.mpi_runtime import default_comm, mpi
from kdsl.runtime.arrays import _numpy_dtype


def split_extent(n: int, parts: int) -> list[int]:
    """Starts of ``parts`` nearly equal blocks of ``range(n)`` (the first ``n % parts``
    blocks one longer), and ``n`` at the end."""
    base, extra = divmod(n, parts)
    starts = [0]
    for k in range(parts):
        starts.append(starts[-1] + base + (1 if k < extra else 0))
    return starts


def _check_shape(shape: Any) -> tuple[int, ...]:
    items = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    if not 1 <= len(items) <= 3:
        raise ValueError(f"Grid shape must have 1, 2 or 3 axes, got {shape!r}")
    for n in items:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"Grid shape must be positive integers, got {shape!r}")
    return tuple(int(n) for n in items)


def _per_axis(value: Any, ndim: int, name: str) -> tuple[bool, ...]:
    if isinstance(value, (bool, np.bool_)):
        return (bool(value),) * ndim
    items = tuple(value)
    if len(items) != ndim or not all(isinstance(v, (bool, np.bool_)) for v in items):
        raise ValueError(f"Grid {name} must be a bool or {ndim} bools, got {value!r}")
    return tuple(bool(v) for v in items)


class Grid:
    """A global grid of ``shape`` cells split into blocks, one per rank of ``comm``.

    Each rank's local arrays (``grid.zeros``) hold its block plus ``ghost`` layers of
    cells on every side; ``halo_exchange`` fills the ghosts from the neighbouring blocks
    (across the edges too where ``periodic``), ``gather`` assembles the global array.
    """

    shape: tuple[int, ...]
    ghost: int
    periodic: tuple[bool, ...]
    dims: tuple[int, ...]
    comm: Any
    rank: int
    coords: tuple[int, ...]
    starts: tuple[list[int], ...]
    local_slices: tuple[slice, ...]
    local_shape: tuple[int, ...]
    neighbours: tuple[tuple[int, int], ...]

    def __init__(self, shape: Any, ghost: int = 1, periodic: bool | Sequence[bool] = False,
                 comm: Any = None, dims: Sequence[int] | None = None) -> None:
        MPI = mpi()
        self.shape = _check_shape(shape)
        ndim = len(self.shape)
        if isinstance(ghost, bool) or not isinstance(ghost, numbers.Integral) or ghost < 0:
            raise ValueError(f"Grid ghost must be a non-negative integer, got {ghost!r}")
        self.ghost = int(ghost)
        self.periodic = _per_axis(periodic, ndim, "periodic")
        parent = default_comm(comm)
        size = parent.Get_size()
        if dims is None:
            dims = MPI.Compute_dims(size, ndim)
        self.dims = tuple(int(d) for d in dims)
        if len(self.dims) != ndim or int(np.prod(self.dims)) != size:
            raise ValueError(f"Grid dims {tuple(dims)} must have {ndim} entries whose product "
                             f"is the number of ranks ({size})")
        for n, d in zip(self.shape, self.dims):
            if n < d * max(self.ghost, 1):
                raise ValueError(f"Grid shape {self.shape} is too small for {self.dims} blocks "
                                 f"of at least {max(self.ghost, 1)} cells")
        self.comm = parent.Create_cart(list(self.dims), periods=list(self.periodic),
                                       reorder=False)
        self.rank = self.comm.Get_rank()
        self.coords = tuple(int(c) for c in self.comm.Get_coords(self.rank))
        #: ``starts[axis][k]``: the first global index of block ``k`` along ``axis``.
        self.starts = tuple(split_extent(n, d) for n, d in zip(self.shape, self.dims))
        self.local_slices = tuple(slice(s[c], s[c + 1]) for s, c in zip(self.starts,
                                                                         self.coords))
        self.local_shape = tuple(s.stop - s.start for s in self.local_slices)
        #: ``(low, high)`` neighbour ranks along each axis; ``MPI.PROC_NULL`` at a closed edge.
        self.neighbours = tuple((int(low), int(high)) for low, high in
                                (self.comm.Shift(axis, 1) for axis in range(ndim)))
        self._exchanges: halo.ExchangeCache = halo.ExchangeCache()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def origin(self) -> tuple[int, ...]:
        """The global index of element ``(0, ...)`` of a local array (its first ghost)."""
        return tuple(s.start - self.ghost for s in self.local_slices)

    @property
    def interior(self) -> tuple[slice, ...]:
        """The index of the interior (this rank's block) within a local array."""
        g = self.ghost
        return tuple(slice(g, g + n) for n in self.local_shape)

    def local_array_shape(self, dtype: Any = np.float32) -> tuple[int, ...]:
        """The shape of a local array of element type ``dtype`` (ghosts included)."""
        _, trailing = _numpy_dtype(dtype)
        return tuple(n + 2 * self.ghost for n in self.local_shape) + trailing

    def zeros(self, dtype: Any = np.float32, device: str = "cpu") -> Any:
        """A zero local array (ghosts included) of a NumPy or kdsl element type; vector
        types add trailing axes, as ``kd.zeros`` does."""
        np_dtype, _ = _numpy_dtype(dtype)
        shape = self.local_array_shape(dtype)
        if device == "cpu":
            return np.zeros(shape, np_dtype)
        import kdsl as kd

        return kd.zeros(shape, np_dtype, device=device)

    def full(self, fill_value: Any, dtype: Any = np.float32, device: str = "cpu") -> Any:
        """A local array (ghosts included) filled with ``fill_value``."""
        np_dtype, _ = _numpy_dtype(dtype)
        shape = self.local_array_shape(dtype)
        if device == "cpu":
            return np.full(shape, fill_value, np_dtype)
        import kdsl as kd

        return kd.full(shape, fill_value, np_dtype, device=device)

    def scatter(self, global_array: np.ndarray | None, root: int = 0,
                dtype: Any = None) -> np.ndarray:
        """A local array (ghosts zero) holding this rank's block of ``global_array``, which
        only ``root`` needs to pass."""
        return collectives.scatter(self, global_array, root, dtype)

    def halo_exchange(self, array: Any, width: int | None = None) -> None:
        """Fills the ghost layers of ``array`` (``width`` of them, all by default) with the
        neighbours' interior cells; ghosts at a closed edge are left as they are."""
        halo.halo_exchange(self, array, self.ghost if width is None else width)

    def gather(self, array: Any, root: int = 0) -> np.ndarray | None:
        """The global array (interiors only) on ``root``; None on the other ranks."""
        return collectives.gather(self, array, root)

    def block_of(self, coords: Sequence[int]) -> tuple[slice, ...]:
        """The global index slices of the block at Cartesian ``coords``."""
        return tuple(slice(s[c], s[c + 1]) for s, c in zip(self.starts, coords))

    def check_local(self, array: Any, name: str = "array") -> None:
        """Raises ValueError unless ``array`` has the shape of this grid's local arrays."""
        shape = tuple(array.shape)
        expected = tuple(n + 2 * self.ghost for n in self.local_shape)
        if shape[:self.ndim] != expected:
            raise ValueError(f"{name} has shape {shape}; a local array of this grid has "
                             f"{expected} on its first {self.ndim} axes (ghosts included)")

    def __repr__(self) -> str:
        return (f"Grid(shape={self.shape}, ghost={self.ghost}, periodic={self.periodic}, "
                f"dims={self.dims}, rank {self.rank} at {self.coords} owns "
                f"{self.local_slices})")

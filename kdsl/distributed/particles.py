"""Particles over a decomposed domain: each rank keeps the particles inside its block of
the grid, hands those that left it to their new owners (migration), and receives copies
of the other ranks' particles within a cutoff of its block (ghosts), for short-range
particle methods.

Particles live in the box ``[0, box[0]) x ...``, which the grid's cells tile: a particle
belongs to the rank whose block holds the cell it is in. Every particle carries a global
id; each rank keeps its particles, and its ghosts, in increasing id order, so the local
order does not depend on how many ranks there are.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl.records import dataclass

if TYPE_CHECKING:
    from kdsl.distributed.cartesian import Grid


def exchange_rows(comm: Any, arrays: Sequence[np.ndarray], rows: np.ndarray,
                  destinations: np.ndarray) -> list[np.ndarray]:
    """Sends row ``rows[k]`` of every array to rank ``destinations[k]`` (a row may go to
    several ranks) and returns the rows this rank received, in source-rank order.

    The rows of all arrays travel together, as bytes: one ``Alltoall`` of the counts and
    one ``Alltoallv``, however many arrays there are.
    """
    order = np.argsort(destinations, kind="stable")
    rows, destinations = rows[order], destinations[order]
    size = comm.Get_size()
    send_counts = np.bincount(destinations, minlength=size).astype(np.int64)
    recv_counts = np.empty(size, np.int64)
    comm.Alltoall(send_counts, recv_counts)
    row_bytes = [int(np.prod(a.shape[1:], dtype=np.int64)) * a.itemsize for a in arrays]
    record = sum(row_bytes)
    send = np.empty((len(rows), record), np.uint8)
    column = 0
    for array, width in zip(arrays, row_bytes):
        picked = np.ascontiguousarray(array[rows])
        send[:, column:column + width] = picked.view(np.uint8).reshape(len(rows), width)
        column += width
    received = np.empty((int(recv_counts.sum()), record), np.uint8)
    comm.Alltoallv([send, send_counts * record], [received, recv_counts * record])
    result = []
    column = 0
    for array, width in zip(arrays, row_bytes):
        part = np.ascontiguousarray(received[:, column:column + width])
        result.append(part.view(array.dtype).reshape((len(received),) + array.shape[1:]))
        column += width
    return result


@dataclass
class Ghosts:
    """Copies of other ranks' particles near this rank's block, in increasing id order (a
    particle seen through two periodic images appears twice)."""

    pos: np.ndarray
    ids: np.ndarray
    fields: dict[str, np.ndarray]

    @property
    def n(self) -> int:
        return len(self.ids)


class Particles:
    """The particles a rank owns: positions ``pos`` (n, ndim), ids, and named per-particle
    ``fields`` (first axis n). Construct on every rank with any share of the particles
    (all on one rank, or some on each): they are sent to their owners at once.
    """

    def __init__(self, grid: Grid, pos: np.ndarray, *, box: Any = None,
                 ids: np.ndarray | None = None, **fields: np.ndarray) -> None:
        self.grid = grid
        self.box = self._check_box(box)
        self.pos = self._check_pos(pos)
        n = len(self.pos)
        self.fields: dict[str, np.ndarray] = {}
        for name, values in fields.items():
            values = np.ascontiguousarray(values)
            if values.ndim == 0 or len(values) != n:
                raise ValueError(f"particle field {name!r} must have {n} rows (one per "
                                 f"particle), got shape {np.shape(values)}")
            self.fields[name] = values
        if ids is None:
            first = grid.comm.exscan(n) if grid.comm.Get_size() > 1 else 0
            ids = np.arange(n, dtype=np.int64) + (first or 0)
        self.ids = np.asarray(ids, np.int64)
        if self.ids.shape != (n,):
            raise ValueError(f"particle ids must have shape ({n},), got {self.ids.shape}")
        self.migrate()

    # --- checks -----------------------------------------------------------------------

    def _check_box(self, box: Any) -> np.ndarray:
        ndim = self.grid.ndim
        if box is None:
            return np.array(self.grid.shape, np.float64)
        values = np.broadcast_to(np.asarray(box, np.float64), (ndim,)).copy() \
            if np.ndim(box) == 0 else np.asarray(box, np.float64)
        if values.shape != (ndim,) or not np.all(values > 0) or not np.all(np.isfinite(values)):
            raise ValueError(f"Particles box must be a positive number or {ndim} of them, "
                             f"got {box!r}")
        return values

    def _check_pos(self, pos: Any) -> np.ndarray:
        if getattr(pos, "device", "cpu") != "cpu":
            raise ValueError("Particles keeps its arrays on the host: pass NumPy arrays")
        pos = np.ascontiguousarray(pos)
        if pos.ndim != 2 or pos.shape[1] != self.grid.ndim or pos.dtype.kind != "f":
            raise ValueError(f"particle positions must be a float array of shape (n, "
                             f"{self.grid.ndim}), got {pos.dtype} {pos.shape}")
        return pos

    # --- geometry ---------------------------------------------------------------------

    @property
    def n(self) -> int:
        """Particles on this rank."""
        return len(self.ids)

    def total(self) -> int:
        """Particles on all ranks (collective)."""
        return int(self.grid.comm.allreduce(self.n))

    def __getitem__(self, name: str) -> np.ndarray:
        return self.fields[name]

    def block_bounds(self, coords: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of the block at Cartesian ``coords``, in box units."""
        grid = self.grid
        lo = np.array([s[c] / n for s, c, n in zip(grid.starts, coords, grid.shape)])
        hi = np.array([s[c + 1] / n for s, c, n in zip(grid.starts, coords, grid.shape)])
        return lo * self.box, hi * self.box

    def owner_ranks(self, pos: np.ndarray) -> np.ndarray:
        """The rank owning each position (wrapped or clamped into the box first)."""
        grid = self.grid
        coords = []
        for axis in range(grid.ndim):
            x = pos[:, axis].astype(np.float64) / self.box[axis]
            if grid.periodic[axis]:
                x = x - np.floor(x)
            cell = np.clip(np.floor(x * grid.shape[axis]), 0, grid.shape[axis] - 1)
            boundaries = np.asarray(grid.starts[axis][1:-1])
            coords.append(np.searchsorted(boundaries, cell, side="right"))
        if not coords:
            return np.zeros(0, np.int64)
        ranks = np.ravel_multi_index(tuple(coords), grid.dims)
        return np.asarray(ranks, np.int64)

    def wrap_positions(self) -> None:
        """Folds positions on periodic axes back into ``[0, box)``, in place."""
        for axis in range(self.grid.ndim):
            if self.grid.periodic[axis]:
                column = self.pos[:, axis]
                length = column.dtype.type(self.box[axis])
                outside = (column < 0) | (column >= length)
                column[outside] -= length * np.floor(column[outside] / length)
                # a tiny negative coordinate wraps to length - tiny, which can round to
                # length itself: that point is the box's lower edge
                column[column >= length] = 0

    # --- communication ----------------------------------------------------------------

    def _arrays(self) -> list[np.ndarray]:
        return [self.pos, self.ids, *self.fields.values()]

    def _set_arrays(self, arrays: list[np.ndarray]) -> None:
        order = np.argsort(arrays[1], kind="stable")
        self.pos, self.ids = arrays[0][order], arrays[1][order]
        for name, values in zip(self.fields, arrays[2:]):
            self.fields[name] = values[order]

    def migrate(self) -> None:
        """Wraps positions on periodic axes and sends every particle that left this
        rank's block to its owner (collective). Afterwards the local particles are in
        increasing id order."""
        self.wrap_positions()
        owners = self.owner_ranks(self.pos)
        rank = self.grid.comm.Get_rank()
        leaving = np.nonzero(owners != rank)[0]
        staying = np.nonzero(owners == rank)[0]
        received = exchange_rows(self.grid.comm, self._arrays(), leaving, owners[leaving])
        merged = [np.concatenate([a[staying], r]) for a, r in zip(self._arrays(), received)]
        self._set_arrays(merged)

    def ghosts(self, cutoff: float, fields: Sequence[str] = (),
               shift_periodic: bool = True) -> Ghosts:
        """Copies of the particles of other ranks within ``cutoff`` of this rank's block
        (collective), with the named ``fields``.

        With ``shift_periodic`` a particle seen across a periodic edge arrives at its image
        position (moved by the box length), once per image in range; without it, it keeps
        its own position and arrives at most once per rank, for kernels that take the
        minimum image themselves. Ghosts come in increasing id order.
        """
        if not isinstance(cutoff, numbers.Real) or not cutoff >= 0:
            raise ValueError(f"ghosts cutoff must be a non-negative number, got {cutoff!r}")
        unknown = [f for f in fields if f not in self.fields]
        if unknown:
            raise ValueError(f"unknown particle fields {unknown}; this set has "
                             f"{list(self.fields)}")
        grid = self.grid
        me = grid.comm.Get_rank()
        # a cutoff longer than the box reaches images beyond the next box over
        reach = [1 + int(cutoff // length) for length in self.box]
        images = [range(-k, k + 1) if periodic else (0,)
                  for k, periodic in zip(reach, grid.periodic)]
        pos = self.pos.astype(np.float64)
        rows, destinations, shifts = [], [], []
        for rank in range(grid.comm.Get_size()):
            lo, hi = self.block_bounds(grid.comm.Get_coords(rank))
            seen = np.zeros(self.n, bool)
            for image in itertools.product(*images):
                if rank == me and (not shift_periodic or not any(image)):
                    continue
                offset = np.asarray(image, np.float64) * self.box
                shifted = pos + offset
                near = np.all((shifted >= lo - cutoff) & (shifted < hi + cutoff), axis=1)
                if not shift_periodic:
                    near &= ~seen
                    seen |= near
                chosen = np.nonzero(near)[0]
                rows.append(chosen)
                destinations.append(np.full(len(chosen), rank, np.int64))
                shifts.append(np.broadcast_to(offset, (len(chosen), grid.ndim)))
        row_index = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        destination = np.concatenate(destinations) if destinations else np.zeros(0, np.int64)
        offsets = np.concatenate(shifts) if shifts else np.zeros((0, grid.ndim))
        # shifted positions are computed by the sender: one position per row sent
        image_pos = (self.pos[row_index] + offsets.astype(self.pos.dtype)
                     if shift_periodic else self.pos[row_index])
        local_rows = np.arange(len(row_index))
        sent = [image_pos, self.ids[row_index], *(self.fields[f][row_index] for f in fields)]
        received = exchange_rows(grid.comm, sent, local_rows, destination)
        order = np.lexsort(tuple(received[0][:, a] for a in reversed(range(grid.ndim)))
                           + (received[1],))
        return Ghosts(received[0][order], received[1][order],
                      {f: r[order] for f, r in zip(fields, received[2:])})

    def gather(self, root: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
        """All particles' positions and fields on ``root``, in id order; None elsewhere."""
        comm = self.grid.comm
        parts = comm.gather(self._arrays(), root=root)
        if parts is None:
            return None
        merged = [np.concatenate(column) for column in zip(*parts)]
        order = np.argsort(merged[1], kind="stable")
        fields = {name: values[order] for name, values in zip(self.fields, merged[2:])}
        return merged[0][order], fields

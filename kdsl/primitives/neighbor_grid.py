"""``kd.NeighborGrid``: a uniform grid of cells over particles, for neighbour search.

In a kernel, ``grid = kd.NeighborGrid(x, cell_size, lower, upper, periodic=False)``
builds it in parallel (a radix sort of the particles by cell) and
``for j in grid.neighbors(q, radius):`` visits every particle within ``radius`` of
``q`` exactly once (kdsl/primitives/grid_source.py). This class is the same grid in
plain Python: what kernels run as plain Python use, and a reference for tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np


def _vector(value: Any, dim: int, name: str) -> np.ndarray:
    v = np.asarray(value, dtype=np.float64)
    if v.shape != (dim,):
        raise ValueError(f"{name} must have {dim} components, got shape {v.shape}")
    return v


class NeighborGrid:
    """Cells of at least ``cell_size`` tiling ``[lower, upper)``; ``periodic`` wraps the
    domain (distances are then to the nearest image)."""

    def __init__(self, positions: Any, cell_size: float, lower: Any, upper: Any,
                 periodic: bool = False) -> None:
        unwrap = getattr(positions, "__kdsl_array__", None)
        x = np.asarray(unwrap() if callable(unwrap) else positions)
        if x.ndim != 2 or x.shape[1] not in (2, 3):
            raise ValueError(f"positions must be an (n, 2) or (n, 3) array, got shape {x.shape}")
        if not cell_size > 0:
            raise ValueError(f"cell_size must be positive, got {cell_size}")
        dim = x.shape[1]
        self.dtype = x.dtype
        self.periodic = bool(periodic)
        self.lower = _vector(lower, dim, "lower").astype(x.dtype)
        self.extent = (_vector(upper, dim, "upper") - _vector(lower, dim, "lower")).astype(x.dtype)
        if not np.all(self.extent > 0):
            raise ValueError("upper must exceed lower along every axis")
        from kdsl.primitives.grid_source import MAX_CELLS

        with np.errstate(over="ignore"):
            per_axis = np.maximum(np.floor((self.extent / x.dtype.type(cell_size)).astype(np.float64)), 1.0)
        if not np.prod(per_axis) < MAX_CELLS:
            raise ValueError(f"NeighborGrid(): too many cells (each at least cell_size wide; at "
                             f"most {MAX_CELLS - 1}); choose a larger cell_size or a smaller domain")
        self.cells = per_axis.astype(np.int64)
        self.inverse = (self.cells.astype(x.dtype) / self.extent).astype(x.dtype)
        coords = self._cells_of(x)
        keys = np.ravel_multi_index(coords.T, self.cells) if len(x) else np.zeros(0, np.int64)
        self.order = np.argsort(keys, kind="stable")
        self.start = np.searchsorted(keys[self.order], np.arange(int(np.prod(self.cells)) + 1))
        self.sorted_x = x[self.order]

    def _cells_of(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            c = np.floor((x - self.lower) * self.inverse)
        c = np.nan_to_num(c, nan=0.0, posinf=0.0, neginf=0.0).astype(np.int64)
        return c % self.cells if self.periodic else np.clip(c, 0, self.cells - 1)

    def neighbors(self, q: Any, radius: float) -> Iterator[int]:
        """The indices of the particles within ``radius`` of ``q`` (each once), cell by
        cell, as a kernel visits them."""
        q = np.asarray(q, dtype=self.dtype).reshape(-1)
        r = self.dtype.type(radius)
        centre = self._cells_of(q[None, :])[0]
        inverse_extent = (self.dtype.type(1.0) / self.extent).astype(self.dtype)
        ranges = []
        for a in range(len(q)):
            n = int(self.cells[a])
            span = float(r * self.inverse[a])   # as kernels: within [-1, n], NaN as -1
            reach = n if span > n else math.ceil(span) if span >= -1.0 else -1
            if self.periodic:
                start, stop = centre[a] - reach, centre[a] + reach + 1
                if stop - start > n:
                    start, stop = 0, n
                ranges.append([c % n for c in range(start, stop)])
            else:
                ranges.append(list(range(max(centre[a] - reach, 0), min(centre[a] + reach + 1, n))))
        for cell in np.ndindex(*(len(r_) for r_ in ranges)):
            flat = int(np.ravel_multi_index(tuple(ranges[a][k] for a, k in enumerate(cell)),
                                            self.cells))
            for k in range(self.start[flat], self.start[flat + 1]):
                d = self.sorted_x[k] - q
                if self.periodic:
                    d = d - self.extent * np.floor(d * inverse_extent + self.dtype.type(0.5))
                if np.dot(d, d) <= r * r:
                    yield int(self.order[k])

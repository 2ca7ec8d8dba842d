"""Parallel primitives: scans, sorts, binary search and segmented sums."""

from kdsl.primitives.api import argsort, cumsum, searchsorted, segment_sum, sort, sort_by_key
from kdsl.primitives.neighbor_grid import NeighborGrid

__all__ = ["NeighborGrid", "argsort", "cumsum", "searchsorted", "segment_sum", "sort",
           "sort_by_key"]

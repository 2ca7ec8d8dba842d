"""Parallel primitives: scans, sorts, binary search and segmented sums."""

from kdsl.primitives.api import argsort, cumsum, searchsorted, segment_sum, sort, sort_by_key

__all__ = ["argsort", "cumsum", "searchsorted", "segment_sum", "sort", "sort_by_key"]

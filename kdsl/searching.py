"""``kd.argmin`` and ``kd.argmax`` as plain Python (NumPy's): the reference semantics."""

from __future__ import annotations

from typing import Any

import numpy as np


def _plain(a: Any) -> Any:
    unwrap = getattr(a, "__kdsl_array__", None)
    return unwrap() if unwrap is not None else a


def argmin(a: Any, axis: int | None = None) -> Any:
    """The index of the first minimum: flat over the whole array, or along ``axis``
    (NaN counts as the minimum, as in NumPy)."""
    return np.argmin(_plain(a), axis=axis)


def argmax(a: Any, axis: int | None = None) -> Any:
    """The index of the first maximum: flat over the whole array, or along ``axis``
    (NaN counts as the maximum, as in NumPy)."""
    return np.argmax(_plain(a), axis=axis)

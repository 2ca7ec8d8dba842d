"""The bits of a scalar as an unsigned integer of its width: what the radix sort sorts."""

from __future__ import annotations

from typing import Any

import numpy as np


def bits(x: Any) -> Any:
    """``x``'s bits as ``u32`` (4-byte scalars) or ``u64`` (8-byte ones)."""
    value = np.asarray(x)
    return value.view(np.uint32 if value.itemsize == 4 else np.uint64)[()]


def float_from_bits(b: Any) -> Any:
    """The float (``f32`` of a ``u32``, ``f64`` of a ``u64``) whose bits ``b`` are."""
    value = np.asarray(b)
    return value.view(np.float32 if value.itemsize == 4 else np.float64)[()]

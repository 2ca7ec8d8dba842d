"""The bits of a scalar as an unsigned integer of its width: what the radix sort sorts."""

from __future__ import annotations

from typing import Any

import numpy as np


def bits(x: Any) -> Any:
    """``x``'s bits as ``u32`` (4-byte scalars) or ``u64`` (8-byte ones)."""
    value = np.asarray(x)
    return value.view(np.uint32 if value.itemsize == 4 else np.uint64)[()]

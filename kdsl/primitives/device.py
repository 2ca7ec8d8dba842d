"""What the device versions of the primitives call: ops that exist only in CUDA code
(see kdsl/codegen/device_scan.py), with their meaning in NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np


def device_scan(a: Any, out: Any, exclusive: bool) -> None:
    """``out[:]``: the running sums of 1-D ``a`` in ``out``'s type, each with (or, when
    ``exclusive``, without) its own element."""
    sums = np.cumsum(np.asarray(a), dtype=np.asarray(out).dtype)
    out[:] = np.concatenate([[0], sums[:-1]]) if exclusive and len(sums) else sums

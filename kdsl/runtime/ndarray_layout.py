"""Where NumPy keeps an array's data pointer, dimensions and strides in its object.

Compiled entry points read these fields straight from the ``PyArrayObject`` (no
``ctypes`` conversions per call). The offsets are found by probing a live array, so
they follow the running Python and NumPy builds.
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np


@cache
def ndarray_offsets() -> tuple[int, int, int, int]:
    """Byte offsets of (data, nd, dimensions, strides) in a NumPy array object."""
    probe = np.zeros((3, 5), dtype=np.float64)[:, 1:]
    base = id(probe)
    words = (ctypes.c_int64 * 16).from_address(base)
    data = probe.ctypes.data
    data_offset = next(8 * k for k in range(16) if words[k] == data)
    nd_offset = data_offset + 8
    dims_offset = data_offset + 16
    strides_offset = data_offset + 24
    dims = ctypes.cast(words[dims_offset // 8], ctypes.POINTER(ctypes.c_int64))
    strides = ctypes.cast(words[strides_offset // 8], ctypes.POINTER(ctypes.c_int64))
    nd = ctypes.c_int32.from_address(base + nd_offset).value
    if nd != 2 or (dims[0], dims[1]) != (3, 4) or (strides[0], strides[1]) != (40, 8):
        raise RuntimeError("kdsl does not recognise this NumPy build's array layout")
    return data_offset, nd_offset, dims_offset, strides_offset

"""Symbols compiled code links against: the thread count, the print callback, and a
serial stand-in for the OpenMP runtime where libgomp is not installed."""

from __future__ import annotations

import ctypes
import struct
import sys
import warnings
from typing import Any

import numpy as np

from kdsl.runtime.threads import NUM_THREADS

_PRINT_T = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.POINTER(ctypes.c_int8),
                            ctypes.POINTER(ctypes.c_int64))
_REGION_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_GOMP_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                           ctypes.c_uint32)
_INT_T = ctypes.CFUNCTYPE(ctypes.c_int32)
_registered: list[Any] = []


def _format(kind: int, bits: int) -> str:
    if kind == 0:
        return str(bits)
    if kind == 1:
        return str(bits & 0xFFFFFFFFFFFFFFFF)
    if kind in (2, 3):
        value = struct.unpack("<d", struct.pack("<q", bits))[0]
        return str(np.float32(value)) if kind == 3 else repr(value)
    if kind == 4:
        return "True" if bits else "False"
    if kind == 5:
        return ctypes.string_at(bits & 0xFFFFFFFFFFFFFFFF).decode("utf-8")
    return "[" if kind == 6 else "]"


def _print(n: int, kinds: Any, payload: Any) -> None:
    out = []
    in_vector = first_in_vector = False
    for k in range(n):
        kind, bits = kinds[k], payload[k]
        if kind == 6:
            in_vector = first_in_vector = True
            out.append("[")
            continue
        if kind == 7:
            in_vector = False
            out.append("]")
            continue
        if in_vector and not first_in_vector:
            out.append(", ")
        first_in_vector = False
        out.append(_format(kind, bits))
    sys.stdout.write("".join(out) + "\n")


def _serial_gomp(fn: int, data: int, n: int, flags: int) -> None:
    _REGION_T(fn)(data)


def register_runtime_symbols() -> None:
    """Makes the runtime's symbols visible to code loaded into the JIT (once)."""
    if _registered:
        return
    from kdsl.codegen.cpu import llvm, load_openmp

    b = llvm()
    callback = _PRINT_T(_print)
    _registered.append(callback)
    b.add_symbol("kdsl_print", ctypes.cast(callback, ctypes.c_void_p).value)
    b.add_symbol("kdsl_num_threads", ctypes.addressof(NUM_THREADS))
    if not load_openmp():
        warnings.warn("libgomp (the OpenMP runtime) was not found: parallel loops run serially",
                      RuntimeWarning, stacklevel=3)
        fallbacks = [
            ("GOMP_parallel", _GOMP_T(_serial_gomp)),
            ("omp_get_thread_num", _INT_T(lambda: 0)),
            ("omp_get_num_threads", _INT_T(lambda: 1)),
        ]
        for name, fn in fallbacks:
            _registered.append(fn)
            b.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)

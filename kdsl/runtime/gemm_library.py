"""The packed matrix products (``codegen.gemm``) as a library of their own, compiled once
per machine and compiler (then loaded from the disk cache) and loaded when a kernel first
multiplies float matrices: kernels call it through the ``gemm`` hook, a table of entry
points that starts empty, so that a kernel's own compile time does not grow with the
product's code.

``GEMM_SLOTS``: the f32 entry, the f64 entry, and a function that loads the library and
fills the two entries (called by compiled code that finds its entry empty).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

from kdsl.digests import sha256

GEMM_SLOTS = (ctypes.c_void_p * 3)()
ENTRY_SYMBOLS = ("kdsl_gemm_f32", "kdsl_gemm_f64")
INIT_SYMBOL = "kdsl_gemm_init"
_lock = threading.Lock()
_keep_alive: list[Any] = []


def _llvm_ir() -> str:
    from llvmlite import ir

    from kdsl.codegen.gemm import GemmEmitter, host_has_avx512
    from kdsl.codegen.llvm_types import f32, f64
    from kdsl.codegen.runtime_hooks import RuntimeHooks

    module = ir.Module(name="kdsl_gemm")
    hooks = RuntimeHooks.declare(module)
    hooks.emit_init(INIT_SYMBOL)
    for scalar, name in zip((f32, f64), ENTRY_SYMBOLS):
        routines = GemmEmitter(module, hooks, scalar, host_has_avx512())
        routines.entry.name = name
        routines.entry.linkage = ""
    return str(module)


def _key() -> str:
    from kdsl.codegen.cpu import target_description
    from kdsl.codegen.gemm_small import small_b_bytes
    from kdsl.runtime.compiler import compiler_fingerprint

    h = sha256()
    for part in ("kdsl gemm library", compiler_fingerprint(), sys.version, target_description(),
                 str(small_b_bytes())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def load() -> None:
    """Builds (or reads from the disk cache) and loads the library; fills GEMM_SLOTS."""
    with _lock:
        if GEMM_SLOTS[0]:
            return
        from kdsl.codegen.native_code import call_init
        from kdsl.runtime.loading import load_or_build
        from kdsl.runtime.symbols import hook_table

        def build() -> tuple[bytes, bytes | None, dict]:
            from kdsl.codegen import cpu

            code = cpu.compile_to_object(_llvm_ir())
            library = cpu.link_shared_library(code)
            return code, library, {"format": "object" if library is None else "shared"}

        code, _ = load_or_build(_key(), [*ENTRY_SYMBOLS, INIT_SYMBOL], build)
        call_init(code, INIT_SYMBOL, hook_table())
        _keep_alive.append(code)  # never unloaded: kernels hold its addresses
        GEMM_SLOTS[1] = code[ENTRY_SYMBOLS[1]]
        GEMM_SLOTS[0] = code[ENTRY_SYMBOLS[0]]


_LOAD_T = ctypes.CFUNCTYPE(None)
_loader = _LOAD_T(load)


def gemm_slots() -> int:
    """The address of GEMM_SLOTS, its loader in place (for the hook table)."""
    GEMM_SLOTS[2] = ctypes.cast(_loader, ctypes.c_void_p).value
    return ctypes.addressof(GEMM_SLOTS)

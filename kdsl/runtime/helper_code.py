"""Machine code of the runtime's own helpers (the compiled call path's entry points, the
native allocation hooks), built once with llvmlite and kept in the disk cache as a
kernel's code is: a process that finds them there loads them without LLVM.

A helper's code names nothing particular to one process: the addresses it calls and the
objects it compares with reach it at run time (through a table its caller passes, or one
its init function copies, see ``ProcessWords``), so one build serves every process of
this kdsl, Python, NumPy and machine.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl.digests import sha256
from kdsl.runtime.ndarray_layout import ndarray_offsets

if TYPE_CHECKING:
    from kdsl.codegen.native_code import LoadedCode

_loaded: list[LoadedCode] = []  # helpers stay loaded as long as the process


def helper_key(name: str, key_parts: tuple[str, ...]) -> str:
    """The cache key of a helper: its name and what its code depends on besides kdsl's
    own source (``key_parts``)."""
    from kdsl.codegen.cpu import target_description
    from kdsl.runtime.compiler import VERSION, compiler_fingerprint

    h = sha256()
    for part in ("kdsl helper", VERSION, compiler_fingerprint(), sys.version, np.__version__,
                 target_description(), repr(ndarray_offsets()), name, *key_parts):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def load_helper(name: str, symbols: list[str], emit: Callable[[Any], None],
                key_parts: tuple[str, ...] = ()) -> LoadedCode:
    """The loaded code of a helper (the addresses of ``symbols``): from the disk cache,
    or built from the module ``emit`` fills in (an ``llvmlite.ir.Module``) and stored."""
    from kdsl.runtime.loading import load_or_build

    def build() -> tuple[bytes, bytes | None, dict]:
        from llvmlite import ir

        from kdsl.codegen import cpu

        module = ir.Module(name)
        emit(module)
        code = cpu.compile_to_object(str(module))
        library = cpu.link_shared_library(code)
        return code, library, {"format": "object" if library is None else "shared"}

    code, _ = load_or_build(helper_key(name, key_parts), symbols, build)
    code.keep_forever()
    _loaded.append(code)
    return code


class ProcessWords:
    """The values a helper's code reads from a table of words its init function fills in
    (addresses of Python's C API, of objects, of Python callbacks): named when the code
    is emitted, given values in each process."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.index = {name: k for k, name in enumerate(names)}
        self.table: Any = None

    def emit(self, module: Any, init_name: str) -> None:
        """Declares the table in ``module`` and emits ``void init_name(i64* words)``,
        which copies the process's words into it."""
        from llvmlite import ir

        i8, i64 = ir.IntType(8), ir.IntType(64)
        t = ir.ArrayType(i64, len(self.names))
        self.table = ir.GlobalVariable(module, t, f"{init_name}.words")
        self.table.linkage = "internal"
        self.table.initializer = ir.Constant(t, None)
        init = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64.as_pointer()]), init_name)
        b = ir.IRBuilder(init.append_basic_block("entry"))
        memcpy = module.declare_intrinsic("llvm.memcpy", [i8.as_pointer(), i8.as_pointer(), i64])
        b.call(memcpy, [b.bitcast(self.table, i8.as_pointer()), b.bitcast(init.args[0], i8.as_pointer()),
                        ir.Constant(i64, 8 * len(self.names)), ir.Constant(ir.IntType(1), 0)])
        b.ret_void()

    def load(self, b: Any, name: str, offset: Any = None) -> Any:
        """The word ``name`` (``offset`` words after it: an i64 value), as an i64."""
        from llvmlite import ir

        i32 = ir.IntType(32)
        index = ir.Constant(ir.IntType(64), self.index[name])
        if offset is not None:
            index = b.add(index, offset)
        return b.load(b.gep(self.table, [ir.Constant(i32, 0), index]))

    @staticmethod
    def fill(code: LoadedCode, init_name: str, values: list[int]) -> None:
        """Calls the helper's init function with this process's values."""
        words = (ctypes.c_int64 * len(values))(*values)
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(code[init_name])(ctypes.addressof(words))

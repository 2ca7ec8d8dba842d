"""The compiled call path: a specialisation whose arguments are all NumPy arrays is
called through a built-in function made from machine code, which checks each argument
against what the specialisation was compiled for and calls the kernel without ctypes.

The machine code is a set of small entry points (one per argument count), built with
llvmlite once per process and shared by every specialisation: each specialisation is
described to them by a table (a ``bytes`` object, the function's ``self``) of what each
argument must be (exactly ``np.ndarray``, the dtype object, the number of axes, the
contiguity and writeability flags) and the addresses to call. An argument that differs
in anything returns the ``SLOW`` marker, and the caller takes the Python path, which
checks (and reports) everything. A kernel that failed, or that returns values, returns
its status slots as ``bytes``; one that returns nothing returns None.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl import types as T
from kdsl.runtime.ndarray_layout import ndarray_offsets

if TYPE_CHECKING:
    from kdsl.runtime.compiler import CompiledKernel

MAX_ARGUMENTS = 12
MAX_STATUS_SLOTS = 64
_HEADER_WORDS = 11
_WORDS_PER_ARGUMENT = 4
_METH_FASTCALL = 0x80
# NumPy's array flags (numpy/ndarraytypes.h)
C_CONTIGUOUS = 0x1
WRITEABLE = 0x400


class _SlowMarker:
    """What a fast call returns when its arguments need the Python path."""

    def __repr__(self) -> str:
        return "<kdsl slow path>"


SLOW = _SlowMarker()
_build_lock = threading.Lock()


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


@cache
def _layout() -> tuple[int, int, int]:
    """Byte offsets of an object's type, a ``bytes`` object's characters, and (after
    the strides) an array's descr and flags, probed on live objects."""
    probe = b"kdsl-probe-0123456789"
    bytes_offset = next(o for o in range(8, 64, 8)
                        if ctypes.string_at(id(probe) + o, len(probe)) == probe)
    type_word = ctypes.c_void_p.from_address(id(probe) + 8).value
    if type_word != id(bytes):
        raise RuntimeError("kdsl does not recognise this Python build's object layout")
    _, _, _, strides_offset = ndarray_offsets()
    descr_offset, flags_offset = strides_offset + 16, strides_offset + 24
    for array in (np.zeros(4, np.float32), np.zeros((3, 4), np.int64)[:, 1:]):
        array.flags.writeable = array.ndim == 1
        descr = ctypes.c_void_p.from_address(id(array) + descr_offset).value
        flags = ctypes.c_int32.from_address(id(array) + flags_offset).value
        if (descr != id(array.dtype) or bool(flags & C_CONTIGUOUS) != array.flags.c_contiguous
                or bool(flags & WRITEABLE) != array.flags.writeable):
            raise RuntimeError("kdsl does not recognise this NumPy build's array layout")
    return bytes_offset, descr_offset, flags_offset


class _Emitter:
    """Emits the checking entry point for one argument count."""

    def __init__(self, module: Any, count: int) -> None:
        from llvmlite import ir

        self.ir = ir
        self.i8p, self.i32, self.i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        self.count = count
        self.name = f"kdsl_fast_call_{count}"
        signature = ir.FunctionType(self.i8p, [self.i8p, self.i8p.as_pointer(), self.i64])
        self.fn = ir.Function(module, signature, self.name)
        self.memset = module.declare_intrinsic("llvm.memset", [self.i8p, self.i64])
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.slow = self.fn.append_basic_block("slow")
        bytes_offset = _layout()[0]
        self_ = self.fn.args[0]
        self.table = self.b.bitcast(self.b.gep(self_, [self.const(bytes_offset)]),
                                    self.i64.as_pointer())

    def const(self, value: int) -> Any:
        return self.ir.Constant(self.i64, value)

    def word(self, k: int) -> Any:
        return self.b.load(self.b.gep(self.table, [self.const(k)]))

    def field(self, obj: Any, offset: int, t: Any) -> Any:
        return self.b.load(self.b.bitcast(self.b.gep(obj, [self.const(offset)]), t.as_pointer()))

    def call_word(self, k: int, result: Any, args: list[Any]) -> Any:
        """Calls the function whose address is the table's word ``k``."""
        t = self.ir.FunctionType(result, [a.type for a in args])
        return self.b.call(self.b.inttoptr(self.word(k), t.as_pointer()), args)

    def branch_or_slow(self, ok: Any, label: str) -> None:
        block = self.fn.append_basic_block(label)
        self.b.cbranch(ok, block, self.slow)
        self.b.position_at_end(block)

    def checked_arguments(self) -> list[Any]:
        """Each argument, once it is known to be what the table says."""
        _, descr_offset, flags_offset = _layout()
        _, nd_offset, _, _ = ndarray_offsets()
        b, i64 = self.b, self.i64
        _, args, nargs = self.fn.args
        self.branch_or_slow(b.icmp_signed("==", nargs, self.const(self.count)), "counted")
        arguments = []
        for k in range(self.count):
            arg = b.load(b.gep(args, [self.const(k)]))
            arguments.append(arg)
            base = _HEADER_WORDS + _WORDS_PER_ARGUMENT * k
            # the type first: an array's fields are read only from arrays
            self.branch_or_slow(b.icmp_unsigned("==", self.field(arg, 8, i64), self.word(2)),
                                f"array{k}")
            same_descr = b.icmp_unsigned("==", self.field(arg, descr_offset, i64),
                                         self.word(base))
            nd = b.sext(self.field(arg, nd_offset, self.i32), i64)
            same_nd = b.icmp_unsigned("==", nd, self.word(base + 1))
            flags = b.sext(self.field(arg, flags_offset, self.i32), i64)
            same_flags = b.icmp_unsigned("==", b.and_(flags, self.word(base + 2)),
                                         self.word(base + 3))
            self.branch_or_slow(b.and_(same_descr, b.and_(same_nd, same_flags)), f"checked{k}")
        return arguments

    def emit(self) -> None:
        ir, b, i8p, i64 = self.ir, self.b, self.i8p, self.i64
        arguments = self.checked_arguments()
        data_offset = ndarray_offsets()[0]
        slots = self.word(1)
        status = b.alloca(i64, self.const(MAX_STATUS_SLOTS))
        status_bytes = b.bitcast(status, i8p)
        size = b.mul(slots, self.const(8))
        b.call(self.memset, [status_bytes, ir.Constant(ir.IntType(8), 0), size,
                             ir.Constant(ir.IntType(1), 0)])
        # the kernel reads the status slots through an array object's data field
        status_object = b.alloca(i64, self.const(data_offset // 8 + 1))
        b.store(b.ptrtoint(status, i64), b.gep(status_object, [self.const(data_offset // 8)]))
        state = self.call_word(7, i8p, [])  # PyEval_SaveThread: others run meanwhile
        self.call_word(0, ir.VoidType(), [*arguments, b.bitcast(status_object, i8p)])
        self.call_word(8, ir.VoidType(), [state])
        failed = b.icmp_unsigned("!=", b.load(status), self.const(0))
        report = b.or_(failed, b.icmp_unsigned("!=", self.word(9), self.const(0)))
        with b.if_else(report) as (then, otherwise):
            with then:
                b.ret(self.call_word(6, i8p, [status_bytes, size]))  # PyBytes_FromStringAndSize
            with otherwise:
                b.ret(self.new_reference(4))  # None
        b.unreachable()
        b.position_at_end(self.slow)
        b.ret(self.new_reference(3))  # SLOW

    def new_reference(self, k: int) -> Any:
        obj = self.b.inttoptr(self.word(k), self.i8p)
        self.call_word(5, self.ir.VoidType(), [obj])  # Py_IncRef
        return obj


@cache
def _entry_points() -> tuple[dict[int, int], Any]:
    """The addresses of the checking entry points by argument count (and the engine
    that holds their code)."""
    from llvmlite import ir

    from kdsl.codegen.cpu import llvm, target_machine

    binding = llvm()
    module = ir.Module("kdsl_fast_call")
    module.triple = binding.get_process_triple()
    names = {}
    for count in range(MAX_ARGUMENTS + 1):
        emitter = _Emitter(module, count)
        emitter.emit()
        names[count] = emitter.name
    parsed = binding.parse_assembly(str(module))
    parsed.verify()
    engine = binding.create_mcjit_compiler(parsed, target_machine())
    engine.finalize_object()
    return {count: engine.get_function_address(name) for count, name in names.items()}, engine


def _api_address(name: str) -> int:
    return int(ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value or 0)


def eligible(compiled: CompiledKernel) -> bool:
    """Whether every argument is a plain NumPy array and nothing needs Python during
    the call (allocations) or after it (returned arrays)."""
    from kdsl.runtime.compiler import CompiledKernel

    return (
        type(compiled) is CompiledKernel
        and len(compiled.params) <= MAX_ARGUMENTS
        and compiled.status_size <= MAX_STATUS_SLOTS
        and not compiled.allocates
        and compiled.extra_argtypes == 0
        and all(p.passing == "object" and not p.trailing_shape
                and isinstance(p.type, T.ArrayType) and p.type.contiguous is not None
                for p in compiled.params)
        and not any(isinstance(r.type, T.ArrayType) for r in compiled.results)
    )


class FastCall:
    """A specialisation's compiled entry: ``function(*args)`` returns None (done),
    ``bytes`` (the status slots: an error, or the results) or ``SLOW``."""

    def __init__(self, compiled: CompiledKernel) -> None:
        addresses, engine = _entry_points()
        self.compiled = compiled
        self.deps = compiled.deps
        written = set(compiled.written)
        words = [
            compiled.address, compiled.status_size, id(np.ndarray), id(SLOW), id(None),
            _api_address("Py_IncRef"), _api_address("PyBytes_FromStringAndSize"),
            _api_address("PyEval_SaveThread"), _api_address("PyEval_RestoreThread"),
            1 if compiled.results else 0, len(compiled.params),
        ]
        for k, p in enumerate(compiled.params):
            dtype = np.dtype(T.element_scalar(p.type.dtype).numpy_dtype)
            mask = C_CONTIGUOUS | (WRITEABLE if k in written else 0)
            expected = (C_CONTIGUOUS if p.type.contiguous else 0) | (WRITEABLE if k in written else 0)
            words += [id(dtype), p.type.full_ndim, mask, expected]
        self._dtypes = [np.dtype(T.element_scalar(p.type.dtype).numpy_dtype)
                        for p in compiled.params]  # the descrs the table names stay alive
        self._table = struct.pack(f"<{len(words)}q", *words)
        self._engine = engine
        self._method = _MethodDef(b"kdsl_fast_call", addresses[len(compiled.params)],
                                  _METH_FASTCALL, None)
        new = ctypes.pythonapi.PyCFunction_NewEx
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
        self.function = new(ctypes.addressof(self._method), self._table, None)

    def finish(self, status: bytes, args: tuple) -> Any:
        """The results (or the error) of a call that returned its status slots."""
        slots = np.frombuffer(status, dtype=np.int64)
        if slots[0]:
            self.compiled._raise(slots)
        return self.compiled._decode(slots, {}, args)


def fast_call_for(compiled: CompiledKernel) -> FastCall | None:
    """The compiled entry of a specialisation, or None where it needs the Python path."""
    if not eligible(compiled):
        return None
    with _build_lock:
        try:
            return FastCall(compiled)
        except RuntimeError:  # an unrecognised Python or NumPy build: the Python path
            return None

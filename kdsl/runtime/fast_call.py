"""The compiled call path: a specialisation whose arguments are NumPy arrays and scalars
(Python or NumPy bool, int and float) is called through a built-in function made from
machine code, which checks each argument against what the specialisation was compiled
for, converts the scalars and calls the kernel without ctypes.

The machine code is a set of small entry points, one per pattern of argument kinds
(``"aaf"``: two arrays and a float held as a C double), built with llvmlite when a
specialisation first needs one and shared by every specialisation: each specialisation
is described to them by a table (a ``bytes`` object, the function's ``self``) of what
each argument must be (exactly ``np.ndarray``, the dtype object, the number of axes, the
contiguity and writeability flags, the size of a last axis the specialisation fixes; for
a scalar its exact type and, for an integer, the range of the parameter's type) and the
addresses to call. An argument that differs in
anything returns the ``SLOW`` marker, and the caller takes the Python path, which checks
(and reports) everything. A kernel that failed, or that returns values, returns its
status slots as ``bytes``; one that returns nothing returns None.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl import types as T
from kdsl.runtime.fast_call_results import MadeArrayResults, api_address
from kdsl.runtime.native_allocation import (
    HEADER_WORDS,
    RECORD_MAGIC,
    RECORD_WORDS,
    native_hook_table,
)
from kdsl.runtime.ndarray_layout import ndarray_offsets
from kdsl.runtime.symbols import ALLOCATIONS

if TYPE_CHECKING:
    from kdsl.runtime.compiler import CompiledKernel
    from kdsl.runtime.hidden_arguments import HiddenArguments

MAX_ARGUMENTS = 12
MAX_STATUS_SLOTS = 64
_HEADER_WORDS = 16  # the words before the arguments' (see FastCall)
_WORDS_PER_ARGUMENT = 5
_SCALAR_OFFSET = 16  # a Python float's and a NumPy scalar's value, after the object header
# argument kinds: an array; a scalar read as a C double ("d": float, np.float64; "s":
# np.float32), as an int64 ("q": np.int64; "l": np.int32), a Python int ("i"; "I" for a
# float parameter), a bool ("b": Python, "B": np.bool_)
_SCALAR_KINDS = {
    (float, "float"): "d", (np.dtype(np.float64), "float"): "d",
    (np.dtype(np.float32), "float"): "s", (int, "float"): "I",
    (int, "int"): "i", (np.dtype(np.int64), "int"): "q", (np.dtype(np.int32), "int"): "l",
    (bool, "int"): "b", (np.dtype(np.bool_), "int"): "B",
}
_METH_FASTCALL = 0x80
_UNIT_FIRST_STRIDE = 1 << 32  # the layout word's flag for ArrayType.unit_first_stride
# the layout word's flag for parameters whose type may fix the middle axis's size (kept
# in bits 40 to 47: ArrayType.middle_axis_size)
_MIDDLE_AXIS_APPLIES = 1 << 48
# the layout word's flag for arrays of vectors and matrices: the last axis holds the
# vector's components (a matrix's columns) whatever the layout, and is checked in every
# one; for matrices (the second flag), the axis before it too (its rows, kept in bits 40
# to 47), and padded rows are not a layout of their own
_ELEMENT_AXIS = 1 << 49
_MATRIX_ELEMENT = 1 << 50
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
def _scalars_readable() -> bool:
    """Whether scalars keep their value right after the object header, as the entry
    points read them (probed on live objects)."""
    probes: list[tuple[Any, Any]] = [
        (2.5, ctypes.c_double), (np.float64(-1.25), ctypes.c_double),
        (np.float32(0.75), ctypes.c_float), (np.int64(-7), ctypes.c_int64),
        (np.int32(-9), ctypes.c_int32), (np.bool_(True), ctypes.c_uint8),
    ]
    return all(ctype.from_address(id(value) + _SCALAR_OFFSET).value == value
               for value, ctype in probes)


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


class _Emitter(MadeArrayResults):
    """Emits the checking entry point for one pattern of argument kinds."""

    def __init__(self, module: Any, kinds: str, allocating: bool = False,
                 result_ndim: int = -1) -> None:
        from llvmlite import ir

        self.ir = ir
        self.i8p, self.i32, self.i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        self.f64 = ir.DoubleType()
        self.kinds = kinds
        self.count = len(kinds)
        self.allocating = allocating
        self.result_ndim = result_ndim
        self.name = _entry_name(kinds, allocating, result_ndim)
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
        """Each argument as the kernel takes it, once it is known to be what the table
        says."""
        b = self.b
        _, args, nargs = self.fn.args
        self.branch_or_slow(b.icmp_signed("==", nargs, self.const(self.count)), "counted")
        arguments = []
        for k, kind in enumerate(self.kinds):
            arg = b.load(b.gep(args, [self.const(k)]))
            base = _HEADER_WORDS + _WORDS_PER_ARGUMENT * k
            if kind == "a":
                arguments.append(self.checked_array(arg, base, k))
            else:
                arguments.append(self.checked_scalar(arg, base, k, kind))
        return arguments

    def checked_array(self, arg: Any, base: int, k: int) -> Any:
        _, descr_offset, flags_offset = _layout()
        _, nd_offset, _, _ = ndarray_offsets()
        b, i64 = self.b, self.i64
        # the type first: an array's fields are read only from arrays
        self.branch_or_slow(b.icmp_unsigned("==", self.field(arg, 8, i64), self.word(2)),
                            f"array{k}")
        same_descr = b.icmp_unsigned("==", self.field(arg, descr_offset, i64), self.word(base))
        nd = b.sext(self.field(arg, nd_offset, self.i32), i64)
        same_nd = b.icmp_unsigned("==", nd, self.word(base + 1))
        flags = b.sext(self.field(arg, flags_offset, self.i32), i64)
        same_flags = b.icmp_unsigned("==", b.and_(flags, self.word(base + 2)),
                                     self.word(base + 3))
        self.branch_or_slow(b.and_(same_descr, b.and_(same_nd, same_flags)), f"checked{k}")
        self.branch_or_slow(self.same_fixed_last_axis(arg, nd, flags, base + 4), f"last{k}")
        return arg

    def same_fixed_last_axis(self, arg: Any, nd: Any, flags: Any, word: int) -> Any:
        """Whether the layout the specialisation fixes (the table's ``word``: see
        ``_layout_word``) is the one ``argument_layout`` gives the array: the size of a
        short last axis of a C-contiguous array, that and the row pitch of padded rows,
        or the unit first stride of other arrays (and, for an array of vectors or
        matrices, the sizes of the element's axes in any layout)."""
        b, i64 = self.b, self.i64
        _, _, dims_offset, strides_offset = ndarray_offsets()
        dims = self.field(arg, dims_offset, i64.as_pointer())
        strides = self.field(arg, strides_offset, i64.as_pointer())
        expected = self.word(word)
        itemsize = b.and_(b.lshr(expected, self.const(16)), self.const(0xFFFF))
        last_index = b.sub(nd, self.const(1))  # nd >= 1: checked above
        last = b.load(b.gep(dims, [last_index]))
        sizes, pitches = T.FIXED_LAST_AXIS_SIZES, T.FIXED_ROW_PITCHES
        short = b.and_(b.icmp_signed(">=", nd, self.const(2)),
                       b.and_(b.icmp_signed(">=", last, self.const(sizes.start)),
                              b.icmp_signed("<", last, self.const(sizes.stop))))
        contiguous = b.icmp_unsigned("!=", b.and_(flags, self.const(C_CONTIGUOUS)), self.const(0))
        # padded rows (read only where nd >= 2: the index is clamped at 0 otherwise)
        inner = b.load(b.gep(strides, [last_index]))
        outer_index = b.select(b.icmp_signed(">=", nd, self.const(2)), b.sub(nd, self.const(2)),
                               self.const(0))
        outer = b.load(b.gep(strides, [outer_index]))
        pitch = b.sdiv(outer, itemsize)
        matrix = b.icmp_unsigned("!=", b.and_(expected, self.const(_MATRIX_ELEMENT)),
                                 self.const(0))
        padded = b.and_(b.and_(short, b.icmp_unsigned("==", inner, itemsize)),
                        b.and_(b.icmp_signed("==", b.srem(outer, itemsize), self.const(0)),
                               b.and_(b.icmp_signed(">=", pitch, last),
                                      b.icmp_signed("<", pitch, self.const(pitches.stop)))))
        padded = b.and_(padded, b.not_(matrix))
        rows = b.or_(last, b.shl(pitch, self.const(8)))
        # unit first stride (read only where nd >= 2, as argument_layout does)
        first = b.load(strides)
        column = b.and_(b.icmp_signed(">=", nd, self.const(2)),
                        b.icmp_signed("==", first, itemsize))
        other = b.select(column, self.const(_UNIT_FIRST_STRIDE), self.const(0))
        # the axis before a short last one, where the word says the type can fix it
        middle_index = b.select(b.icmp_signed(">=", nd, self.const(3)), b.sub(nd, self.const(2)),
                                self.const(0))
        middle = b.load(b.gep(dims, [middle_index]))
        # an element's axes, in every layout: a vector's components, a matrix's rows too
        # (held to 8 bits each, their fields in the word: a longer axis reads as 255,
        # which no element has, never as bits of the fields above)
        element = b.and_(expected, self.const(_ELEMENT_AXIS | _MATRIX_ELEMENT))
        has_element = b.icmp_unsigned("!=", element, self.const(0))

        def eight_bits(size: Any) -> Any:
            return b.select(b.icmp_unsigned("<", size, self.const(256)), size, self.const(255))

        element_axes = b.or_(b.select(has_element, eight_bits(last), self.const(0)),
                             b.select(matrix, b.shl(eight_bits(middle), self.const(40)),
                                      self.const(0)))
        matrix_bytes = b.mul(b.mul(middle, last), itemsize)
        middle_fixed = b.and_(b.and_(short, b.icmp_signed(">=", nd, self.const(3))),
                              b.and_(b.icmp_signed(">=", middle, self.const(sizes.start)),
                                     b.icmp_signed("<", middle, self.const(sizes.stop))))
        middle_fixed = b.and_(middle_fixed, b.icmp_signed("<=", matrix_bytes,
                                                          self.const(T.MAX_FIXED_MATRIX_BYTES)))
        applies = b.and_(expected, self.const(_MIDDLE_AXIS_APPLIES))
        middle_part = b.select(b.and_(middle_fixed, b.icmp_unsigned("!=", applies, self.const(0))),
                               b.shl(middle, self.const(40)), self.const(0))
        dense = b.or_(b.select(short, last, self.const(0)), middle_part)
        fixed = b.select(contiguous, dense, b.select(padded, rows, other))
        fixed = b.or_(b.or_(fixed, element_axes), b.or_(applies, element))
        fixed = b.or_(fixed, b.shl(itemsize, self.const(16)))
        return b.icmp_unsigned("==", fixed, expected)

    def checked_scalar(self, arg: Any, base: int, k: int, kind: str) -> Any:
        """A scalar of exactly the table's type, as a C double or an int64 in the range
        of the parameter's type (the table's next two words)."""
        b, i64, ir = self.b, self.i64, self.ir
        self.branch_or_slow(b.icmp_unsigned("==", self.field(arg, 8, i64), self.word(base)),
                            f"scalar{k}")
        if kind == "d":
            return self.field(arg, _SCALAR_OFFSET, self.f64)
        if kind == "s":
            return b.fpext(self.field(arg, _SCALAR_OFFSET, ir.FloatType()), self.f64)
        if kind == "b":
            return b.zext(b.icmp_unsigned("==", b.ptrtoint(arg, i64), self.word(12)), i64)
        if kind == "B":
            value = self.field(arg, _SCALAR_OFFSET, ir.IntType(8))
            return b.zext(b.icmp_unsigned("!=", value, ir.Constant(ir.IntType(8), 0)), i64)
        if kind in ("i", "I"):
            overflow = b.alloca(self.i32)
            value = self.call_word(11, i64, [arg, overflow])  # PyLong_AsLongLongAndOverflow
            self.branch_or_slow(b.icmp_signed("==", b.load(overflow), ir.Constant(self.i32, 0)),
                                f"fits{k}")
            if kind == "I":
                return b.sitofp(value, self.f64)
        elif kind == "q":
            value = self.field(arg, _SCALAR_OFFSET, i64)
        else:  # "l"
            value = b.sext(self.field(arg, _SCALAR_OFFSET, self.i32), i64)
        in_range = b.and_(b.icmp_signed(">=", value, self.word(base + 1)),
                          b.icmp_signed("<=", value, self.word(base + 2)))
        self.branch_or_slow(in_range, f"range{k}")
        return value

    def emit(self) -> None:
        ir, b, i8p, i64 = self.ir, self.b, self.i8p, self.i64
        arguments = self.checked_arguments()
        data_offset = ndarray_offsets()[0]
        slots = self.word(1)
        # before the slots: the record of the arrays the call makes; after: its token
        # and whether the Python hooks made some, for calls that allocate
        block = b.alloca(i64, self.const(HEADER_WORDS + MAX_STATUS_SLOTS + 2))
        status = b.gep(block, [self.const(HEADER_WORDS)])
        status_bytes = b.bitcast(status, i8p)
        size = b.mul(slots, self.const(8))
        b.call(self.memset, [status_bytes, ir.Constant(ir.IntType(8), 0), size,
                             ir.Constant(ir.IntType(1), 0)])
        record = None
        if self.allocating:
            record = b.alloca(i64, self.const(RECORD_WORDS))
            b.call(self.memset, [b.bitcast(record, i8p), ir.Constant(ir.IntType(8), 0),
                                 self.const(8 * RECORD_WORDS), ir.Constant(ir.IntType(1), 0)])
            b.store(self.const(RECORD_MAGIC), block)
            b.store(b.ptrtoint(record, i64), b.gep(block, [self.const(1)]))
        # the kernel reads the status slots through an array object's data field
        status_object = b.alloca(i64, self.const(data_offset // 8 + 1))
        b.store(b.ptrtoint(status, i64), b.gep(status_object, [self.const(data_offset // 8)]))
        state = self.call_word(7, i8p, [])  # PyEval_SaveThread: others run meanwhile
        self.call_word(0, ir.VoidType(), [*arguments, b.bitcast(status_object, i8p)])
        self.call_word(8, ir.VoidType(), [state])
        if record is not None:
            self.return_made_arrays(record, status, slots)
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


def _entry_name(kinds: str, allocating: bool, result_ndim: int) -> str:
    suffix = ("_made" if allocating else "") + (f"_array{result_ndim}" if result_ndim >= 0 else "")
    return f"kdsl_fast_call_{kinds}{suffix}"


@cache
def _entry_point(kinds: str, allocating: bool = False, result_ndim: int = -1) -> int:
    """The address of the checking entry point for a pattern of argument kinds, for
    kernels that make arrays (``allocating``) and return one array of ``result_ndim``
    axes (-1: other results): from the disk cache, or built once."""
    from kdsl.runtime.helper_code import load_helper

    name = _entry_name(kinds, allocating, result_ndim)

    def emit(module: Any) -> None:
        _Emitter(module, kinds, allocating, result_ndim).emit()

    code = load_helper(name, [name], emit, (repr(_layout()),))
    return code[name]


def argument_kinds(compiled: CompiledKernel, key: Any) -> str | None:
    """The pattern of argument kinds of a specialisation called with arguments of
    ``key`` (their ``argument_key``s), or None where the compiled path cannot take them:
    other arguments than plain NumPy arrays and the scalars of _SCALAR_KINDS, or an
    allocating kernel where this build has no native allocation hooks."""
    from kdsl.runtime.compiler import CompiledKernel

    if not (type(compiled) is CompiledKernel
            and len(compiled.params) <= MAX_ARGUMENTS
            and compiled.status_size <= MAX_STATUS_SLOTS
            and compiled.extra_argtypes == 0
            and isinstance(key, tuple) and len(key) == len(compiled.params)):
        return None
    kinds = []
    for p, k in zip(compiled.params, key):
        if p.passing == "object":
            if (not isinstance(p.type, T.ArrayType) or p.type.contiguous is None
                    or _checked_last_axis(p) is None):
                return None
            kinds.append("a")
            continue
        try:
            kind = _SCALAR_KINDS.get((k, p.passing))
        except TypeError:  # an unhashable key part
            return None
        if kind is None or (kind in "iqlI" and p.passing == "int" and _range(p.type) is None):
            return None
        kinds.append(kind)
    pattern = "".join(kinds)
    if pattern.strip("a") and not _scalars_readable():
        return None
    if compiled.allocates and (compiled.init_symbol is None or native_hook_table() is None):
        return None
    return pattern


def _checked_last_axis(p: Any) -> int | None:
    """The size the compiled path checks an array parameter's last axis against (0: no
    check), or None where it cannot check the element axes: a vector's components and a
    matrix's columns are a last axis of 2 to 8 elements (a matrix's rows, the axis before
    it, are checked too), in any layout (C-contiguous, padded rows, column-major or
    other strides)."""
    if not p.trailing_shape:
        return p.type.last_axis_size or 0
    if len(p.trailing_shape) > 2 or any(n not in T.FIXED_LAST_AXIS_SIZES for n in p.trailing_shape):
        return None
    return int(p.trailing_shape[-1])


def _layout_word(p: Any, dtype: np.dtype) -> int:
    """The table's word for the layout an array parameter fixes: the size of a fixed
    last axis, the row pitch of padded rows shifted left by 8 bits, the element's size
    shifted left by 16 (so that the machine code can find an array's row pitch), and
    ``_UNIT_FIRST_STRIDE`` for an array whose first axis steps one element;
    ``_ELEMENT_AXIS`` for an array of vectors or matrices, whose element axes are checked
    in every layout (``_MATRIX_ELEMENT`` and the rows shifted left by 40 bits for
    matrices)."""
    pitch = p.type.row_pitch or 0
    element = _ELEMENT_AXIS if p.trailing_shape else 0
    if len(p.trailing_shape) == 2:
        element |= _MATRIX_ELEMENT | p.trailing_shape[0] << 40
    unit_first = _UNIT_FIRST_STRIDE if p.type.unit_first_stride else 0
    t = p.type
    applies = isinstance(t.dtype, T.ScalarType) and t.ndim >= 3 and bool(t.contiguous)
    middle = (t.middle_axis_size or 0) << 40 | _MIDDLE_AXIS_APPLIES if applies else 0
    return ((_checked_last_axis(p) or 0) | pitch << 8 | dtype.itemsize << 16 | unit_first | middle
            | element)


def _single_array_result(compiled: CompiledKernel) -> int:
    """The number of axes of a kernel's one result where that is an array, else -1."""
    results = compiled.results
    if len(results) == 1 and not compiled.returns_tuple and isinstance(results[0].type, T.ArrayType):
        return int(results[0].type.full_ndim)
    return -1


def _range(t: Any) -> tuple[int, int] | None:
    """The values an integer parameter takes, where int64 holds them all."""
    if not isinstance(t, T.ScalarType) or not t.is_integer:
        return (0, 1) if t == T.bool_ else None
    info = np.iinfo(t.numpy_dtype)
    if info.max > np.iinfo(np.int64).max:
        return None
    return int(info.min), int(info.max)


class FastCall:
    """A specialisation's compiled entry: ``function(*args)`` returns None (done),
    ``bytes`` (the status slots: an error, or the results) or ``SLOW``."""

    own_code_only = False  # whether the kernel's code is all its dependencies hold

    def __init__(self, compiled: CompiledKernel, kinds: str, key: tuple,
                 hidden: HiddenArguments | None = None) -> None:
        address = _entry_point(kinds, compiled.allocates, _single_array_result(compiled))
        if compiled.allocates and compiled.init_symbol:  # arrays made natively from now on
            from kdsl.codegen.native_code import call_init

            call_init(compiled.keep_alive.code, compiled.init_symbol, native_hook_table())
        self.compiled = compiled
        self.deps = compiled.deps
        # the captured arrays and random stream each call reads and appends (the
        # specialisation's last parameters)
        self.hidden = hidden if hidden else None
        written = set(compiled.written)
        words = [
            compiled.address, compiled.status_size, id(np.ndarray), id(SLOW), id(None),
            api_address("Py_IncRef"), api_address("PyBytes_FromStringAndSize"),
            api_address("PyEval_SaveThread"), api_address("PyEval_RestoreThread"),
            1 if compiled.results else 0, len(compiled.params),
            api_address("PyLong_AsLongLongAndOverflow"), id(True),
            # the words fast_call_results.API_WORDS names
            api_address("PyTuple_New"), api_address("PyTuple_SetItem"), api_address("Py_DecRef"),
        ]
        self._keep: list[Any] = []  # the descrs and types the table names stay alive
        for k, (p, kind, part) in enumerate(zip(compiled.params, kinds, key)):
            if kind == "a":
                dtype = np.dtype(T.element_scalar(p.type.dtype).numpy_dtype)
                mask = C_CONTIGUOUS | (WRITEABLE if k in written else 0)
                expected = ((C_CONTIGUOUS if p.type.contiguous else 0)
                            | (WRITEABLE if k in written else 0))
                words += [id(dtype), p.type.full_ndim, mask, expected, _layout_word(p, dtype)]
                self._keep.append(dtype)
                continue
            scalar_type = part if isinstance(part, type) else part.type
            low, high = _range(p.type) or (0, 0)
            words += [id(scalar_type), low, high, 0, 0]
            self._keep.append(scalar_type)
        self._table = struct.pack(f"<{len(words)}q", *words)
        self._method = _MethodDef(b"kdsl_fast_call", address, _METH_FASTCALL, None)
        new = ctypes.pythonapi.PyCFunction_NewEx
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
        self.function = new(ctypes.addressof(self._method), self._table, None)

    def finish(self, result: Any, args: tuple) -> Any:
        """The results (or the error) of a call that returned its status slots (and the
        arrays it made), or the result itself."""
        if type(result) is bytes:
            slots = np.frombuffer(result, dtype=np.int64)
            if slots[0]:
                self.compiled._raise(slots)
            return self.compiled._decode(slots, {}, args)
        if type(result) is not tuple:
            return result  # the array made and returned
        status, *arrays = result
        words = np.frombuffer(status, dtype=np.int64)
        slots = words[:-2]
        token, overflowed = int(words[-2]), int(words[-1])
        made = {int(a.ctypes.data): a for a in arrays if a is not None}
        if overflowed:
            made.update(ALLOCATIONS.claim(token))
        del arrays, result
        if slots[0]:
            made.clear()
            self.compiled._raise(slots)
        value = self.compiled._decode(slots, made, args) if self.compiled.results else None
        made.clear()
        return value


def fast_call_for(compiled: CompiledKernel, key: Any,
                  hidden: HiddenArguments | None = None) -> FastCall | None:
    """The compiled entry of a specialisation called with arguments of ``key`` (the
    user's, then the ``hidden`` ones), or None where it needs the Python path."""
    kinds = argument_kinds(compiled, key)
    if kinds is None:
        return None
    with _build_lock:
        try:
            return FastCall(compiled, kinds, key, hidden)
        except RuntimeError:  # an unrecognised Python or NumPy build: the Python path
            return None

"""Arrays made by compiled code without a trip through Python, for calls on the compiled
call path (``fast_call``).

A call on that path keeps, on its own stack, a *record* of the arrays it made, and
passes it to the allocation hooks through the words before the status slots (the call
token): ``token[-2]`` is ``RECORD_MAGIC`` and ``token[-1]`` the record's address. The
hooks of this module (machine code, kept in the disk cache, see helper_code) make small
arrays with NumPy's C API and larger ones (pooled memory, see ``symbols``) through
``symbols.allocate_object``, holding the GIL only meanwhile, and keep each new array's
reference in the record; the entry point then returns the result array itself and drops
the others. A call without a record (the Python path) or with a full one goes to the
Python hooks, which keep the arrays by call token (``symbols.ALLOCATIONS``).

Record layout, in 64-bit words: the number of arrays made, whether the Python hooks
made some as well, then up to ``RECORD_CAPACITY`` array references (zero once released).
"""

from __future__ import annotations

import ctypes
import threading
from functools import cache
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.runtime.fast_call_results import api_address
from kdsl.runtime.native_pool import POOL_FUNCTIONS, PoolEmitter
from kdsl.runtime.ndarray_layout import ndarray_offsets

RECORD_MAGIC = 0x6B64736C5245434F  # "kdslRECO"
RECORD_CAPACITY = 16
RECORD_WORDS = 2 + RECORD_CAPACITY
HEADER_WORDS = 2  # the magic and the record's address, before the status slots
SMALL_DIMENSION = 1 << 24  # sizes beyond it go to Python (no overflow in the product)
SIZE_CAP = 1 << 36
_NUMPY_EMPTY, _NUMPY_ZEROS = 184, 183  # PyArray_Empty, PyArray_Zeros in NumPy's API table
_NUMPY_NEW_FROM_DESCR, _NUMPY_SET_BASE = 94, 282  # PyArray_NewFromDescr, PyArray_SetBaseObject
_lock = threading.Lock()
_keep_alive: list[Any] = []



@cache
def _numpy_api() -> tuple[int, int, int, int] | None:
    """The addresses of PyArray_Empty, PyArray_Zeros (checked on a live call),
    PyArray_NewFromDescr and PyArray_SetBaseObject; None where this NumPy build's table
    differs."""
    import importlib

    try:
        umath: Any = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # NumPy 1.x
        umath = importlib.import_module("numpy.core._multiarray_umath")
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get(umath._ARRAY_API, None)
    if not table:
        return None
    words = (ctypes.c_void_p * 300).from_address(table)
    empty, zeros = words[_NUMPY_EMPTY] or 0, words[_NUMPY_ZEROS] or 0
    new_from_descr, set_base = words[_NUMPY_NEW_FROM_DESCR] or 0, words[_NUMPY_SET_BASE] or 0
    if not (empty and zeros and new_from_descr and set_base):
        return None
    signature = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                                  ctypes.py_object, ctypes.c_int)
    dims = (ctypes.c_int64 * 2)(3, 5)
    try:
        for address, fill in ((empty, None), (zeros, 0.0)):
            dtype = np.dtype(np.float32)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(dtype))  # the call steals it
            made = signature(address)(2, dims, dtype, 0)
            if not (type(made) is np.ndarray and made.shape == (3, 5) and made.dtype == dtype
                    and made.flags.c_contiguous and (fill is None or not made.any())):
                return None
    except Exception:  # noqa: BLE001 - anything unexpected: the Python hooks serve
        return None
    return int(empty), int(zeros), int(new_from_descr), int(set_base)


# the words of the hooks' table (helper_code.ProcessWords): Python's C API, NumPy's
# array makers, the Python hooks and objects, then one descr per scalar type code
_API = ("PyGILState_Ensure", "PyGILState_Release", "Py_IncRef", "Py_DecRef",
        "PyObject_CallFunction", "PyErr_Clear", "PyCapsule_New", "PyCapsule_SetContext",
        "PyCapsule_GetPointer", "PyCapsule_GetContext")
_LIBC = ("aligned_alloc", "free", "madvise")
_WORD_NAMES = [*_API, "numpy_empty", "numpy_zeros", "PyArray_NewFromDescr",
               "PyArray_SetBaseObject", "python_allocate", "python_release",
               "allocate_object", "None", "ndarray_type", *_LIBC,
               *(f"descr{k}" for k in range(len(T.SCALAR_TYPES)))]
_INIT = "kdsl_native_allocation_init"


def _process_words(python_allocate: int, python_release: int,
                   numpy_api: tuple[int, int, int, int]) -> list[int]:
    """This process's values of ``_WORD_NAMES``."""
    from kdsl.runtime.symbols import allocate_object

    dtypes = [np.dtype(s.numpy_dtype) for s in T.SCALAR_TYPES]
    _keep_alive.extend(dtypes)
    _keep_alive.append(allocate_object)
    libc = ctypes.CDLL(None)
    return [*(api_address(name) for name in _API), *numpy_api, python_allocate,
            python_release, id(allocate_object), id(None), id(np.ndarray),
            *(int(ctypes.cast(getattr(libc, name), ctypes.c_void_p).value or 0)
              for name in _LIBC),
            *(id(d) for d in dtypes)]


class _Emitter:
    """Emits the two hooks: ``allocate`` and ``release`` (runtime_hooks' signatures),
    and the init function that hands them this process's words."""

    def __init__(self, module: Any) -> None:
        from llvmlite import ir

        from kdsl.runtime.helper_code import ProcessWords

        self.ir = ir
        self.module = module
        self.i8p, self.i32, self.i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        self.f64 = ir.DoubleType()
        self.i64p = self.i64.as_pointer()
        self.allocate_t = ir.FunctionType(self.i8p, [self.i64, self.i32, self.i32, self.i64p,
                                                     self.i32, self.f64])
        self.release_t = ir.FunctionType(ir.VoidType(), [self.i64, self.i8p])
        self.words = ProcessWords(_WORD_NAMES)
        self.words.emit(module, _INIT)
        self.data_offset = ndarray_offsets()[0]
        self.itemsizes = self.table("kdsl.itemsizes",
                                    [np.dtype(s.numpy_dtype).itemsize for s in T.SCALAR_TYPES])
        from kdsl.runtime.symbols import TEMPORARIES

        self.smallest = TEMPORARIES.smallest
        fmt = bytearray(b"iiLid\0")
        self.format = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(fmt)), "kdsl.fmt")
        self.format.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(fmt)), fmt)
        self.format.global_constant = True

    def table(self, name: str, values: list[int]) -> Any:
        ir = self.ir
        t = ir.ArrayType(self.i64, len(values))
        g = ir.GlobalVariable(self.module, t, name)
        g.initializer = ir.Constant(t, values)
        g.global_constant = True
        return g

    def const(self, value: int) -> Any:
        return self.ir.Constant(self.i64, value)

    def call(self, b: Any, word: str, result: Any, args: list[Any], var_arg: bool = False,
             fixed: int | None = None) -> Any:
        """Calls the function whose address is the word ``word`` (the first ``fixed``
        arguments typed, the rest variadic)."""
        types = [a.type for a in args][:fixed] if var_arg else [a.type for a in args]
        t = self.ir.FunctionType(result, types, var_arg=var_arg)
        return b.call(b.inttoptr(self.words.load(b, word), t.as_pointer()), args)

    def record_of(self, b: Any, token: Any, python: Any) -> Any:
        """The call's record; calls without one return ``python(b)`` here."""
        header = b.inttoptr(b.sub(token, self.const(8 * HEADER_WORDS)), self.i64p)
        has_record = b.icmp_unsigned("==", b.load(header), self.const(RECORD_MAGIC))
        with b.if_then(b.not_(has_record), likely=False):
            python(b)
        return b.inttoptr(b.load(b.gep(header, [self.const(1)])), self.i64p)

    def gil(self, b: Any) -> Any:
        return self.call(b, "PyGILState_Ensure", self.i32, [])

    def ungil(self, b: Any, state: Any) -> None:
        self.call(b, "PyGILState_Release", self.ir.VoidType(), [state])

    def decref(self, b: Any, obj: Any) -> None:
        self.call(b, "Py_DecRef", self.ir.VoidType(), [obj])

    def byte_size(self, b: Any, code: Any, ndim: Any, shape: Any) -> tuple[Any, Any]:
        """Whether every size is at most SMALL_DIMENSION, and the array's bytes, capped at
        SIZE_CAP (the product kept from overflowing: each size is checked, the running
        product capped)."""
        ir = self.ir
        fn = b.function
        entry = b.block
        header = fn.append_basic_block("size.header")
        body = fn.append_basic_block("size.body")
        done = fn.append_basic_block("size.done")
        itemsize = b.load(b.gep(self.itemsizes, [self.const(0), b.zext(code, self.i64)]))
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(self.i64)
        total = b.phi(self.i64)
        fits = b.phi(ir.IntType(1))
        k.add_incoming(self.const(0), entry)
        total.add_incoming(itemsize, entry)
        fits.add_incoming(ir.Constant(ir.IntType(1), 1), entry)
        b.cbranch(b.icmp_signed("<", k, b.sext(ndim, self.i64)), body, done)
        b.position_at_end(body)
        size = b.load(b.gep(shape, [k]))
        product = b.mul(total, size)
        capped = b.select(b.icmp_signed("<", product, self.const(SIZE_CAP)), product,
                          self.const(SIZE_CAP))
        k.add_incoming(b.add(k, self.const(1)), body)
        total.add_incoming(capped, body)
        fits.add_incoming(b.and_(fits, b.icmp_signed("<=", size, self.const(SMALL_DIMENSION))),
                          body)
        b.branch(header)
        b.position_at_end(done)
        return fits, total

    def emit_allocate(self, pool: PoolEmitter) -> str:
        ir = self.ir
        fn = ir.Function(self.module, self.allocate_t, "kdsl_native_allocate")
        token, code, ndim, shape, fill, value = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))

        def python(b: Any) -> None:
            b.ret(self.call(b, "python_allocate", self.i8p, list(fn.args)))

        record = self.record_of(b, token, python)
        state = self.gil(b)
        count = b.load(record)
        with b.if_then(b.icmp_signed(">=", count, self.const(RECORD_CAPACITY)), likely=False):
            b.store(self.const(1), b.gep(record, [self.const(1)]))
            self.ungil(b, state)
            python(b)
        fits, nbytes = self.byte_size(b, code, ndim, shape)
        filled_by_numpy = b.icmp_signed("<=", fill, ir.Constant(self.i32, 1))
        small = b.and_(fits, b.icmp_signed("<", nbytes, self.const(self.smallest)))
        pooled = b.and_(b.and_(fits, filled_by_numpy),
                        b.icmp_signed("<=", nbytes, b.load(pool.limit)))
        native = fn.append_basic_block("native")
        from_pool = fn.append_basic_block("from_pool")
        not_small = fn.append_basic_block("not_small")
        through_python = fn.append_basic_block("through_python")
        made = fn.append_basic_block("made")
        b.cbranch(b.and_(small, filled_by_numpy), native, not_small)
        b.position_at_end(not_small)
        b.cbranch(pooled, from_pool, through_python)
        b.position_at_end(from_pool)
        pooled_array = b.call(pool.array_fn, [code, ndim, shape, fill])
        b.branch(made)
        b.position_at_end(native)
        descr = b.inttoptr(self.words.load(b, "descr0", b.zext(code, self.i64)), self.i8p)
        self.call(b, "Py_IncRef", ir.VoidType(), [descr])  # the call steals it
        maker = b.select(b.icmp_signed("==", fill, ir.Constant(self.i32, 0)),
                         self.words.load(b, "numpy_empty"), self.words.load(b, "numpy_zeros"))
        maker_t = ir.FunctionType(self.i8p, [self.i32, self.i64p, self.i8p, self.i32])
        from_numpy = b.call(b.inttoptr(maker, maker_t.as_pointer()),
                            [ndim, shape, descr, ir.Constant(self.i32, 0)])
        b.branch(made)
        b.position_at_end(through_python)
        fmt = b.bitcast(self.format, self.i8p)
        from_python = self.call(
            b, "PyObject_CallFunction", self.i8p,
            [b.inttoptr(self.words.load(b, "allocate_object"), self.i8p), fmt, code, ndim,
             b.ptrtoint(shape, self.i64), fill, value], var_arg=True, fixed=2)
        b.branch(made)
        b.position_at_end(made)
        obj = b.phi(self.i8p)
        obj.add_incoming(from_numpy, native)
        obj.add_incoming(pooled_array, from_pool)
        obj.add_incoming(from_python, through_python)
        null = ir.Constant(self.i8p, None)
        with b.if_then(b.icmp_unsigned("==", obj, null), likely=False):
            self.call(b, "PyErr_Clear", ir.VoidType(), [])
            self.ungil(b, state)
            b.ret(null)
        none = b.inttoptr(self.words.load(b, "None"), self.i8p)
        with b.if_then(b.icmp_unsigned("==", obj, none), likely=False):
            self.decref(b, obj)
            self.ungil(b, state)
            b.ret(null)
        b.store(b.ptrtoint(obj, self.i64), b.gep(record, [b.add(count, self.const(2))]))
        b.store(b.add(count, self.const(1)), record)
        data = b.load(b.bitcast(b.gep(obj, [self.const(self.data_offset)]), self.i8p.as_pointer()))
        self.ungil(b, state)
        b.ret(data)
        return fn.name

    def emit_release(self) -> str:
        ir = self.ir
        fn = ir.Function(self.module, self.release_t, "kdsl_native_release")
        token, data = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))

        def python(b: Any) -> None:
            self.call(b, "python_release", ir.VoidType(), list(fn.args))
            b.ret_void()

        record = self.record_of(b, token, python)
        state = self.gil(b)
        count = b.load(record)
        entry = b.block
        header = fn.append_basic_block("find.header")
        body = fn.append_basic_block("find.body")
        found = fn.append_basic_block("found")
        missing = fn.append_basic_block("missing")
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(self.i64)
        k.add_incoming(self.const(0), entry)
        b.cbranch(b.icmp_signed("<", k, count), body, missing)
        b.position_at_end(body)
        slot = b.gep(record, [b.add(k, self.const(2))])
        obj = b.inttoptr(b.load(slot), self.i8p)
        live = b.icmp_unsigned("!=", obj, ir.Constant(self.i8p, None))
        with b.if_then(live):
            pointer = b.load(b.bitcast(b.gep(obj, [self.const(self.data_offset)]),
                                       self.i8p.as_pointer()))
            with b.if_then(b.icmp_unsigned("==", pointer, data)):
                b.store(self.const(0), slot)
                self.decref(b, obj)
                b.branch(found)
        k.add_incoming(b.add(k, self.const(1)), b.block)
        b.branch(header)
        b.position_at_end(found)
        self.ungil(b, state)
        b.ret_void()
        b.position_at_end(missing)
        self.ungil(b, state)
        python(b)
        return fn.name


@cache
def native_helper() -> Any:
    """The loaded code of the native allocation hooks and the pool (``LoadedCode``), its
    words filled in; None where this Python or NumPy build is not one it knows."""
    from kdsl.runtime.helper_code import ProcessWords, load_helper
    from kdsl.runtime.symbols import hook_table

    numpy_api = _numpy_api()
    if numpy_api is None:
        return None
    from kdsl.codegen.abi import HOOK_ORDER

    table = hook_table()
    words = _process_words(table[HOOK_ORDER.index("allocate")],
                           table[HOOK_ORDER.index("release")], numpy_api)

    def emit(module: Any) -> None:
        emitter = _Emitter(module)
        emitter.emit_allocate(PoolEmitter(emitter))
        emitter.emit_release()

    with _lock:
        code = load_helper("kdsl_native_allocation", [*_HOOKS, *POOL_FUNCTIONS, _INIT], emit)
        ProcessWords.fill(code, _INIT, words)
    return code


_HOOKS = ["kdsl_native_allocate", "kdsl_native_release"]


def native_hooks() -> tuple[int, int] | None:
    """The addresses of the native allocate and release hooks; None where this Python
    or NumPy build is not one they know."""
    code = native_helper()
    return None if code is None else (code[_HOOKS[0]], code[_HOOKS[1]])


@cache
def native_hook_table() -> ctypes.Array | None:
    """The runtime's hook table with the native allocation hooks in place."""
    from kdsl.codegen.abi import HOOK_ORDER
    from kdsl.runtime.symbols import hook_table

    hooks = native_hooks()
    if hooks is None:
        return None
    base = hook_table()
    table = (ctypes.c_void_p * len(base))(*base)
    table[HOOK_ORDER.index("allocate")], table[HOOK_ORDER.index("release")] = hooks
    _keep_alive.append(table)
    return table

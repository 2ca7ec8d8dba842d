"""The pool of large arrays' memory, in machine code (part of the native allocation
helper): a call that makes a large array, and the release of that array once nothing uses
it, run no Python at all. Python code on a kernel's entry or exit runs with caches that
the kernel's own streaming has just emptied, so a few hundred bytecodes there cost tens of
microseconds; these few C calls cost a few.

A pooled array is a NumPy array over pool memory whose base is a capsule; the capsule's
destructor (``kdsl_pool_capsule_release``, run when the last array or view using the memory
goes) gives the memory back. The pool keeps up to ``SLOTS`` buffers, at most ``limit``
bytes in all, the oldest freed first; it is only touched with the GIL held (the allocation
hook takes it; destructors and ``ctypes.PYFUNCTYPE`` calls run under it).

Functions (``i64`` is a byte count or an address):
``kdsl_pool_array(i32 type_code, i32 ndim, i64* shape, i32 zeroed) -> PyObject*`` a new
array of pool memory (None where it cannot be made), ``kdsl_pool_clear()``,
``kdsl_pool_set_limit(i64)``, ``kdsl_pool_state(i64* out)`` (the bytes kept, then
``SLOTS`` triples of size, address and age).
"""

from __future__ import annotations

from typing import Any

SLOTS = 64
DEFAULT_LIMIT = 1 << 28
HUGE_PAGE = 1 << 21
MADV_HUGEPAGE = 14
C_ARRAY_FLAGS = 0x0501  # NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE
POOL_FUNCTIONS = ["kdsl_pool_array", "kdsl_pool_clear", "kdsl_pool_set_limit",
                  "kdsl_pool_state"]
# the words of the process (see native_allocation._WORD_NAMES) the pool calls
POOL_WORDS = ["PyArray_NewFromDescr", "PyArray_SetBaseObject", "PyCapsule_New",
              "PyCapsule_SetContext", "PyCapsule_GetPointer", "PyCapsule_GetContext",
              "ndarray_type", "aligned_alloc", "free", "madvise"]


class PoolEmitter:
    """Emits the pool's globals and functions into the helper's module, calling the
    process's functions through the helper's words (``allocation``: its emitter)."""

    def __init__(self, allocation: Any) -> None:
        ir = allocation.ir
        self.a = allocation
        self.ir = ir
        self.module = allocation.module
        self.i64 = allocation.i64
        self.i8p = allocation.i8p
        slots_t = ir.ArrayType(self.i64, SLOTS)
        self.sizes = self._global("kdsl.pool.sizes", slots_t)
        self.addresses = self._global("kdsl.pool.addresses", slots_t)
        self.ages = self._global("kdsl.pool.ages", slots_t)
        self.clock = self._global("kdsl.pool.clock", self.i64)
        self.bytes = self._global("kdsl.pool.bytes", self.i64)
        self.limit = self._global("kdsl.pool.limit", self.i64, DEFAULT_LIMIT)
        self.evict_fn = self._emit_evict_oldest()
        self.give_fn = self._emit_give()
        self.take_fn = self._emit_take()
        self.release_fn = self._emit_capsule_release()
        self.fresh_fn = self._emit_fresh()
        self.array_fn = self._emit_array()
        self._emit_clear()
        self._emit_set_limit()
        self._emit_state()

    # --- helpers ---------------------------------------------------------------------

    def _global(self, name: str, t: Any, value: int | None = None) -> Any:
        g = self.ir.GlobalVariable(self.module, t, name)
        g.linkage = "internal"
        g.initializer = self.ir.Constant(t, value)
        return g

    def const(self, value: int) -> Any:
        return self.ir.Constant(self.i64, value)

    def slot(self, table: Any, b: Any, k: Any) -> Any:
        return b.gep(table, [self.ir.Constant(self.ir.IntType(32), 0), k])

    def function(self, name: str, result: Any, args: list[Any]) -> tuple[Any, Any]:
        fn = self.ir.Function(self.module, self.ir.FunctionType(result, args), name)
        if name not in POOL_FUNCTIONS:
            fn.linkage = "internal"
        return fn, self.ir.IRBuilder(fn.append_basic_block("entry"))

    def each_slot(self, b: Any, body: Any) -> None:
        """Runs ``body(b, k)`` for k in 0 .. SLOTS - 1."""
        self.count_up(b, self.const(SLOTS), body, "slots")

    def count_up(self, b: Any, stop: Any, body: Any, name: str) -> None:
        """Runs ``body(b, k)`` for k in 0 .. stop - 1 (``stop`` an i64)."""
        fn = b.function
        entry = b.block
        header = fn.append_basic_block(f"{name}.header")
        inside = fn.append_basic_block(f"{name}.body")
        done = fn.append_basic_block(f"{name}.done")
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(self.i64)
        k.add_incoming(self.const(0), entry)
        b.cbranch(b.icmp_signed("<", k, stop), inside, done)
        b.position_at_end(inside)
        body(b, k)
        k.add_incoming(b.add(k, self.const(1)), b.block)
        b.branch(header)
        b.position_at_end(done)

    def best_slot(self, b: Any, wanted: Any, better: str) -> Any:
        """The index of the slot for which ``wanted(b, k)`` holds with the greatest age
        (``better`` ">") or the least ("<"); -1 where none."""
        best = b.alloca(self.i64)
        best_age = b.alloca(self.i64)
        b.store(self.const(-1), best)
        b.store(self.const(-1 if better == ">" else (1 << 62)), best_age)

        def visit(b: Any, k: Any) -> None:
            age = b.load(self.slot(self.ages, b, k))
            beats = b.icmp_signed(better, age, b.load(best_age))
            with b.if_then(b.and_(wanted(b, k), beats)):
                b.store(k, best)
                b.store(age, best_age)

        self.each_slot(b, visit)
        return b.load(best)

    def in_use(self, b: Any, k: Any) -> Any:
        return b.icmp_unsigned("!=", b.load(self.slot(self.addresses, b, k)), self.const(0))

    def free(self, b: Any, address: Any) -> None:
        self.a.call(b, "free", self.ir.VoidType(), [b.inttoptr(address, self.i8p)])

    # --- the pool --------------------------------------------------------------------

    def _emit_evict_oldest(self) -> Any:
        """``i64 evict_oldest()``: frees the oldest buffer kept; its slot, or -1."""
        fn, b = self.function("kdsl.pool.evict_oldest", self.i64, [])
        k = self.best_slot(b, self.in_use, "<")
        with b.if_then(b.icmp_signed(">=", k, self.const(0))):
            address = self.slot(self.addresses, b, k)
            self.free(b, b.load(address))
            b.store(self.const(0), address)
            b.store(b.sub(b.load(self.bytes), b.load(self.slot(self.sizes, b, k))), self.bytes)
        b.ret(k)
        return fn

    def _evict_until_under(self, b: Any, extra: Any) -> None:
        """Frees the oldest buffers while the pool plus ``extra`` bytes is over its limit."""
        fn = b.function
        header = fn.append_basic_block("evict.header")
        body = fn.append_basic_block("evict.body")
        done = fn.append_basic_block("evict.done")
        b.branch(header)
        b.position_at_end(header)
        over = b.icmp_signed(">", b.add(b.load(self.bytes), extra), b.load(self.limit))
        b.cbranch(over, body, done)
        b.position_at_end(body)
        evicted = b.call(self.evict_fn, [])
        b.cbranch(b.icmp_signed(">=", evicted, self.const(0)), header, done)
        b.position_at_end(done)

    def _emit_give(self) -> Any:
        """``give(i64 address, i64 nbytes)``: keeps the buffer, or frees it where it is
        over the limit by itself."""
        fn, b = self.function("kdsl.pool.give", self.ir.VoidType(), [self.i64, self.i64])
        address, nbytes = fn.args
        with b.if_then(b.icmp_signed(">", nbytes, b.load(self.limit)), likely=False):
            self.free(b, address)
            b.ret_void()
        self._evict_until_under(b, nbytes)
        k = self.best_slot(b, lambda b, k: b.not_(self.in_use(b, k)), ">")
        free_slot = b.alloca(self.i64)
        b.store(k, free_slot)
        with b.if_then(b.icmp_signed("<", k, self.const(0)), likely=False):
            b.store(b.call(self.evict_fn, []), free_slot)
        k = b.load(free_slot)
        clock = b.add(b.load(self.clock), self.const(1))
        b.store(clock, self.clock)
        b.store(address, self.slot(self.addresses, b, k))
        b.store(nbytes, self.slot(self.sizes, b, k))
        b.store(clock, self.slot(self.ages, b, k))
        b.store(b.add(b.load(self.bytes), nbytes), self.bytes)
        b.ret_void()
        return fn

    def _emit_take(self) -> Any:
        """``i64 take(i64 nbytes)``: the newest kept buffer of exactly ``nbytes``, or 0."""
        fn, b = self.function("kdsl.pool.take", self.i64, [self.i64])
        (nbytes,) = fn.args

        def fits(b: Any, k: Any) -> Any:
            same = b.icmp_signed("==", b.load(self.slot(self.sizes, b, k)), nbytes)
            return b.and_(self.in_use(b, k), same)

        k = self.best_slot(b, fits, ">")
        with b.if_then(b.icmp_signed("<", k, self.const(0))):
            b.ret(self.const(0))
        address = self.slot(self.addresses, b, k)
        taken = b.load(address)
        b.store(self.const(0), address)
        b.store(b.sub(b.load(self.bytes), nbytes), self.bytes)
        b.ret(taken)
        return fn

    def _emit_fresh(self) -> Any:
        """``i64 fresh(i64 nbytes)``: new memory (0 where there is none), aligned for huge
        pages where it spans some, and the kernel asked to back it with them."""
        fn, b = self.function("kdsl.pool.fresh", self.i64, [self.i64])
        (nbytes,) = fn.args
        huge = b.icmp_signed(">=", nbytes, self.const(2 * HUGE_PAGE))
        alignment = b.select(huge, self.const(HUGE_PAGE), self.const(64))
        mask = b.sub(alignment, self.const(1))
        rounded = b.and_(b.add(nbytes, mask), b.not_(mask))  # aligned_alloc wants a multiple
        memory = self.a.call(b, "aligned_alloc", self.i8p, [alignment, rounded])
        address = b.ptrtoint(memory, self.i64)
        with b.if_then(b.and_(huge, b.icmp_unsigned("!=", address, self.const(0)))):
            self.a.call(b, "madvise", self.a.i32, [memory, rounded, self.a.i32(MADV_HUGEPAGE)])
        b.ret(address)
        return fn

    def _emit_capsule_release(self) -> Any:
        """The capsules' destructor: gives their buffer back."""
        fn, b = self.function("kdsl.pool.capsule_release", self.ir.VoidType(), [self.i8p])
        (capsule,) = fn.args
        null = self.ir.Constant(self.i8p, None)
        address = self.a.call(b, "PyCapsule_GetPointer", self.i8p, [capsule, null])
        nbytes = self.a.call(b, "PyCapsule_GetContext", self.i8p, [capsule])
        b.call(self.give_fn, [b.ptrtoint(address, self.i64), b.ptrtoint(nbytes, self.i64)])
        b.ret_void()
        return fn

    def _emit_array(self) -> Any:
        ir, a = self.ir, self.a
        i32 = a.i32
        fn, b = self.function("kdsl_pool_array", self.i8p,
                              [i32, i32, self.i64.as_pointer(), i32])
        code, ndim, shape, zeroed = fn.args
        none = b.inttoptr(a.words.load(b, "None"), self.i8p)

        def fail(b: Any) -> None:
            a.call(b, "PyErr_Clear", ir.VoidType(), [])
            a.call(b, "Py_IncRef", ir.VoidType(), [none])
            b.ret(none)

        itemsize = b.load(b.gep(a.itemsizes, [self.const(0), b.zext(code, self.i64)]))
        count = b.alloca(self.i64)
        b.store(itemsize, count)

        def times_size(b: Any, k: Any) -> None:
            b.store(b.mul(b.load(count), b.load(b.gep(shape, [k]))), count)

        self.count_up(b, b.sext(ndim, self.i64), times_size, "count")
        nbytes = b.load(count)  # the caller checked it is in the pool's range
        address = b.alloca(self.i64)
        b.store(b.call(self.take_fn, [nbytes]), address)
        with b.if_then(b.icmp_unsigned("==", b.load(address), self.const(0)), likely=False):
            b.store(b.call(self.fresh_fn, [nbytes]), address)
            with b.if_then(b.icmp_unsigned("==", b.load(address), self.const(0)), likely=False):
                fail(b)
        data = b.inttoptr(b.load(address), self.i8p)
        with b.if_then(b.icmp_signed("!=", zeroed, i32(0))):
            memset = self.module.declare_intrinsic("llvm.memset", [self.i8p, self.i64])
            b.call(memset, [data, ir.IntType(8)(0), nbytes, ir.IntType(1)(0)])
        destructor = b.bitcast(self.release_fn, self.i8p)
        capsule = a.call(b, "PyCapsule_New", self.i8p,
                         [data, ir.Constant(self.i8p, None), destructor])
        with b.if_then(b.icmp_unsigned("==", capsule, ir.Constant(self.i8p, None)), likely=False):
            b.call(self.give_fn, [b.load(address), nbytes])
            fail(b)
        a.call(b, "PyCapsule_SetContext", i32, [capsule, b.inttoptr(nbytes, self.i8p)])
        descr = b.inttoptr(a.words.load(b, "descr0", b.zext(code, self.i64)), self.i8p)
        a.call(b, "Py_IncRef", ir.VoidType(), [descr])  # the call steals it
        ndarray_type = b.inttoptr(a.words.load(b, "ndarray_type"), self.i8p)
        null = ir.Constant(self.i8p, None)
        array = a.call(b, "PyArray_NewFromDescr", self.i8p,
                       [ndarray_type, descr, ndim, shape, ir.Constant(self.i64.as_pointer(), None),
                        data, i32(C_ARRAY_FLAGS), null])
        with b.if_then(b.icmp_unsigned("==", array, null), likely=False):
            a.decref(b, capsule)  # gives the memory back
            fail(b)
        status = a.call(b, "PyArray_SetBaseObject", i32, [array, capsule])  # steals it
        with b.if_then(b.icmp_signed("<", status, i32(0)), likely=False):
            a.decref(b, array)
            fail(b)
        b.ret(array)
        return fn

    def _emit_clear(self) -> None:
        fn, b = self.function("kdsl_pool_clear", self.ir.VoidType(), [])

        def visit(b: Any, k: Any) -> None:
            address = self.slot(self.addresses, b, k)
            with b.if_then(self.in_use(b, k)):
                self.free(b, b.load(address))
                b.store(self.const(0), address)

        self.each_slot(b, visit)
        b.store(self.const(0), self.bytes)
        b.ret_void()

    def _emit_set_limit(self) -> None:
        fn, b = self.function("kdsl_pool_set_limit", self.ir.VoidType(), [self.i64])
        b.store(fn.args[0], self.limit)
        self._evict_until_under(b, self.const(0))
        b.ret_void()

    def _emit_state(self) -> None:
        fn, b = self.function("kdsl_pool_state", self.ir.VoidType(), [self.i64.as_pointer()])
        (out,) = fn.args
        b.store(b.load(self.bytes), out)

        def visit(b: Any, k: Any) -> None:
            base = b.add(self.const(1), b.mul(k, self.const(3)))
            for j, table in enumerate((self.sizes, self.addresses, self.ages)):
                b.store(b.load(self.slot(table, b, k)), b.gep(out, [b.add(base, self.const(j))]))

        self.each_slot(b, visit)
        b.ret_void()

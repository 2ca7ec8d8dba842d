"""The part of a compiled call path's entry point (``fast_call``) that returns the arrays
a call made (``native_allocation``): the one array result itself where it is one of
them, else a tuple for ``FastCall.finish`` to decode."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

from kdsl.codegen.abi import STATUS_SLOTS as STATUS_RESULT
from kdsl.runtime.ndarray_layout import ndarray_offsets


def api_address(name: str) -> int:
    """The address of a function of Python's C API."""
    return int(ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value or 0)


# the words of a specialisation's table (fast_call.FastCall) that hold the functions of
# Python's C API this part calls: the machine code names no address of its own process,
# so one build of it serves every process (see helper_code)
API_WORDS = {"Py_IncRef": 5, "PyTuple_New": 13, "PyTuple_SetItem": 14, "Py_DecRef": 15}


class MadeArrayResults:
    """Emits the return of the arrays a call made (mixed into fast_call's emitter)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def return_made_arrays(self, record: Any, status: Any, slots: Any) -> None:
        """After a call that made arrays: its one array result where that is one of them
        (the others dropped), None where it returns nothing, else ``(status bytes with
        the token and whether the Python hooks made arrays after them, *the arrays
        made)`` for ``finish``."""
        ir, b, i8p, i64 = self.ir, self.b, self.i8p, self.i64
        count = b.load(record)
        overflowed = b.load(b.gep(record, [self.const(1)]))
        made_any = b.icmp_unsigned("!=", b.or_(count, overflowed), self.const(0))
        with b.if_then(made_any, likely=True):
            clean = b.and_(b.icmp_unsigned("==", overflowed, self.const(0)),
                           b.icmp_unsigned("==", b.load(status), self.const(0)))
            if self.result_ndim >= 0:
                with b.if_then(clean, likely=True):
                    self.return_result_array(record, count, status)
            else:
                no_results = b.icmp_unsigned("==", self.word(9), self.const(0))
                with b.if_then(b.and_(clean, no_results), likely=True):
                    self.drop_made_arrays(record, count)
                    b.ret(self.new_reference(4))  # None
            b.store(b.ptrtoint(status, i64), b.gep(status, [slots]))
            b.store(overflowed, b.gep(status, [b.add(slots, self.const(1))]))
            size = b.mul(b.add(slots, self.const(2)), self.const(8))
            packed = self.call_word(6, i8p, [b.bitcast(status, i8p), size])  # PyBytes_...
            result = self.api("PyTuple_New", i8p, [b.add(count, self.const(1))])
            self.api("PyTuple_SetItem", self.i32, [result, self.const(0), packed])

            def put(k: Any) -> None:
                obj = b.inttoptr(b.load(b.gep(record, [b.add(k, self.const(2))])), i8p)
                null = b.icmp_unsigned("==", obj, ir.Constant(i8p, None))
                none = b.inttoptr(self.word(4), i8p)
                with b.if_then(null):
                    self.api("Py_IncRef", ir.VoidType(), [none])
                item = b.select(null, none, obj)
                self.api("PyTuple_SetItem", self.i32, [result, b.add(k, self.const(1)), item])

            self.loop(count, put)
            b.ret(result)

    def return_result_array(self, record: Any, count: Any, status: Any) -> None:
        """Returns the array made whose data, shape and strides are the result's, after
        dropping the others; falls through where there is none."""
        ir, b, i8p, i64 = self.ir, self.b, self.i8p, self.i64
        data_offset, nd_offset, dims_offset, strides_offset = ndarray_offsets()
        n = self.result_ndim
        found = b.alloca(i64)
        b.store(self.const(-1), found)

        def match(k: Any) -> None:
            obj = b.inttoptr(b.load(b.gep(record, [b.add(k, self.const(2))])), i8p)
            same = b.icmp_unsigned("!=", obj, ir.Constant(i8p, None))
            with b.if_then(same):
                checks = [b.icmp_unsigned("==", self.field(obj, data_offset, i64),
                                          b.load(b.gep(status, [self.const(STATUS_RESULT)])))]
                nd = b.sext(self.field(obj, nd_offset, self.i32), i64)
                checks.append(b.icmp_unsigned("==", nd, self.const(n)))
                dims = b.inttoptr(self.field(obj, dims_offset, i64), i64.as_pointer())
                strides = b.inttoptr(self.field(obj, strides_offset, i64), i64.as_pointer())
                for axis in range(n):
                    for values, first in ((dims, 1), (strides, 1 + n)):
                        want = b.load(b.gep(status, [self.const(STATUS_RESULT + first + axis)]))
                        got = b.load(b.gep(values, [self.const(axis)]))
                        checks.append(b.icmp_unsigned("==", got, want))
                ok = checks[0]
                for check in checks[1:]:
                    ok = b.and_(ok, check)
                with b.if_then(ok):
                    b.store(k, found)

        self.loop(count, match)
        k = b.load(found)
        with b.if_then(b.icmp_signed(">=", k, self.const(0)), likely=True):
            slot = b.gep(record, [b.add(k, self.const(2))])
            result = b.inttoptr(b.load(slot), i8p)
            b.store(self.const(0), slot)
            self.drop_made_arrays(record, count)
            b.ret(result)

    def drop_made_arrays(self, record: Any, count: Any) -> None:
        """Drops the record's references (the arrays nothing returned)."""
        ir, b, i8p = self.ir, self.b, self.i8p

        def drop(j: Any) -> None:
            obj = b.inttoptr(b.load(b.gep(record, [b.add(j, self.const(2))])), i8p)
            with b.if_then(b.icmp_unsigned("!=", obj, ir.Constant(i8p, None))):
                self.api("Py_DecRef", ir.VoidType(), [obj])

        self.loop(count, drop)

    def loop(self, count: Any, body: Any) -> None:
        """``for k in range(count): body(k)``."""
        b, i64 = self.b, self.i64
        entry = b.block
        header = self.fn.append_basic_block("loop.header")
        inside = self.fn.append_basic_block("loop.body")
        done = self.fn.append_basic_block("loop.done")
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(i64)
        k.add_incoming(self.const(0), entry)
        b.cbranch(b.icmp_signed("<", k, count), inside, done)
        b.position_at_end(inside)
        body(k)
        k.add_incoming(b.add(k, self.const(1)), b.block)
        b.branch(header)
        b.position_at_end(done)

    def api(self, name: str, result: Any, args: list[Any]) -> Any:
        """Calls a function of Python's C API (its address read from the table)."""
        return self.call_word(API_WORDS[name], result, args)

"""Non-temporal (streaming) stores for a loop that writes one contiguous row of a large
array: the row-fused tensor lowering's last loop (layer norm's ``out[:] = ...``).

A plain store to a line that is not in the cache first reads the line (read for
ownership): writing 16 MB moves 32 MB, and the written lines push the inputs out of the
last-level cache. A non-temporal store sends the line to memory without reading it.

x86 has wide non-temporal stores only at aligned addresses (``vmovntps`` of 64 bytes
needs a 64-byte boundary), and LLVM's loop vectoriser leaves a loop with a
``!nontemporal`` scalar store unvectorised. So the row's loop is emitted in two parts:
the elements before the destination's first line boundary (a loop kept scalar), then the
rest from an address rounded with ``llvm.ptrmask``, which tells the optimiser that it is
aligned. Their stores carry an alias-scope tag that no access is said not to alias
(so it changes nothing) and that the vectoriser keeps on the vector stores it makes; once
the module is optimised, ``mark_streaming_stores`` adds ``!nontemporal`` to the tagged
stores that the optimiser found aligned to their size: the vector stores of whole lines,
and the scalar stores of the partial lines at both ends of the row, which the previous
and next rows' stores complete in the same write-combining buffer (mixing plain stores
in there measured 4 times slower than all non-temporal). The backend never sees an
under-aligned non-temporal vector store.

A loop marked ``stream_stores`` by the lowering takes this form at run time when its
destination is large (``STREAM_MIN_BYTES`` or more: a reader soon after would not find
it in the caches anyway) and the row is contiguous, aligned to its elements and at least
``ROW_MIN_BYTES`` long; otherwise it is the plain loop. The stores are weakly ordered: a
function that streams ends with an ``sfence`` (once per call of a parallel region's
function, not per row: a fence per 4 KB row measured a fifth slower).
"""

from __future__ import annotations

import platform
import re
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import ArrayView, Repr, i8, i64, memory_type
from kdsl.ir.core import Operation, Value
from kdsl.ir.effects import has_effect
from kdsl.ir.structured import ForOp

# smaller destinations keep plain stores: a reader soon after finds them in the cache
# (the last-level cache of the machines measured is 32 MB)
STREAM_MIN_BYTES = 8 << 20
# shorter rows keep plain stores: too few whole lines between the partial ones
ROW_MIN_BYTES = 512
STREAM_TAG = "kdsl.stream"
LINE = 64  # bytes of a cache line


def on_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


class StreamingStores:
    """Mixed into the kernel emitter (emit_kernel.py), whose builder and values it uses."""

    if TYPE_CHECKING:
        b: ir.IRBuilder
        values: dict[Value, Repr]
        module: ir.Module

        def __getattr__(self, name: str) -> Any: ...

    # the store of the loop being emitted in parts: (op, address of the part's first
    # element, the part's first index)
    _stream_redirect: tuple[Operation, ir.Value, ir.Value] | None = None

    def emit_streaming_for(self, op: Operation) -> list[Repr] | None:
        """``op`` (a ``for`` marked ``stream_stores``) in its two forms, or None where it
        does not have the shape this needs (the caller emits the plain loop)."""
        store = _row_store(op, self.values)
        if store is None or not on_x86():
            return None
        loop = ForOp(op)
        start, stop = self.values[loop.start], self.values[loop.stop]
        array_t: T.ArrayType = store.operands[0].type
        itemsize = T.element_scalar(array_t.dtype).itemsize
        view: ArrayView = self.values[store.operands[0]]
        row = self.b.bitcast(view.data, i8.as_pointer())
        for index, stride in zip(store.operands[1:-2], view.strides):
            row = self.b.gep(row, [self.b.mul(self.values[index], stride)])
        count = self.b.sub(stop, start)
        first = self.b.gep(row, [self.b.mul(start, view.strides[array_t.ndim - 1])])
        total = ir.Constant(i64, itemsize)
        for size in view.shape[:array_t.ndim]:
            total = self.b.mul(total, size)
        conditions = [
            self.b.icmp_signed("==", view.strides[array_t.ndim - 1], ir.Constant(i64, itemsize)),
            self.b.icmp_signed(">=", total, ir.Constant(i64, STREAM_MIN_BYTES)),
            self.b.icmp_signed(">=", count, ir.Constant(i64, ROW_MIN_BYTES // itemsize)),
            self.b.icmp_unsigned("==", self.b.and_(self.b.ptrtoint(first, i64),
                                                   ir.Constant(i64, itemsize - 1)),
                                 ir.Constant(i64, 0)),
        ]
        streams = conditions[0]
        for c in conditions[1:]:
            streams = self.b.and_(streams, c)
        with self.b.if_else(streams) as (streamed, plain):
            with streamed:
                self._peeled_row(loop, store, row, start, stop, itemsize)
            with plain:
                self.emit_plain_for(op)
        return []

    def _peeled_row(self, loop: ForOp, store: Operation, row: ir.Value, start: ir.Value,
                    stop: ir.Value, itemsize: int) -> None:
        """The elements before the destination's first line boundary, then the rest
        from an address the optimiser knows to be aligned to a line, all their stores
        tagged for streaming."""
        size = ir.Constant(i64, itemsize)
        first = self.b.gep(row, [self.b.mul(start, size)])
        nbytes = self.b.mul(self.b.sub(stop, start), size)
        head = self.b.and_(self.b.sub(ir.Constant(i64, 0), self.b.ptrtoint(first, i64)),
                           ir.Constant(i64, LINE - 1))
        head = self.b.select(self.b.icmp_signed("<", nbytes, head), nbytes, head)
        middle = self.b.add(start, self.b.sdiv(head, size))
        element_t = memory_type(T.element_scalar(store.operands[0].type.dtype)).as_pointer()
        saved = self._stream_redirect
        # the head: a partial line, streamed element by element (the previous row's
        # tail, streamed the same way just before, fills the rest of the line)
        self._stream_redirect = (store, self.b.bitcast(first, element_t), start)
        try:
            self._counted_loop(start, middle, ir.Constant(i64, 1), [], [],
                               lambda k, _: self._run_body(loop.body, [k]),
                               ("no-vectorize", "no-unroll"))
        finally:
            self._stream_redirect = saved
        aligned = self.b.call(self._ptrmask(), [self.b.gep(first, [head]),
                                                ir.Constant(i64, -LINE)])
        self._stream_redirect = (store, self.b.bitcast(aligned, element_t), middle)
        try:
            self._counted_loop(middle, stop, ir.Constant(i64, 1), [], [],
                               lambda k, _: self._run_body(loop.body, [k]))
        finally:
            self._stream_redirect = saved
        self._streaming_functions.add(self.b.function)

    @property
    def _streaming_functions(self) -> set[ir.Function]:
        if "_streamed" not in self.__dict__:
            self.__dict__["_streamed"] = set()
        return self.__dict__["_streamed"]

    def fence_streaming_stores(self, fn: ir.Function) -> None:
        """An ``sfence`` before each return of ``fn`` if it streams: the non-temporal
        stores are weakly ordered, and whoever runs next (the thread that joins a
        parallel region) must see them. Once per call, not per row (measured: a fence
        per 4 KB row costs a fifth of layer norm's time)."""
        if fn not in self._streaming_functions:
            return
        for block in fn.blocks:
            terminator = block.terminator
            if isinstance(terminator, ir.Ret):
                builder = ir.IRBuilder(block)
                builder.position_before(terminator)
                builder.call(self._sfence(), [])

    def _ptrmask(self) -> ir.Function:
        name = "llvm.ptrmask.p0.i64"
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(i8.as_pointer(), [i8.as_pointer(), i64]),
                             name)
        return fn

    def _sfence(self) -> ir.Function:
        name = "llvm.x86.sse.sfence"
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), []), name)
        return fn

    def emit_streamed_store(self, op: Operation) -> bool:
        """Emits an ``array_store`` of the streamed part of a row (tagged for
        ``mark_streaming_stores``); False for any other store."""
        redirect = self._stream_redirect
        if redirect is None or redirect[0] is not op:
            return False
        _, aligned, middle = redirect
        offset = self.b.sub(self.values[op.operands[-2]], middle)
        stored = self.b.store(self.values[op.operands[-1]], self.b.gep(aligned, [offset]))
        stored.set_metadata("alias.scope", self._stream_tag())
        return True

    def _stream_tag(self) -> ir.MDValue:
        domain = self.module.add_metadata([ir.MetaDataString(self.module, STREAM_TAG)])
        scope = self.module.add_metadata([ir.MetaDataString(self.module, STREAM_TAG + ".scope"),
                                          domain])
        return self.module.add_metadata([scope])


def mark_streaming_stores(text: str) -> str:
    """The optimised module ``text`` with ``!nontemporal`` on its vector stores that
    carry the streaming tag (alone, or among the scopes the vectoriser's alias checks
    add) and that the optimiser found aligned to their size."""
    scopes = {m.group(1) for m in re.finditer(
        rf'^(!\d+) = (?:distinct )?!\{{!"{re.escape(STREAM_TAG)}\.scope"', text, re.M)}
    lists = {m.group(1) for m in re.finditer(r"^(!\d+) = !\{(.*)\}$", text, re.M)
             if scopes & set(re.findall(r"!\d+", m.group(2)))}
    if not lists:
        return text
    numbers = [int(n) for n in re.findall(r"^!(\d+) = ", text, re.M)]
    node = f"!{1 + max(numbers)}"
    pattern = re.compile(r"^(\s*store (?:<(\d+) x )?(float|double|i32|i64)>? [^,]+, ptr [^,]+, "
                         r"align (\d+))(, .*!alias.scope (!\d+).*)$", re.M)
    bits = {"float": 4, "double": 8, "i32": 4, "i64": 8}

    def mark(m: re.Match[str]) -> str:
        nbytes = int(m.group(2) or 1) * bits[m.group(3)]
        if m.group(6) not in lists or int(m.group(4)) < nbytes:
            return m.group(0)
        return f"{m.group(1)}, !nontemporal {node}{m.group(5)}"

    marked = pattern.sub(mark, text)
    return marked + f"\n{node} = !{{i32 1}}\n" if marked != text else text


def _row_store(op: Operation, values: dict[Value, Repr]) -> Operation | None:
    """The one store of a scalar of 4 or 8 bytes that ``op``'s body makes, at
    ``dest[row..., iv]`` with ``dest`` and ``row`` from outside the loop; None if the
    loop is not just that (it carries values, steps by more than 1, has another effect)."""
    loop = ForOp(op)
    if loop.inits or not _is_one(loop.step, values):
        return None
    effects = [inner for inner in op.walk() if inner is not op and has_effect(inner)]
    if len(effects) != 1 or effects[0].name != "array_store" or effects[0] not in loop.body.ops:
        return None
    store = effects[0]
    array_t = store.operands[0].type
    if not isinstance(array_t, T.ArrayType) or T.element_count(array_t.dtype) != 1:
        return None
    scalar = T.element_scalar(array_t.dtype)
    if not (scalar.is_float or scalar.is_integer) or scalar.itemsize not in (4, 8):
        return None
    if store.operands[-2] is not loop.iv or len(store.operands) != array_t.ndim + 2:
        return None
    inside = {v for inner in op.walk() for v in inner.results}
    inside |= {a for inner in op.walk() for region in inner.regions for a in region.args}
    outside = [store.operands[0], *store.operands[1:-2]]
    if any(v in inside or v not in values for v in outside):
        return None
    return store


def _is_one(v: Value, values: dict[Value, Repr]) -> bool:
    step = values.get(v)
    return isinstance(step, ir.Constant) and step.constant == 1

"""Array views in LLVM: slicing, integer indexing of some axes, new axes and transposes
only compute a new data pointer, shape and strides (NumPy's semantics, no copies)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.abi import ErrorCode
from kdsl.codegen.llvm_types import ArrayView, Repr, i64
from kdsl.ir.core import Operation


class ArrayViews:
    """The view part of the kernel emitter (mixed into KernelEmitter)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def _wrap(self, index: ir.Value, size: ir.Value) -> ir.Value:
        """A negative index counts from the end, as in Python."""
        negative = self.b.icmp_signed("<", index, ir.Constant(i64, 0))
        return self.b.select(negative, self.b.add(index, size), index)

    def _slice(self, size: ir.Value, start: ir.Value | None, stop: ir.Value | None,
               step: ir.Value | None) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(first index, length, step) of ``slice(start, stop, step)`` on an axis of ``size``
        elements: Python's ``slice.indices`` followed by ``len(range(...))``."""
        b = self.b
        zero, one, minus_one = (ir.Constant(i64, v) for v in (0, 1, -1))
        if step is None:  # the common case stays constant: strides stay known
            return self._forward_slice(size, start, stop)
        is_zero = b.icmp_signed("==", step, zero)
        self._fail_if(is_zero, ErrorCode.VALUE, self.current_op, "slice step cannot be zero",
                      step, stop=True)
        step = b.select(is_zero, one, step)
        forward = b.icmp_signed(">", step, zero)

        def clamp(value: ir.Value | None, default_forward: ir.Value,
                  default_backward: ir.Value) -> ir.Value:
            if value is None:
                return b.select(forward, default_forward, default_backward)
            wrapped = self._wrap(value, size)
            low = b.select(forward, zero, minus_one)
            high = b.select(forward, size, b.sub(size, one))
            at_least = b.select(b.icmp_signed("<", wrapped, low), low, wrapped)
            return b.select(b.icmp_signed(">", at_least, high), high, at_least)

        first = clamp(start, zero, b.sub(size, one))
        last = clamp(stop, size, minus_one)
        span = b.sub(last, first)
        adjust = b.select(forward, b.sub(step, one), b.add(step, one))
        length = b.sdiv(b.add(span, adjust), step)
        length = b.select(b.icmp_signed("<", length, zero), zero, length)
        return first, length, step

    def _forward_slice(self, size: ir.Value, start: ir.Value | None,
                       stop: ir.Value | None) -> tuple[ir.Value, ir.Value, ir.Value]:
        """``slice(start, stop)`` with step 1."""
        b = self.b
        zero = ir.Constant(i64, 0)

        def clamp(value: ir.Value | None, default: ir.Value) -> ir.Value:
            if value is None:
                return default
            wrapped = self._wrap(value, size)
            at_least = b.select(b.icmp_signed("<", wrapped, zero), zero, wrapped)
            return b.select(b.icmp_signed(">", at_least, size), size, at_least)

        first = clamp(start, zero)
        last = clamp(stop, size)
        length = b.sub(last, first)
        length = b.select(b.icmp_signed("<", length, zero), zero, length)
        return first, length, ir.Constant(i64, 1)

    def emit_array_view(self, op: Operation) -> list[Repr]:
        self.current_op = op
        view: ArrayView = self.values[op.operands[0]]
        source_t: T.ArrayType = op.operands[0].type
        params = iter(self.values[v] for v in op.operands[1:])
        offset: ir.Value = ir.Constant(i64, 0)
        shape: list[ir.Value] = []
        strides: list[ir.Value] = []
        axis = 0
        for item in op.attrs["spec"]:
            kind = item[0]
            if kind == "newaxis":
                shape.append(ir.Constant(i64, 1))
                strides.append(ir.Constant(i64, 0))
                continue
            size, stride = view.shape[axis], view.strides[axis]
            if kind == "index":
                index = self._wrap(next(params), size)
                offset = self.b.add(offset, self.b.mul(index, stride))
            else:
                _, has_start, has_stop, has_step = item
                start = next(params) if has_start else None
                stop = next(params) if has_stop else None
                step = next(params) if has_step else None
                first, length, step_value = self._slice(size, start, stop, step)
                offset = self.b.add(offset, self.b.mul(first, stride))
                shape.append(length)
                unit = isinstance(step_value, ir.Constant) and step_value.constant == 1
                strides.append(stride if unit else self.b.mul(stride, step_value))
            axis += 1
        # axes not named keep their full extent, and so do the element's axes
        shape += view.shape[axis:]
        strides += view.strides[axis:]
        del source_t
        return [ArrayView(self.b.gep(view.data, [offset]), shape, strides)]

    def emit_array_transpose(self, op: Operation) -> list[Repr]:
        view: ArrayView = self.values[op.operands[0]]
        ndim = op.operands[0].type.ndim
        shape = view.shape[:ndim][::-1] + view.shape[ndim:]
        strides = view.strides[:ndim][::-1] + view.strides[ndim:]
        return [ArrayView(view.data, shape, strides)]

    def emit_raise_value_error(self, op: Operation) -> list[Repr]:
        ok, value = (self.values[v] for v in op.operands)
        self._fail_if(self._not(ok), ErrorCode.VALUE, op, op.attrs.get("what", ""), value,
                      stop=True)
        return []

    def emit_raise_shape_error(self, op: Operation) -> list[Repr]:
        ok, size, other = (self.values[v] for v in op.operands)
        self._fail_if(self._not(ok), ErrorCode.SHAPE, op, op.attrs.get("what", ""), size, other,
                      stop=True)
        return []

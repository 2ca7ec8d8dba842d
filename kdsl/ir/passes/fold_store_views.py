"""Writes through views (``u[1:-1]``, ``a[i]``, ``a.T``, ``a[:, None]``) become writes into
the viewed array at the indices the view maps to, so that the reverse sweep, which follows
the arrays a kernel updates, sees which array each write changes. Run before reverse-mode
differentiation; the index arithmetic is the view's own (Python's slice rules, as
codegen/views.py computes a view's first element)."""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.analysis import definitions
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Operation, Value

_WRITES = ("array_store", "atomic_rmw")


class _IndexMapper:
    """Emits, before one write, the indices of the viewed array its view indices name."""

    def __init__(self, builder: IRBuilder) -> None:
        self.b = builder

    def const(self, value: int) -> Value:
        return self.b.constant(value, T.i64)

    def wrap(self, index: Value, size: Value) -> Value:
        """A negative index counts from the end."""
        negative = self.b.value("lt", index, self.const(0))
        return self.b.value("select", negative, self.b.value("add", index, size), index)

    def clamp(self, value: Value, low: Value, high: Value) -> Value:
        return self.b.value("min", self.b.value("max", value, low), high)

    def first(self, size: Value, start: Value | None, step: Value | None) -> Value:
        """The first index of ``slice(start, _, step)`` on an axis of ``size`` elements."""
        zero = self.const(0)
        if step is None:
            return zero if start is None else self.clamp(self.wrap(start, size), zero, size)
        forward = self.b.value("gt", step, zero)
        last = self.b.value("sub", size, self.const(1))
        if start is None:
            return self.b.value("select", forward, zero, last)
        low = self.b.value("select", forward, zero, self.const(-1))
        high = self.b.value("select", forward, size, last)
        return self.clamp(self.wrap(start, size), low, high)

    def through_view(self, view: Operation, indices: list[Value]) -> list[Value]:
        source = view.operands[0]
        if view.name == "array_transpose":
            ndim = source.type.ndim
            return indices[:ndim][::-1] + indices[ndim:]
        params = iter(view.operands[1:])
        mapped: list[Value] = []
        given = iter(indices)
        axis = 0
        for item in view.attrs["spec"]:
            if item[0] == "newaxis":
                next(given)  # always 0
                continue
            size = self.b.value("array_dim", source, axis=axis)
            if item[0] == "index":
                mapped.append(self.wrap(self.b.cast(next(params), T.i64), size))
            else:
                _, has_start, has_stop, has_step = item
                start = self.b.cast(next(params), T.i64) if has_start else None
                if has_stop:
                    next(params)
                step = self.b.cast(next(params), T.i64) if has_step else None
                first = self.first(size, start, step)
                offset = next(given)
                if step is not None:
                    offset = self.b.value("mul", offset, step)
                mapped.append(self.b.value("add", first, offset))
            axis += 1
        return mapped + list(given)


def _is_view(op: Operation | None) -> bool:
    return op is not None and op.name in ("array_view", "array_transpose") and isinstance(
        op.operands[0].type, T.ArrayType)


def _fold(block: Block, defs: dict[Value, Operation]) -> None:
    ops: list[Operation] = []
    for op in block.ops:
        for region in op.regions:
            _fold(region, defs)
        target = op.operands[0] if op.name in _WRITES else None
        if target is None or not _is_view(defs.get(target)):
            ops.append(op)
            continue
        emitted = Block([])
        builder = IRBuilder(emitted)
        builder.location = op.location
        mapper = _IndexMapper(builder)
        ndim = target.type.ndim
        indices = [builder.cast(v, T.i64) for v in op.operands[1:1 + ndim]]
        rest = op.operands[1 + ndim:]
        while _is_view(view := defs.get(target)):
            assert view is not None
            indices = mapper.through_view(view, indices)
            target = view.operands[0]
        op.operands = [target, *indices, *rest]
        ops.extend(emitted.ops)
        ops.append(op)
    block.ops = ops


def run(function: Function) -> None:
    _fold(function.body, definitions(function.body))

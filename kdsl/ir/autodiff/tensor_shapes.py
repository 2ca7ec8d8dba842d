"""Shapes and builders of the whole-array adjoints (tensor_rules.py): the broadcast pattern
of each array value (which axes have size 1 whatever the arguments), its run-time sizes,
and the tensor ops the adjoints are made of (maps, sums over axes, views, new axes,
transposes, matmuls, new arrays)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.ir.autodiff.tensor_activity import (
    is_array,
)
from kdsl.ir.core import Operation, Value

if TYPE_CHECKING:
    from kdsl.ir.autodiff.reverse import ReverseSweep

Pattern = tuple[str, ...]
"""Per axis: '1' where the size is 1 whatever the arguments (a new axis, keepdims), '?'
where it is known only at run time."""

FULL_SLICE = ("slice", False, False, False)
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not")


def element_type(v: Value) -> Any:
    """The element type of an array value, the type of a scalar one."""
    return v.type.dtype if is_array(v) else v.type


def _broadcast(patterns: Iterable[Pattern]) -> Pattern:
    patterns = list(patterns)
    ndim = max((len(p) for p in patterns), default=0)
    out = []
    for k in range(ndim):
        sizes = [p[k - (ndim - len(p))] for p in patterns if k - (ndim - len(p)) >= 0]
        out.append("?" if "?" in sizes else "1")
    return tuple(out)


def constant_value(defs: dict[Value, Operation], v: Value) -> Any:
    op = defs.get(v)
    return op.attrs.get("value") if op is not None and op.name == "constant" else None


class TensorBuilder:
    """Shapes and tensor-op builders of the adjoints (mixed into TensorAdjoints, whose
    builder, definitions and caches they use)."""

    sweep: ReverseSweep
    patterns: dict[Value, Pattern]
    dims: dict[tuple[Value, int, int], Value]

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    # --- shapes ---------------------------------------------------------------------

    def pattern(self, v: Value) -> Pattern:
        if not is_array(v):
            return ()
        found = self.patterns.get(v)
        if found is not None:
            return found
        op = self.defs.get(v)
        ndim = v.type.ndim
        p: Pattern = ("?",) * ndim
        if op is None:  # an argument: axes of size 1 at run time where the kernel says so
            unit = self.sweep.unit_axes.get(v, ())
            p = tuple("1" if k in unit else "?" for k in range(ndim))
        elif op.name == "tensor_map":
            p = _broadcast(self.pattern(o) for o in op.operands)
        elif op.name == "tensor_reduce":
            source = self.pattern(op.operands[0])
            axis = op.attrs["axis"]
            if axis is None:
                p = ("1",) * ndim
            elif op.attrs["keepdims"]:
                p = source[:axis] + ("1",) + source[axis + 1:]
            else:
                p = source[:axis] + source[axis + 1:]
        elif op.name == "array_transpose":
            p = tuple(reversed(self.pattern(op.operands[0])))
        elif op.name == "array_view":
            p = self._view_pattern(self.pattern(op.operands[0]), op.attrs["spec"])
        elif op.name == "array_new":
            p = tuple("1" if self.b.known_constants.get(s) == 1 or constant_value(self.defs, s) == 1
                      else "?" for s in op.operands[:ndim])  # then kd.full's value
        self.patterns[v] = p
        return p

    @staticmethod
    def _view_pattern(base: Pattern, spec: Sequence[tuple]) -> Pattern:
        out: list[str] = []
        axis = 0
        for item in spec:
            if item[0] == "newaxis":
                out.append("1")
                continue
            if item[0] == "slice":
                out.append("?")
            axis += 1
        return tuple(out) + base[axis:]

    def dim(self, v: Value, k: int) -> Value:
        """The size of axis ``k`` of the forward array ``v``, read from arrays the way
        forward already has (never from a fused expression)."""
        p = self.pattern(v)
        if p[k] == "1":
            return self.b.constant(1, T.i64)
        op = self.defs.get(v)
        if op is not None and op.name == "tensor_map":
            return self._broadcast_dim(op, k)
        if op is not None and op.name == "tensor_matmul":
            a, b = op.operands
            return self.dim(a, 0) if k == 0 else self.dim(b, 1)
        if op is not None and op.name == "tensor_reduce" and op.attrs["axis"] is not None:
            axis = op.attrs["axis"]
            return self.dim(op.operands[0], k if k < axis or op.attrs["keepdims"] else k + 1)
        array = self.m.get(v, v)
        key = (array, k, id(self.b.block))
        found = self.dims.get(key)
        if found is None:
            found = self.dims[key] = self.b.value("array_dim", array, axis=k)
        return found

    def _broadcast_dim(self, op: Operation, k: int) -> Value:
        """The size of axis ``k`` of an elementwise op's result: that of an operand whose
        size there is not 1 (any operand's size may be 1 at run time, a column (n, 1)
        against an (n, m) array, say)."""
        n = op.result.type.ndim
        size: Value | None = None
        for o in op.operands:
            po = self.pattern(o)
            j = k - (n - len(po))
            if j < 0 or po[j] != "?":
                continue
            mine = self.dim(o, j)
            if size is None or mine is size:
                size = mine
                continue
            one = self.b.constant(1, T.i64)
            size = self.b.value("select", self.b.value("eq", size, one), mine, size)
        assert size is not None, "an axis of pattern '?' has an operand of pattern '?'"
        return size

    def pat(self, v: Value) -> Pattern:
        """The pattern of a value of the gradient function."""
        return self.patterns.get(v, ("?",) * v.type.ndim if is_array(v) else ())

    # --- building ---------------------------------------------------------------------

    def map(self, fn: str, operands: list[Value], operand_type: Any = None) -> Value:
        """``fn`` elementwise over broadcast operands; a scalar op when none is an array."""
        candidates = operands[1:] if fn == "select" else operands
        if operand_type is None:
            arrays = [element_type(v) for v in candidates if is_array(v)
                      and T.element_scalar(v.type.dtype).is_float]
            floats = [element_type(v) for v in candidates if T.element_scalar(element_type(v)).is_float]
            operand_type = (arrays or floats or [element_type(candidates[0])])[0]
        if not any(is_array(v) for v in operands):
            if fn == "select":
                cast = [operands[0]] + [self.b.cast(v, operand_type) for v in operands[1:]]
            else:
                cast = [self.b.cast(v, operand_type) for v in operands]
            return self.b.value(fn, *cast)
        result = T.bool_ if fn in _COMPARISONS else operand_type
        ndim = max(v.type.ndim for v in operands if is_array(v))
        value = self.b.value("tensor_map", *operands, fn=fn, operand_type=operand_type,
                             type=T.ArrayType(result, ndim, True))
        self.patterns[value] = _broadcast(self.pat(v) for v in operands)
        return value

    def reduce_sum(self, v: Value, axis: int | None, keepdims: bool) -> Value:
        t: T.ArrayType = v.type
        p = self.pat(v)
        if axis is None:
            result: Any = t.dtype
            pattern: Pattern = ()
        elif keepdims:
            result = T.ArrayType(t.dtype, t.ndim, True)
            pattern = p[:axis] + ("1",) + p[axis + 1:]
        else:
            pattern = p[:axis] + p[axis + 1:]
            result = T.ArrayType(t.dtype, t.ndim - 1, True) if t.ndim > 1 else t.dtype
        out = self.b.value("tensor_reduce", v, kind="sum", axis=axis, keepdims=keepdims,
                           type=result)
        self.patterns[out] = pattern
        return out

    def view(self, v: Value, spec: list[tuple]) -> Value:
        """A view of ``v`` by a spec of full slices and new axes (no operands)."""
        t: T.ArrayType = v.type
        ndim = sum(1 for item in spec if item[0] in ("slice", "newaxis")) + t.ndim - sum(
            1 for item in spec if item[0] != "newaxis")
        out = self.b.value("array_view", v, spec=tuple(spec),
                           type=T.ArrayType(t.dtype, ndim, False))
        self.patterns[out] = self._view_pattern(self.pat(v), spec)
        return out

    def insert_axis(self, g: Value, axis: int, ndim: int) -> Value:
        """``g``, which broadcasts to a shape of ``ndim - 1`` axes, as one that broadcasts
        to that shape with a new axis of size 1 at ``axis``."""
        if not is_array(g):
            return g
        j = axis - (ndim - 1 - g.type.ndim)
        if j < 0:
            return g
        return self.view(g, [FULL_SLICE] * j + [("newaxis",)] + [FULL_SLICE] * (g.type.ndim - j))

    def transpose(self, v: Value) -> Value:
        t: T.ArrayType = v.type
        out = self.b.value("array_transpose", v, type=T.ArrayType(t.dtype, t.ndim, False))
        self.patterns[out] = tuple(reversed(self.pat(v)))
        return out

    def matmul(self, a: Value, b: Value) -> Value:
        scalar, _ = T.promote(a.type.dtype, False, b.type.dtype, False)
        ndim = b.type.ndim
        out = self.b.value("tensor_matmul", a, b, type=T.ArrayType(scalar, ndim, True))
        self.patterns[out] = ("?",) * ndim
        return out

    def new_array(self, dtype: Any, dims: list[Value], fill: str) -> Value:
        out = self.b.value("array_new", *dims, type=T.ArrayType(dtype, len(dims), True), fill=fill)
        self.patterns[out] = ("?",) * len(dims)
        return out

    def full(self, g: Value, like: Value) -> Value:
        """``g`` broadcast to the shape of the forward array ``like``, as an array."""
        if is_array(g) and self.pat(g) == ("?",) * like.type.ndim:
            return g
        out = self.new_array(like.type.dtype, [self.dim(like, k) for k in range(like.type.ndim)],
                             "empty")
        self.b.create("tensor_assign", [out, g])
        return out

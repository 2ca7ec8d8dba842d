"""A row's mean and variance in one pass, for the row-fused lowering of layer norm.

``mu = kd.mean(x, axis=-1, keepdims=True)`` followed by ``kd.mean((x - mu) ** 2, ...)``
(or ``d * d`` with ``d = x - mu``, or a ``kd.sum`` of it) reads the row twice, and the
second loop waits for the first. Under fastmath the pair becomes one loop with two
accumulators over the row shifted by ``K``, the mean of its first elements::

    s1 = sum(x - K)        s2 = sum((x - K) ** 2)
    mean = K + s1 / n      sum of squares about the mean = s2 - s1 * (s1 / n)

The shift keeps the cancellation small (data far from zero relative to its spread, such
as 1e4 + N(0, 1), loses nothing to it, unlike E[x^2] - E[x]^2). Where it is not small
(s2 more than 8 times the sum of squares about the mean: ``K`` far from the row's mean,
such as an outlier among the first elements), a second pass sums the squares about the
mean. A sum of squares that rounding makes negative is clamped to 0 (a NaN stays NaN).
Both sums vectorise like any other reduction. fastmath=False keeps the program's passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value

if TYPE_CHECKING:
    from kdsl.ir.passes.lower_tensors import TensorLowerer
    from kdsl.ir.passes.tensor_rows import RowPlan


def moment_pairs(lo: TensorLowerer, plan: RowPlan) -> dict[Operation, Operation]:
    """The row means of ``plan`` whose variance (a mean or sum of the squared deviation
    from that mean) it also computes: by the mean, the variance's reduction."""
    if not lo.fastmath:
        return {}
    maps = {op.result: op for op in plan.maps}
    means = {op.result: op for op in plan.reductions if op.attrs["kind"] == "mean"}
    pairs: dict[Operation, Operation] = {}
    for op in plan.reductions:
        if op.attrs["kind"] not in ("mean", "sum"):
            continue
        deviation = _squared(lo, lo.resolve(op.operands[0]), maps)
        if deviation is None:
            continue
        sub = maps.get(deviation)
        if sub is None or sub.attrs.get("fn") != "sub":
            continue
        source, mean_value = (lo.resolve(v) for v in sub.operands)
        mean = means.get(mean_value)
        if (mean is None or mean in pairs or lo.resolve(mean.operands[0]) is not source
                or not _float_scalar(mean.result.type.dtype)):
            continue
        dtype = mean.result.type.dtype
        if any(v.type.dtype != dtype for v in (op.result, sub.result, op.operands[0])):
            continue
        if any(maps[v].attrs.get("operand_type") != dtype for v in (deviation, op.operands[0])
               if v in maps):
            continue
        pairs[mean] = op
    return pairs


def _float_scalar(t: object) -> bool:
    return isinstance(t, T.ScalarType) and t.is_float


def _squared(lo: TensorLowerer, v: Value, maps: dict[Value, Operation]) -> Value | None:
    """``d`` where ``v`` is ``d * d`` or ``d ** 2``."""
    op = maps.get(v)
    if op is None:
        return None
    fn = op.attrs.get("fn")
    a, b = (lo.resolve(o) for o in op.operands) if len(op.operands) == 2 else (None, None)
    if a is None or b is None:
        return None
    if fn == "mul" and (a is b or _same_map(lo, a, b, maps)):
        return a
    exponent = lo.definitions.get(b)
    if fn == "pow" and exponent is not None and exponent.name == "constant" \
            and exponent.attrs.get("value") == 2:
        return a
    return None


def _same_map(lo: TensorLowerer, a: Value, b: Value, maps: dict[Value, Operation]) -> bool:
    """``a`` and ``b`` are the same elementwise operation of the same operands (the two
    ``x - m`` of ``(x - m) * (x - m)``)."""
    op_a, op_b = maps.get(a), maps.get(b)
    return (op_a is not None and op_b is not None and op_a.attrs == op_b.attrs
            and [lo.resolve(o) for o in op_a.operands] == [lo.resolve(o) for o in op_b.operands])


def reduce_moments(lo: TensorLowerer, mean: Operation, variance: Operation, row: list[Value],
                   mean_extent: Value, variance_extent: Value) -> None:
    """The row's mean and variance (as ``variance``'s kind: mean or sum of the squared
    deviations) in one shifted pass, kept in ``lo.row_values`` for the row's later loops."""
    dtype = mean.result.type.dtype
    zero_i = lo.constant(0, T.i64)
    zero = lo.constant(0, dtype)
    source = mean.operands[0]
    count = lo.value("max", mean_extent, zero_i)
    shift = _shift(lo, source, row, count, dtype)

    def inner(k: Value, carried: list[Value]) -> list[Value]:
        y = lo.value("sub", lo.convert(lo.element(source, row + [k]), dtype), shift)
        return [lo.value("add", carried[0], y), lo.value("add", carried[1], lo.value("mul", y, y))]

    s1, s2 = lo.serial_loop(count, [zero, zero], inner).results
    n = lo.builder.cast(mean_extent, dtype)
    shifted_mean = lo.value("div", s1, n)
    mean_value = lo.value("add", shift, shifted_mean)
    lo.row_values[mean.result] = mean_value
    shifted_squares = lo.value("sub", s2, lo.value("mul", s1, shifted_mean))
    # s2 / shifted_squares = 1 + (mean - K)^2 / variance: past 8, a second pass about the
    # mean instead (a shift far from the row's mean, which loses bits to the
    # cancellation; rare in ordinary data)
    far = lo.value("gt", lo.value("mul", s1, shifted_mean),
                   lo.value("mul", lo.constant(0.875, dtype), s2))
    regions = []
    for again in (True, False):
        block = Block()
        with lo.builder.at(block):
            value = (_squares_about(lo, source, row, count, mean_value, dtype) if again
                     else shifted_squares)
            lo.builder.create("yield", [value])
        regions.append(block)
    squares = lo.builder.create("if", [far], {"types": [dtype]}, regions, [dtype]).results[0]
    squares = lo.value("select", lo.value("lt", squares, zero), zero, squares)
    if variance.attrs["kind"] == "mean":
        squares = lo.value("div", squares, lo.builder.cast(variance_extent, dtype))
    lo.row_values[variance.result] = squares


def _squares_about(lo: TensorLowerer, source: Value, row: list[Value], count: Value,
                   mean: Value, dtype: T.ScalarType) -> Value:
    """The sum of the row's squared deviations from ``mean``, in a pass of its own."""

    def inner(k: Value, carried: list[Value]) -> list[Value]:
        d = lo.value("sub", lo.convert(lo.element(source, row + [k]), dtype), mean)
        return [lo.value("add", carried[0], lo.value("mul", d, d))]

    return lo.serial_loop(count, [lo.constant(0, dtype)], inner).result


def _sampled_mean(lo: TensorLowerer, source: Value, row: list[Value], count: Value,
                  dtype: T.ScalarType) -> Value:
    """The mean of the row's first elements (as many as it has, up to 8; n > 0): closer
    to the row's mean than one element, so that the second pass is rarely needed, and in
    the row's first cache line (elements further on would wait for memory)."""
    last = lo.value("sub", count, lo.constant(1, T.i64))
    total: Value | None = None
    for j in range(_SAMPLES):
        k = lo.value("min", lo.constant(j, T.i64), last)
        sample = lo.convert(lo.element(source, row + [k]), dtype)
        total = sample if total is None else lo.value("add", total, sample)
    assert total is not None
    return lo.value("mul", total, lo.constant(1 / _SAMPLES, dtype))


_SAMPLES = 8


def _shift(lo: TensorLowerer, source: Value, row: list[Value], count: Value,
                   dtype: T.ScalarType) -> Value:
    """The shift: the row's first elements averaged (0 for an empty row)."""
    regions = []
    for nonempty in (True, False):
        block = Block()
        with lo.builder.at(block):
            value = _sampled_mean(lo, source, row, count, dtype) if nonempty \
                else lo.constant(0, dtype)
            lo.builder.create("yield", [value])
        regions.append(block)
    has_elements = lo.value("gt", count, lo.constant(0, T.i64))
    return lo.builder.create("if", [has_elements], {"types": [dtype]}, regions, [dtype]).results[0]

"""``kd.random()``, ``kd.randn()`` and ``kd.randint(lo, hi)`` in kernels: Philox-4x32-10
blocks built from ops, with the counters that ``kdsl.random_numbers`` defines.

The key and the call number are hidden parameters of a kernel that draws numbers. The
other counters are hidden locals: ``$rng_loops`` (parallel loops run so far in this
call), and per parallel iteration ``$rng_loop``, ``$rng_iteration`` and ``$rng_draw``
(draws so far in this iteration, or in the serial code). Being locals, they flow through
branches and serial loops like any variable the user writes.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from kdsl import random_numbers as rn
from kdsl import types as T
from kdsl.frontend.calls import builtin
from kdsl.ir.core import Value

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering
    from kdsl.frontend.lowering import LoweringBase

DRAW = "$rng_draw"
LOOPS = "$rng_loops"
LOOP = "$rng_loop"
ITERATION = "$rng_iteration"
KEY0, KEY1, CALL = "$rng_key0", "$rng_key1", "$rng_call"
CARRIED = (DRAW, LOOPS)  # the counters serial loops carry
STREAM_PARAMETERS = 3  # key words and call number, after the captured arrays
FUNC_STREAM_PARAMETERS = 2  # a func that draws: the key of its own stream


def bind_stream(lo: LoweringBase, params: list[Value]) -> None:
    """A kernel that draws numbers: its stream parameters (a func's stream has call number
    0, its key says the rest), and counters at zero."""
    for name, v in zip((KEY0, KEY1, CALL), params):
        lo.env[name] = v
    if len(params) == FUNC_STREAM_PARAMETERS:
        lo.env[CALL] = lo.constant(0, T.i64)
    lo.env[DRAW] = lo.constant(0, T.i64)
    lo.env[LOOPS] = lo.constant(0, T.i64)


def begin_parallel(lo: LoweringBase) -> Value | None:
    """The number of the parallel loop starting now, where it is one the stream counts."""
    if lo.parallel_depth > 0 or LOOPS not in lo.env:
        return None
    return lo.env[LOOPS]


def enter_iteration(lo: LoweringBase, counters: list[Value], extents: list[Value],
                    loop: Value | None) -> None:
    """In a parallel loop's body: its number, the iteration's row-major index, no draws."""
    if loop is None:
        return
    index = counters[0]
    for counter, extent in zip(counters[1:], extents[1:]):
        index = lo.op("add", lo.op("mul", index, extent), counter)
    lo.env[LOOP] = loop
    lo.env[ITERATION] = index
    lo.env[DRAW] = lo.constant(0, T.i64)


def end_parallel(lo: LoweringBase, loop: Value | None) -> None:
    if loop is not None:
        lo.env[LOOPS] = lo.op("add", loop, lo.constant(1, T.i64))


def func_stream(lo: LoweringBase, node: ast.AST) -> list[Value]:
    """The key of a call's own stream, for a func that draws: the first two words of the
    block the caller draws here (so the call counts as one draw of the caller)."""
    return _words(lo, node)[:2]


def check_no_draw_in(lo: LoweringBase, before: Any, node: ast.AST) -> None:
    """Conditional expressions and ``and``/``or`` evaluate a branch in an expression: a
    draw there has no place to record its count."""
    if lo.env.get(DRAW) is not before:
        lo.error("kd.random(), kd.randn() and kd.randint() cannot be drawn inside a "
                 "conditional expression or and/or; draw into a local first", node)


def _u32(lo: LoweringBase, v: Value) -> Value:
    return lo.builder.cast(v, T.u32)


def _words(lo: LoweringBase, node: ast.AST) -> list[Value]:
    """The next Philox block of the running kernel: four u32 words."""
    if DRAW not in lo.env:
        lo.error("kd.random(), kd.randn() and kd.randint() must be named in the kernel "
                 "(as kd.random or an imported name)", node)
    draw = lo.env[DRAW]
    lo.env[DRAW] = lo.op("add", draw, lo.constant(1, T.i64))
    if lo.parallel_depth == 1:
        loop, iteration = _u32(lo, lo.env[LOOP]), _u32(lo, lo.env[ITERATION])
    else:
        loop, iteration = lo.constant(rn.SERIAL_LOOP, T.u32), lo.constant(0, T.u32)
    counter = [_u32(lo, draw), iteration, loop, _u32(lo, lo.env[CALL])]
    return _philox(lo, counter, [_u32(lo, lo.env[KEY0]), _u32(lo, lo.env[KEY1])])


def _philox(lo: LoweringBase, c: list[Value], k: list[Value]) -> list[Value]:
    """Philox-4x32-10, unrolled (the same rounds as ``random_numbers.philox4x32``)."""
    m0, m1 = lo.constant(rn.PHILOX_M0, T.u64), lo.constant(rn.PHILOX_M1, T.u64)
    w0, w1 = lo.constant(rn.PHILOX_W0, T.u32), lo.constant(rn.PHILOX_W1, T.u32)
    shift = lo.constant(32, T.u64)
    k0, k1 = k
    for r in range(rn.PHILOX_ROUNDS):
        p0 = lo.op("mul", lo.builder.cast(c[0], T.u64), m0)
        p1 = lo.op("mul", lo.builder.cast(c[2], T.u64), m1)
        hi0, hi1 = (_u32(lo, lo.op("shr", p, shift)) for p in (p0, p1))
        c = [lo.op("bit_xor", lo.op("bit_xor", hi1, c[1]), k0), _u32(lo, p1),
             lo.op("bit_xor", lo.op("bit_xor", hi0, c[3]), k1), _u32(lo, p0)]
        if r + 1 < rn.PHILOX_ROUNDS:
            k0, k1 = lo.op("add", k0, w0), lo.op("add", k1, w1)
    return c


def _uniform(lo: LoweringBase, a: Value, b: Value) -> Value:
    high = lo.builder.cast(lo.op("shr", a, lo.constant(5, T.u32)), T.f64)
    low = lo.builder.cast(lo.op("shr", b, lo.constant(6, T.u32)), T.f64)
    bits = lo.op("add", lo.op("mul", high, lo.constant(67108864.0, T.f64)), low)
    return lo.op("mul", bits, lo.constant(1.0 / 9007199254740992.0, T.f64))


def _no_arguments(lo: FunctionLowering, node: ast.Call, args: list, name: str) -> None:
    if args:
        lo.error(f"kd.{name}() takes no arguments, got {len(args)}", node)


@builtin(rn.random)
def _random(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _no_arguments(lo, node, args, "random")
    w = _words(lo, node)
    return lo.mark_weak(_uniform(lo, w[0], w[1]))  # a Python float in plain Python


@builtin(rn.randn)
def _randn(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    _no_arguments(lo, node, args, "randn")
    w = _words(lo, node)
    u1, u2 = _uniform(lo, w[0], w[1]), _uniform(lo, w[2], w[3])
    one = lo.constant(1.0, T.f64)
    radius = lo.op("sqrt", lo.op("mul", lo.constant(-2.0, T.f64),
                                 lo.op("log", lo.op("sub", one, u1))))
    angle = lo.op("mul", lo.constant(6.283185307179586, T.f64), u2)
    return lo.mark_weak(lo.op("mul", radius, lo.op("cos", angle)))


@builtin(rn.randint)
def _randint(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    if len(args) != 2:
        lo.error(f"kd.randint() takes two arguments (low, high), got {len(args)}", node)
    low, high = (lo.value_of(a, node) for a in args)
    for v, a in zip((low, high), node.args):
        if not isinstance(v.type, T.ScalarType) or not v.type.is_integer:
            lo.error(f"kd.randint() takes integers, got {v.type}", a)
    low, high = lo.builder.cast(low, T.i64), lo.builder.cast(high, T.i64)
    w = _words(lo, node)
    # the span in u64: high - low reaches 2**64 - 1, past the i64 range
    span = lo.op("sub", lo.builder.cast(high, T.u64), lo.builder.cast(low, T.u64))
    span = lo.op("select", lo.op("gt", high, low), span, lo.constant(1, T.u64))
    bits = lo.op("bit_or", lo.op("shl", lo.builder.cast(w[0], T.u64), lo.constant(32, T.u64)),
                 lo.builder.cast(w[1], T.u64))
    offset = lo.op("mod", bits, span)
    return lo.mark_weak(lo.op("add", low, lo.builder.cast(offset, T.i64)))

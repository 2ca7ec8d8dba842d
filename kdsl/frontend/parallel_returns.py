"""``return value`` inside a parallel loop: the kernel returns what the first iteration
(in the loop's order) that returns gives, as the same loop run by Python would.

Each 32-bit piece of each returned component travels in an i64 key,
``iteration << 32 | piece``, carried by the loop as a 'min' reduction: the smallest key
holds the first returning iteration's piece. That iteration always runs: the iterations
skipped are those after one that returned in the same chunk (on the CPU) or on the same
GPU thread, which run in increasing order. After the loop the pieces are put back
together. The keys need the loop's trip count below 2**31, checked when the loop starts.

A loop that may also ``break`` carries one more key, ``iteration << 32 | 1`` for a return
and ``| 0`` for a break: the kernel returns only when the first iteration to leave the
loop returned, as in Python; otherwise the code after the loop runs.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.ir.core import Value
from kdsl.records import dataclass

if TYPE_CHECKING:
    from kdsl.frontend.loops import LoopLowering

NO_KEY = 2**63 - 1  # the identity of the 'min' reduction: no iteration returned
MAX_ITERATIONS = 2**31 - 1
LOW_BITS = 0xFFFFFFFF


@dataclass
class ParallelReturn:
    """What the return statements in one parallel loop's body need."""

    iteration: Value | None  # the iteration's number in the loop's order (set in the body)
    result_types: list[Any | None]  # the kernel's result types (None: not known yet)
    exit_key: str | None  # with break: the first exit's iteration and kind

    def key_names(self, k: int) -> list[str]:
        t = self.result_types[k]
        return [] if t is None else [f"$result{k}.key{p}" for p in range(_piece_count(t))]

    def all_key_names(self) -> list[str]:
        names = [n for k in range(len(self.result_types)) for n in self.key_names(k)]
        return names + ([self.exit_key] if self.exit_key else [])


def returned_arity(body: list[ast.stmt]) -> int:
    """How many values the first ``return value`` in ``body`` gives (0: none)."""
    for n in (n for s in body for n in ast.walk(s)):
        if isinstance(n, ast.Return) and n.value is not None:
            return len(n.value.elts) if isinstance(n.value, ast.Tuple) else 1
    return 0


def _piece_count(t: Any) -> int:
    scalar = T.element_scalar(t)
    return T.element_count(t) * (2 if scalar.bits > 32 else 1)


def begin(lo: LoopLowering, arity: int, breaks: bool, extents: list[Value],
          node: ast.AST) -> ParallelReturn:
    """The frame of a parallel loop whose body returns ``arity`` values; checks its trip
    count. A result type not yet known (the first lowering round) asks for another round."""
    types: list[Any | None] = []
    for k in range(arity):
        declared = lo.types.declared(f"$result{k}")
        if declared is None:
            lo.needs_rebuild = True
            types.append(None)
        elif isinstance(declared.type, (T.ScalarType, T.VectorType, T.MatrixType)):
            types.append(declared.type)
        else:
            lo.error(f"a parallel loop can return scalars, vectors and matrices, not a value "
                     f"of type {declared.type}", node)
    total = extents[0]
    for e in extents[1:]:
        total = lo.op("mul", total, e)
    ok = lo.op("le", total, lo.constant(MAX_ITERATIONS))
    lo.builder.create("raise_value_error", [ok, total], {
        "what": f"a parallel loop that returns a value runs at most {MAX_ITERATIONS} "
                "iterations"})
    return ParallelReturn(None, types, "$result.exit" if breaks else None)


def no_keys(lo: LoopLowering, frame: ParallelReturn) -> list[Value]:
    return [lo.builder.constant(NO_KEY, T.i64) for _ in frame.all_key_names()]


def enter_iteration(lo: LoopLowering, frame: ParallelReturn, ivs: list[Value],
                    extents: list[Value]) -> None:
    """Numbers the iteration ``ivs`` (one counter per axis, from 0) in C order."""
    number = ivs[0]
    for iv, extent in zip(ivs[1:], extents[1:]):
        number = lo.op("add", lo.op("mul", number, extent), iv)
    frame.iteration = lo.op("shl", number, lo.constant(32))


def store(lo: LoopLowering, frame: ParallelReturn, values: list[Value], node: ast.AST) -> None:
    """``return values`` in the body: records their types and sets their keys."""
    assert frame.iteration is not None
    for k, v in enumerate(values):
        if not isinstance(v.type, (T.ScalarType, T.VectorType, T.MatrixType)):
            lo.error(f"a parallel loop can return scalars, vectors and matrices, not a value "
                     f"of type {v.type}", node)
        lo.types.observe(f"$result{k}", lo.variable_type(v))
        t = frame.result_types[k]
        if t is None:
            continue
        v = lo.coerce(v, t, node)
        for name, piece in zip(frame.key_names(k), _pieces(lo, v, t)):
            lo.env[name] = lo.op("bit_or", frame.iteration, piece)
    if frame.exit_key:
        lo.env[frame.exit_key] = lo.op("bit_or", frame.iteration, lo.constant(1))


def store_break(lo: LoopLowering, frame: ParallelReturn) -> None:
    """``break`` directly in the body: an exit that returns nothing."""
    assert frame.iteration is not None and frame.exit_key
    lo.env[frame.exit_key] = frame.iteration


def finish(lo: LoopLowering, frame: ParallelReturn, return_flag: str, node: ast.AST) -> None:
    """After the loop: each result from its keys where an iteration returned."""
    returned = lo.env[return_flag]
    if frame.exit_key:  # a break before the first return: no return
        first_returned = lo.op("eq", lo.op("bit_and", lo.env.pop(frame.exit_key),
                                           lo.constant(1)), lo.constant(1))
        returned = lo.env[return_flag] = lo.op("bit_and", returned, first_returned)
    for k, t in enumerate(frame.result_types):
        names = frame.key_names(k)
        if t is None:
            continue
        pieces = [lo.op("bit_and", lo.env.pop(n), lo.constant(LOW_BITS)) for n in names]
        value = _assemble(lo, pieces, t)
        before = lo.env.get(f"$result{k}")
        if isinstance(before, Value):
            value = lo.op("select", returned, value, lo.coerce(before, t, node))
        declared = lo.types.declared(f"$result{k}")
        lo.assign(f"$result{k}", lo.mark_weak(value, declared is not None and declared.weak),
                  node)


def _components(lo: LoopLowering, v: Value, t: Any) -> list[Value]:
    if isinstance(t, T.ScalarType):
        return [v]
    return [lo.op("extract", v, index=c) for c in range(t.count)]


def _pieces(lo: LoopLowering, v: Value, t: Any) -> list[Value]:
    """The component bits of ``v``, 32 at a time, each zero-extended to i64."""
    pieces = []
    for c in _components(lo, v, t):
        scalar = c.type
        if scalar.bits > 32:
            bits = c if scalar == T.i64 else lo.op("bitcast", c, type=T.i64)
            pieces.append(lo.op("bit_and", bits, lo.constant(LOW_BITS)))
            pieces.append(lo.op("bit_and", lo.op("shr", bits, lo.constant(32)),
                                lo.constant(LOW_BITS)))
        elif scalar.bits == 32:
            bits = c if scalar == T.u32 else lo.op("bitcast", c, type=T.u32)
            pieces.append(lo.builder.cast(bits, T.i64))
        else:  # bool, u8: non-negative
            pieces.append(lo.builder.cast(c, T.i64))
    return pieces


def _assemble(lo: LoopLowering, pieces: list[Value], t: Any) -> Value:
    scalar = T.element_scalar(t)
    components = []
    rest = list(pieces)
    for _ in range(T.element_count(t)):
        if scalar.bits > 32:
            low, high = rest.pop(0), rest.pop(0)
            bits = lo.op("bit_or", lo.op("shl", high, lo.constant(32)), low)
            components.append(bits if scalar == T.i64 else lo.op("bitcast", bits, type=scalar))
        elif scalar.bits == 32:
            bits = lo.builder.cast(rest.pop(0), T.u32)
            components.append(bits if scalar == T.u32 else lo.op("bitcast", bits, type=scalar))
        else:
            components.append(lo.builder.cast(rest.pop(0), scalar))
    if isinstance(t, T.ScalarType):
        return components[0]
    return lo.op("make_vector", *components, type=t)

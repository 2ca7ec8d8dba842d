"""The state and helpers every part of a gradient's emission shares: the adjoints of
values, the builder helpers the derivative rules use, copies of ops and blocks into the
new body, and copies of arrays kept for the reverse sweep (see emitter.py)."""

from __future__ import annotations

from collections.abc import Container, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kdsl import types as T
from kdsl.errors import CompileError
from kdsl.ir.autodiff.memory import copy_elements, snapshot_storage
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.location import SourceLocation

# effects the forward sweep performed once; recomputation in the reverse sweep skips them
_SKIPPED_WHEN_RECOMPUTING = frozenset({
    "array_store", "atomic_rmw", "print", "assert", "raise_index_error", "raise_shape_error",
    "raise_value_error", "array_free",
})
_INDEX = T.i64


def located_error(message: str, location: SourceLocation) -> CompileError:
    return CompileError(message, location)


class EmitterBase:
    """What the forward and reverse sweeps share (the parts in loop_tapes.py,
    reduction_tapes.py, emitter.py and the reverse_*.py files build on it)."""

    def __init__(self, builder: IRBuilder, varied: set[Value], varied_arrays: set[Value],
                 adjoint_arrays: dict[Value, Value], needed: set[Value]) -> None:
        self.b = builder
        self.varied = varied
        self.varied_arrays = varied_arrays
        self.adjoint_arrays = adjoint_arrays
        # vector arrays the kernel only reads: their adjoints are summed component by
        # component in an array of their own (see memory.component_adjoint)
        self.component_adjoints: dict[Value, Value] = {}
        self.needed = needed
        self.stateful: set[Value] = set()  # arrays updated in place (see memory.py)
        self.bases: dict[Value, Value] = {}  # the array each view refers to
        self._activity: dict[Operation, bool] = {}
        self.old_values: dict[Operation, Value] = {}  # what a store of state overwrote
        self.parallel_depth = 0
        # adjoints of elements read at an index fixed across a loop, summed in registers
        # the reverse loop carries (see ReverseSweep._invariant_loads)
        self.load_registers: dict[tuple[Value, ...], Value] = {}
        self.adj: dict[Value, Value] = {}
        self.routed: set[Value] | None = None  # None: guard every product
        self.unit_axes: dict[Value, tuple[int, ...]] = {}  # arguments' axes of size 1
        self.current: Operation | None = None
        self._result: Value | None = None
        self._mapping: dict[Value, Value] = {}
        # the op defining each value of the differentiated function (rules that look at
        # how an operand was made: a division by a splat, the square root of dot(d, d))
        self.definitions: dict[Value, Operation] = {}
        self.tape_arrays: set[Value] = set()  # storage of saved values (see tape_bytes.py)
        # ops computed on the way back instead of in the forward sweep (see deferral.py)
        self.deferred: Container[Operation] = frozenset()

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.b.create(name, operands, attrs).result

    def const(self, value: float, t: Any) -> Value:
        if isinstance(t, T.ScalarType):
            return self.b.constant(value, t)
        return self.op("splat", self.b.constant(value, T.element_scalar(t)), type=t)

    def zero(self, t: Any) -> Value:
        return self.const(0.0, t)

    def guarded(self, g: Value, value: Value) -> Value:
        """``value`` where the adjoint ``g`` is not zero, else 0 (no 0 * inf), for ops
        whose adjoint a routing op (a select, min, max) may have zeroed."""
        if not isinstance(g.type, T.ScalarType) or not self.guards_products():
            return value
        is_zero = self.op("eq", g, self.const(0.0, g.type))
        return self.op("select", is_zero, self.const(0.0, value.type), value)

    def guards_products(self) -> bool:
        """Whether the adjoint of the current op may have been zeroed by a routing op
        (then its products are guarded: see ``guarded``)."""
        return self.routed is None or (
            self.current is not None and any(r in self.routed for r in self.current.results))

    def mapped(self, v: Value) -> Value:
        """The value of the differentiated function's ``v`` where the sweep stands."""
        return self._mapping.get(v, v)

    def scaled(self, g: Value, derivative: Value) -> Value:
        return self.guarded(g, self.op("mul", g, derivative))

    def result(self, op: Operation) -> Value:
        if self._result is not None:
            return self._result
        return self._mapping.get(op.results[0], op.results[0])

    @contextmanager
    def result_override(self, value: Value) -> Iterator[None]:
        saved, self._result = self._result, value
        try:
            yield
        finally:
            self._result = saved

    def add_all(self, values: Sequence[Value]) -> Value:
        total = values[0]
        for v in values[1:]:
            total = self.op("add", total, v)
        return total

    def sum_components(self, v: Value) -> Value:
        return self.add_all([self.op("extract", v, index=k) for k in range(T.element_count(v.type))])

    def accumulate(self, v: Value, contribution: Value) -> None:
        if v not in self.varied:
            return
        previous = self.adj.get(v)
        self.adj[v] = contribution if previous is None else self.op("add", previous, contribution)

    def adjoint_or_zero(self, v: Value) -> Value:
        found = self.adj.get(v)
        return found if found is not None else self.zero(v.type)

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Adjoints set inside are forgotten after (a region's values are its own)."""
        saved = dict(self.adj)
        saved_arrays = dict(self.adjoint_arrays)
        try:
            yield
        finally:
            self.adj = saved
            self.adjoint_arrays.clear()
            self.adjoint_arrays.update(saved_arrays)

    def skipped_when_recomputing(self, op: Operation) -> bool:
        """Effects the first sweep performed: output, errors, writes of arrays no
        recomputation reads (writes of state are replayed)."""
        if op.name in ("array_store", "atomic_rmw"):
            return op.operands[0] not in self.stateful
        return op.name in _SKIPPED_WHEN_RECOMPUTING

    def take_snapshots(self, state: Sequence[Value], m: dict[Value, Value]) -> dict[Value, Value]:
        snapshots = {}
        for array in state:
            current = m.get(array, array)
            snapshots[array] = snapshot_storage(self, current, None)
            copy_elements(self, current, [], snapshots[array], [], current)
        return snapshots

    def restore_snapshots(self, snapshots: dict[Value, Value], m: dict[Value, Value],
                          index: Value | None = None) -> None:
        prefix = [index] if index is not None else []
        for array, copy in snapshots.items():
            current = m.get(array, array)
            copy_elements(self, copy, prefix, current, [], current)

    def clone(self, op: Operation, m: dict[Value, Value], recompute: bool) -> Operation | None:
        if op.name == "stop_gradient":
            m[op.result] = m.get(op.operands[0], op.operands[0])
            return None
        regions = [self.clone_block(r, m, recompute) for r in op.regions]
        new = Operation(op.name, [m.get(v, v) for v in op.operands], [r.type for r in op.results],
                        dict(op.attrs), regions, op.location)
        for old, fresh in zip(op.results, new.results):
            fresh.name_hint = old.name_hint
            m[old] = fresh
        if op.name == "constant":
            self.b.known_constants[new.result] = op.attrs["value"]
        self.b.block.append(new)
        return new

    def clone_block(self, block: Block, m: dict[Value, Value], recompute: bool,
                    prologue: Any = None) -> Block:
        new = Block([Value(a.type, a.name_hint) for a in block.args])
        m.update(zip(block.args, new.args))
        with self.b.at(new):
            if prologue is not None:
                prologue(new)
            for op in block.ops:
                if recompute and self.skipped_when_recomputing(op):
                    continue
                self.clone(op, m, recompute)
        return new

    def _constant_of(self, v: Value) -> Any:
        return self.b.known_constants.get(v)

    def _trip_count(self, start: Value, stop: Value, step: Value) -> Value:
        zero = self.b.constant(0, _INDEX)
        if self._constant_of(step) == 1:
            return self.op("max", self.op("sub", stop, start), zero)
        one = self.b.constant(1, _INDEX)
        span = self.op("add", self.op("sub", stop, start), self.op("sub", step, one))
        return self.op("max", self.op("floordiv", span, step), zero)

    def _storage(self, values: Sequence[Value], size: Value) -> dict[Value, Value]:
        storage = {
            v: self.b.create("array_new", [size], {
                "type": T.ArrayType(v.type, 1, True), "fill": "empty"}).result
            for v in values
        }
        self.tape_arrays.update(storage.values())
        return storage

    def reduction_identity(self, kind: str, t: Any) -> Value:
        value = {"add": 0.0, "mul": 1.0, "min": float("inf"), "max": float("-inf")}[kind]
        if not T.element_scalar(t).is_float:
            scalar = T.element_scalar(t)
            value = {"add": 0, "mul": 1}.get(kind, 0)
            return self.b.constant(value, scalar)
        return self.const(value, t)

    def linear_index(self, ivs: Sequence[Value], extents: Sequence[Value]) -> Value:
        index = ivs[0]
        for iv, extent in zip(ivs[1:], extents[1:]):
            index = self.op("add", self.op("mul", index, extent), iv)
        return index

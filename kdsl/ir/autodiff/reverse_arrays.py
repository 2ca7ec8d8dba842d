"""Adjoints of array elements the kernel reads: added into the adjoint array (or its
components' array) at the element's indices, or summed in a register a reverse loop
carries when every iteration reads the same element."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kdsl import types as T
from kdsl.ir.autodiff.emitter import _INDEX, AdjointEmitter
from kdsl.ir.autodiff.emitter_base import located_error
from kdsl.ir.core import Block, Operation, Value

LoadKey = tuple[Value, ...]


def _defined_in(block: Block) -> set[Value]:
    defined = set(block.args)
    for op in block.walk():
        defined.update(op.results)
        for region in op.regions:
            defined.update(region.args)
    return defined


class ArrayAdjoints(AdjointEmitter):
    """The adjoints of loads (the reverse sweep's parts in reverse_loops.py and
    reverse_parallel.py build on it)."""

    def reverse(self, ops: Sequence[Operation], m: dict[Value, Value],
                tapes: dict[Operation, Any]) -> None:
        """The adjoint of each op, last to first (ReverseSweep.reverse)."""
        raise NotImplementedError

    def _accumulate_array(self, op: Operation, m: dict[Value, Value]) -> None:
        if op.operands[0] not in self.adjoint_arrays:
            if op.result in self.adj:  # an element whose adjoint has nowhere to go
                raise located_error(
                    "the gradient cannot flow back through this read: the array it reads "
                    "has no adjoint (internal error: please report it)", op.location)
            return
        self._add_to_array(tuple(op.operands), m, self.adj[op.result])

    def _add_to_array(self, key: LoadKey, m: dict[Value, Value], value: Value) -> None:
        registers = self.load_registers
        if key in registers:
            registers[key] = self.op("add", registers[key], value)
            return
        array, *indices = key
        mapped = [m.get(v, v) for v in indices]
        components = self.component_adjoints.get(array)
        if components is not None:
            for c in range(T.element_count(value.type)):
                part = self.op("extract", value, index=c)
                self.b.create("atomic_rmw", [components, self.b.constant(c, _INDEX), *mapped, part],
                              {"kind": "add", "implicit": True})
            return
        self.b.create("atomic_rmw", [self.adjoint_arrays[array], *mapped, value],
                      {"kind": "add", "implicit": True})

    def _invariant_loads(self, body: Block) -> dict[LoadKey, Any]:
        """Elements every iteration of the loop reads at indices defined outside it."""
        defined = _defined_in(body)
        found: dict[LoadKey, Any] = {}
        for op in body.ops:
            if (op.name == "array_load" and op.operands[0] in self.adjoint_arrays
                    and op.result in self.varied
                    and not any(v in defined for v in op.operands[1:])):
                found.setdefault(tuple(op.operands), op.result.type)
        return found

    def _flush_registers(self, loads: dict[LoadKey, Any], sums: Sequence[Value], ran: Value,
                         m: dict[Value, Value]) -> None:
        """Adds the summed adjoints of invariant elements into their arrays (only when
        the loop ran, ``ran``: otherwise its indices were never checked)."""
        registers = self.load_registers
        outer = [(key, v) for key, v in zip(loads, sums) if key in registers]
        for key, v in outer:  # an enclosing loop sums them in its own register
            self._add_to_array(key, m, v)
        direct = [(key, v) for key, v in zip(loads, sums) if key not in registers]
        if not direct:
            return
        then, otherwise = Block(), Block()
        with self.b.at(then):
            for key, v in direct:
                self._add_to_array(key, m, v)
            self.b.create("yield", [])
        with self.b.at(otherwise):
            self.b.create("yield", [])
        self.b.create("if", [ran], {"types": []}, [then, otherwise], [])

"""The IR: typed SSA values, operations with regions, blocks and functions.

Control flow is structured: an operation may own regions (each a single `Block` with
arguments), and a region ends with a terminator (`yield`, `condition`, `return`).
Values defined in an enclosing block are visible inside nested regions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field
from itertools import chain
from typing import Any

from kdsl.ir.location import UNKNOWN_LOCATION, SourceLocation
from kdsl.records import dataclass


class Value:
    """An SSA value: the result of an operation or an argument of a block."""

    __slots__ = ("type", "name_hint", "__weakref__")

    def __init__(self, type: Any, name_hint: str = "") -> None:
        self.type = type
        self.name_hint = name_hint

    def __repr__(self) -> str:
        return f"<Value {self.name_hint or hex(id(self))}: {self.type}>"


class Operation:
    """One operation: a registered name, operands, results, attributes, regions."""

    __slots__ = ("name", "operands", "results", "attrs", "regions", "location", "parent")

    def __init__(
        self,
        name: str,
        operands: list[Value],
        result_types: list[Any],
        attrs: dict[str, Any] | None = None,
        regions: list[Block] | None = None,
        location: SourceLocation = UNKNOWN_LOCATION,
    ) -> None:
        self.name = name
        self.operands = list(operands)
        self.results = [Value(t) for t in result_types]
        self.attrs = dict(attrs or {})
        self.regions = list(regions or [])
        self.location = location
        self.parent: Block | None = None
        for region in self.regions:
            region.parent = self

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    def walk(self) -> Iterator[Operation]:
        """This operation and every operation nested in its regions, outermost first."""
        yield self
        if self.regions:
            yield from _walk(_nested_ops(self))

    def __repr__(self) -> str:
        return f"<Operation {self.name}>"


class Block:
    """A region's single block: arguments, then operations ending in a terminator."""

    __slots__ = ("args", "ops", "parent")

    def __init__(self, args: list[Value] | None = None) -> None:
        self.args = list(args or [])
        self.ops: list[Operation] = []
        self.parent: Operation | None = None

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None

    def walk(self) -> Iterator[Operation]:
        return _walk(iter(self.ops))


def _nested_ops(op: Operation) -> Iterator[Operation]:
    """The operations of ``op``'s regions, one region after the other (each list read as
    it is when its turn comes, as a loop over it would)."""
    return chain.from_iterable(region.ops for region in op.regions)


def _walk(ops: Iterator[Operation]) -> Iterator[Operation]:
    """Every operation of ``ops`` and, after each, those nested in it: the order of a
    recursive walk, with a stack of iterators in place of nested generators (whose every
    step resumes each enclosing one)."""
    stack = [ops]
    while stack:
        for op in stack[-1]:
            yield op
            if op.regions:  # read once the consumer is done with op, as a recursive walk does
                stack.append(_nested_ops(op))
                break
        else:
            stack.pop()


@dataclass
class Function:
    """A kernel or func: typed arguments, a body block ending in `return`."""

    name: str
    body: Block
    result_types: list[Any]
    is_kernel: bool
    location: SourceLocation = UNKNOWN_LOCATION
    arg_names: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def walk(self) -> Iterator[Operation]:
        return self.body.walk()


@dataclass
class Module:
    """The functions of one specialisation: the kernel and the funcs it calls."""

    kernel: Function
    funcs: dict[str, Function] = field(default_factory=dict)

    @property
    def functions(self) -> list[Function]:
        """The kernel, then every func."""
        return [self.kernel, *self.funcs.values()]


def replace_all_uses(root: Block, old: Value, new: Value) -> None:
    """Replaces every use of ``old`` by ``new`` in ``root`` and its nested regions."""
    for op in root.walk():
        op.operands = [new if v is old else v for v in op.operands]


def use_counts(root: Block) -> dict[Value, int]:
    counts: dict[Value, int] = {}
    for op in root.walk():
        for v in op.operands:
            counts[v] = counts.get(v, 0) + 1
    return counts

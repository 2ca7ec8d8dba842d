"""Builds operations at an insertion point, typing them through the op registry."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.location import UNKNOWN_LOCATION, SourceLocation
from kdsl.ir.ops import lookup


def typed_operation(
    name: str,
    operands: Sequence[Value],
    attrs: dict[str, Any] | None = None,
    regions: list[Block] | None = None,
    location: SourceLocation = UNKNOWN_LOCATION,
) -> Operation:
    """A new op, not yet in a block, whose result types its registry rule gives (the rule
    rejects operands of the wrong types)."""
    attrs = dict(attrs or {})
    result_types = lookup(name).result_types([v.type for v in operands], attrs)
    return Operation(name, list(operands), result_types, attrs, regions, location)


class IRBuilder:
    """Appends operations to the current block, with the current source location."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.location: SourceLocation = UNKNOWN_LOCATION
        self.known_constants: dict[Value, Any] = {}

    @contextmanager
    def at(self, block: Block) -> Iterator[Block]:
        saved = self.block
        self.block = block
        try:
            yield block
        finally:
            self.block = saved

    @contextmanager
    def located(self, location: SourceLocation) -> Iterator[None]:
        saved = self.location
        self.location = location
        try:
            yield
        finally:
            self.location = saved

    def create(
        self,
        name: str,
        operands: Sequence[Value] = (),
        attrs: dict[str, Any] | None = None,
        regions: list[Block] | None = None,
        result_types: list[Any] | None = None,
    ) -> Operation:
        if result_types is None:
            op = typed_operation(name, operands, attrs, regions, self.location)
        else:
            op = Operation(name, list(operands), result_types, dict(attrs or {}), regions,
                           self.location)
        self.block.append(op)
        return op

    def value(self, name: str, *operands: Value, **attrs: Any) -> Value:
        """Creates a single-result op and returns its result."""
        return self.create(name, operands, attrs).result

    def constant(self, value: Any, type: T.ScalarType) -> Value:
        if type.is_bool:
            value = bool(value)
        elif type.is_integer:
            value = int(value)
        else:
            value = float(value)
        result = self.create("constant", (), {"value": value, "type": type}).result
        self.known_constants[result] = value
        return result

    def cast(self, value: Value, type: Any) -> Value:
        if value.type == type:
            return value
        return self.value("cast", value, type=type)

"""Local variables: their values at a program point and their inferred types.

A local's type is the join of the types of all its assignments (``s = 0`` then
``s += x[i]`` makes ``s`` an f32). Lowering records every assignment's type; when the
joined types differ from those assumed, the function is lowered again with the new
assumption, until nothing changes.
"""

from __future__ import annotations

from typing import Any

from kdsl import types as T
from kdsl.records import dataclass


@dataclass(frozen=True)
class VariableType:
    type: Any
    weak: bool = False

    def __str__(self) -> str:
        return f"{self.type}{' (weak)' if self.weak else ''}"


class TypeConflict(Exception):
    """Two assignments give one local types with no common type."""


def join(a: VariableType, b: VariableType) -> VariableType:
    """The type a local needs to hold values of both types."""
    if a.type == b.type:
        return VariableType(a.type, a.weak and b.weak)
    if isinstance(a.type, T.ScalarType) and isinstance(b.type, T.ScalarType):
        t, weak = T.promote(a.type, a.weak, b.type, b.weak)
        return VariableType(t, weak)
    if isinstance(a.type, (T.VectorType, T.MatrixType)) and isinstance(
        b.type, (T.VectorType, T.MatrixType)
    ) and a.type.shape == b.type.shape:
        element, _ = T.promote_shaped(a.type.element, a.weak, b.type.element, b.weak)
        return VariableType(T.with_element_scalar(a.type, element), False)
    if isinstance(a.type, T.ArrayType) and isinstance(b.type, T.ArrayType) and (
        a.type.dtype == b.type.dtype and a.type.ndim == b.type.ndim
    ):  # one local may hold arrays of different layouts: the layout all of them have
        contiguous = bool(a.type.contiguous and b.type.contiguous)
        return VariableType(T.ArrayType(a.type.dtype, a.type.ndim, contiguous), False)
    raise TypeConflict(f"{a.type} and {b.type}")


class TypeTable:
    """Observed types of locals during one lowering, joined per name."""

    def __init__(self, assumed: dict[str, VariableType] | None = None) -> None:
        self.assumed: dict[str, VariableType] = dict(assumed or {})
        self.observed: dict[str, VariableType] = {}
        self.fixed: dict[str, VariableType] = {}

    def observe(self, name: str, vt: VariableType) -> None:
        old = self.observed.get(name)
        self.observed[name] = vt if old is None else join(old, vt)

    def declared(self, name: str) -> VariableType | None:
        return self.fixed.get(name) or self.assumed.get(name)

    def settled(self) -> bool:
        return all(self.assumed.get(k) == v for k, v in self.observed.items() if k not in self.fixed)

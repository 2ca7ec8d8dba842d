"""What an expression evaluates to while lowering, besides an IR value."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Value
from kdsl.records import dataclass


@dataclass(frozen=True)
class Static:
    """A compile-time Python object: a module, a function, a type, a string, None."""

    obj: Any


@dataclass(frozen=True)
class TupleValue:
    """A tuple of lowered values (``a.shape``, ``(x, y)``, a multiple return)."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class IterationSpace:
    """What a ``for`` iterates over: ``range`` (serial), ``prange`` or ``ndrange``."""

    parallel: bool
    starts: tuple[Value | Any, ...]
    stops: tuple[Value | Any, ...]
    steps: tuple[Value | Any, ...]


@dataclass(frozen=True)
class VectorMethod:
    """``v.norm`` before it is called: the kd builtin it aliases (by name) and the receiver."""

    builtin: str
    receiver: Value
    attr: str


@dataclass(frozen=True)
class FormattedText:
    """An f-string, for ``print``: its literal text and lowered values, in order."""

    pieces: tuple[Any, ...]

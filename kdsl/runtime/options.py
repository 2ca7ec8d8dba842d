"""Options a kernel is compiled with (part of every cache key)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuildOptions:
    """``debug``: bounds checks and asserts; ``fastmath``: reassociation and contraction."""

    debug: bool = False
    fastmath: bool = True

"""Options a kernel is compiled with (part of every cache key)."""

from __future__ import annotations

from kdsl.records import dataclass


@dataclass(frozen=True)
class BuildOptions:
    """``debug``: bounds checks and asserts; ``fastmath``: reassociation and contraction;
    ``gradient``: compile the gradient with respect to these arguments (kd.grad);
    ``vjp``: as its vector-Jacobian product instead (kd.Tape); ``tangent``: compile the
    Jacobian-vector product with respect to these arguments (kd.jvp)."""

    debug: bool = False
    fastmath: bool = True
    gradient: tuple[int, ...] | None = None
    vjp: bool = False
    tangent: tuple[int, ...] | None = None

"""Options a kernel is compiled with (part of every cache key)."""

from __future__ import annotations

from kdsl.records import dataclass


@dataclass(frozen=True)
class BuildOptions:
    """``debug``: bounds checks and asserts; ``fastmath``: reassociation and contraction;
    ``gradient``: compile the gradient with respect to these arguments (kd.grad);
    ``vjp``: as its vector-Jacobian product instead (kd.Tape); ``tangent``: compile the
    Jacobian-vector product with respect to these arguments (kd.jvp); ``unit_axes``: for
    a gradient, the axes of size 1 of differentiated array arguments, as (position, axes)
    pairs: whole-array adjoints sum over them where the argument was broadcast;
    ``gradient_of_loops``: take the gradient of the loops whole-array expressions lower
    to (an array the kernel writes shares memory with another argument, which the
    whole-array adjoints take to be apart)."""

    debug: bool = False
    fastmath: bool = True
    gradient: tuple[int, ...] | None = None
    vjp: bool = False
    tangent: tuple[int, ...] | None = None
    unit_axes: tuple[tuple[int, tuple[int, ...]], ...] = ()
    gradient_of_loops: bool = False

"""Kernel-language source made from templates, compiled as funcs (inlined into the
user's kernels) or as kernels (the primitives called from Python).

The frontend reads a func's source back through ``linecache``, as it reads any func's,
so a generated func is lowered, checked and optimised like the user's own code.
"""

from __future__ import annotations

import ast
import functools
import linecache
from typing import Any

from kdsl import types as T

# The compile-time estimate of a parallel loop's work (codegen.parallel_cost) counts an
# inner loop as 64 trips, so a parallel loop over a few long blocks looks too small for a
# team of threads and runs on the calling thread. A block loop's body goes inside this
# one-trip loop (free at run time) to be counted one loop deeper.
ONE_TRIP = "for _ in range(1):"


def kd_name(t: T.ScalarType | T.VectorType) -> str:
    """How generated source spells the scalar type: ``kd.f32``, ``kd.bool_``."""
    return "kd.bool_" if t == T.bool_ else f"kd.{t.name}"


def define(source: str, name: str, label: str, scope: dict[str, Any] | None = None) -> Any:
    """The plain function ``name`` defined by ``source`` (with ``kd`` and ``scope``'s names
    in scope)."""
    import kdsl

    filename = f"<kdsl {label}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    bits, float_from_bits = _bits_builtins()
    namespace: dict[str, Any] = {"kd": kdsl, "_bits": bits, "_float_from_bits": float_from_bits,
                                 **(scope or {})}
    exec(compile(ast.parse(source), filename, "exec"), namespace)  # noqa: S102
    return namespace[name]


@functools.cache
def _bits_builtins() -> tuple[Any, Any]:
    from kdsl.primitives.bits import bits, float_from_bits

    return bits, float_from_bits


def as_func(fn: Any) -> Any:
    from kdsl.runtime.kernel import Func

    return Func(fn)


def as_kernel(fn: Any) -> Any:
    from kdsl.runtime.kernel import Kernel

    return Kernel(fn)

"""``kd.cumsum`` of arrays of several axes in kernels, as NumPy: along one axis (every
line along it scanned serially, the lines in parallel), or with ``axis=None`` over the
array flattened in C order (copied into a new 1-D array in parallel, then scanned as a
1-D array is). The loops are generated kernel-language funcs, inlined as the user's are."""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.generated import as_func, define, kd_name


def _indices(ndim: int) -> list[str]:
    return [f"i{k}" for k in range(ndim)]


def _parallel_header(axes: list[int]) -> str:
    names = ", ".join(f"i{k}" for k in axes)
    extents = ", ".join(f"a.shape[{k}]" for k in axes)
    return f"for {names} in kd.ndrange({extents}):" if len(axes) > 1 else \
        f"for {names} in kd.prange({extents}):"


@functools.cache
def flatten_func(ndim: int) -> Any:
    """``flatten(a, flat)``: the elements of ``a`` (``ndim`` axes, at most 4) into the 1-D
    ``flat`` in C order."""
    inner = list(range(1, ndim))
    offset = "i0"
    for k in inner:
        offset = f"({offset}) * a.shape[{k}] + i{k}"
    lines = ["@kd.func", "def flatten(a, flat):", f"    {_parallel_header([0])}"]
    depth = 2
    for k in inner:
        lines.append("    " * depth + f"for i{k} in range(a.shape[{k}]):")
        depth += 1
    lines.append("    " * depth + f"flat[{offset}] = a[{', '.join(_indices(ndim))}]")
    return as_func(define("\n".join(lines) + "\n", "flatten", f"flatten {ndim}"))


@functools.cache
def scan_axis_func(ndim: int, axis: int, result: T.ScalarType, exclusive: bool) -> Any:
    """``scan_axis(a, out)``: the running sums of ``a`` (``ndim`` axes, at most 4) along
    ``axis`` in type ``result``, written to ``out`` of the same shape."""
    r = kd_name(result)
    index = ", ".join(_indices(ndim))
    others = [k for k in range(ndim) if k != axis]
    step = ["out[{i}] = s", "s = s + v"] if exclusive else ["s = s + v", "out[{i}] = s"]
    lines = [
        "@kd.func",
        "def scan_axis(a, out):",
        f"    {_parallel_header(others)}",
        f"        s = {r}(0)",
        f"        for i{axis} in range(a.shape[{axis}]):",
        f"            v = {r}(a[{index}])",
        *(f"            {s.format(i=index)}" for s in step),
    ]
    label = f"scan axis {axis} of {ndim} {result}{' exclusive' if exclusive else ''}"
    return as_func(define("\n".join(lines) + "\n", "scan_axis", label))

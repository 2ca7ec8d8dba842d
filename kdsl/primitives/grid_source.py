"""The neighbour grid in the kernel language: its build (a func) and its query (a loop
nest around the user's loop body, lowered in place of ``for j in grid.neighbors(...)``).

Cells tile the domain ``[lower, upper)``: ``floor((upper - lower) / cell_size)`` of them
along each axis (at least one), so each is at least ``cell_size`` wide. A particle's cell
is its position's, clamped to the border cells (open boundaries) or wrapped (periodic).
The build sorts particle indices by cell with the radix sort (stable: within a cell,
particles keep their order), records where each cell's run starts, and keeps the
positions in that order so a query reads each cell's positions contiguously.
"""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.generated import as_func, define, kd_name
from kdsl.primitives.sort_source import radix_sort_func

AXES = ("x", "y", "z")


def _build_source(dim: int, scalar: T.ScalarType, periodic: bool) -> str:
    axes = AXES[:dim]
    f = kd_name(scalar)
    vec = kd_name(T.vector_type(scalar, dim))
    lines = [
        "@kd.func",
        "def build_grid(x, cell_size, lower, upper):",
        "    n = x.shape[0]",
        "    extent = upper - lower",
    ]
    for a in axes:
        lines += [f"    n{a} = max(kd.i64(extent.{a} / cell_size), 1)"]
    lines += [
        f"    inverse = {vec}({', '.join(f'{f}(n{a}) / extent.{a}' for a in axes)})",
        f"    cells = {' * '.join(f'n{a}' for a in axes)}",
        "    keys = kd.empty(n, kd.i32)",
        "    order = kd.empty(n, kd.i32)",
        "    for i in kd.prange(n):",
        "        p = (x[i] - lower) * inverse",
    ]
    for a in axes:
        lines += [f"        c{a} = kd.i64(kd.floor(p.{a}))"]
        lines += ([f"        c{a} = c{a} % n{a}"] if periodic else
                  [f"        c{a} = min(max(c{a}, 0), n{a} - 1)"])
    flat = "c" + axes[0]
    for a in axes[1:]:
        flat = f"({flat}) * n{a} + c{a}"
    lines += [
        f"        keys[i] = kd.i32({flat})",
        "        order[i] = kd.i32(i)",
        "    radix_sort(keys, order)",
        "    start = kd.empty(cells + 1, kd.i64)",
        "    for k in kd.prange(n):",
        "        first = -1 if k == 0 else kd.i64(keys[k - 1])",
        "        for c in range(first + 1, kd.i64(keys[k]) + 1):",
        "            start[c] = k",
        "    last = -1 if n == 0 else kd.i64(keys[n - 1])",
        "    for c in range(last + 1, cells + 1):",
        "        start[c] = n",
        f"    sorted_x = kd.empty(n, {vec})",
        "    for k in kd.prange(n):",
        "        sorted_x[k] = x[order[k]]",
        f"    return start, order, sorted_x, lower, inverse, extent, {', '.join(f'n{a}' for a in axes)}",
    ]
    return "\n".join(lines) + "\n"


def _cells_source(dim: int) -> str:
    axes = AXES[:dim]
    lines = [
        "@kd.func",
        "def grid_cells(cell_size, lower, upper):",
        "    extent = upper - lower",
        f"    if not (cell_size > 0 and {' and '.join(f'extent.{a} > 0' for a in axes)}):",
        "        return kd.i64(-1)",
        "    total = kd.f64(1.0)",
    ]
    for a in axes:
        lines += [f"    total = total * max(kd.floor(kd.f64(extent.{a} / cell_size)), 1.0)"]
    lines += [
        f"    if not total < {MAX_CELLS}.0:",
        f"        return kd.i64({MAX_CELLS})",
        "    return kd.i64(total)",
    ]
    return "\n".join(lines) + "\n"


#: The most cells a grid may have (its cell keys are int32).
MAX_CELLS = 2**31 - 1


@functools.cache
def cells_func(dim: int) -> Any:
    """``grid_cells(cell_size, lower, upper) -> i64``: the number of cells a grid over
    ``[lower, upper)`` has (``MAX_CELLS`` when it would have more), or -1 when
    ``cell_size`` is not positive or ``upper`` does not exceed ``lower`` on every axis."""
    return as_func(define(_cells_source(dim), "grid_cells", f"neighbor grid cells {dim}d"))


@functools.cache
def build_func(dim: int, scalar: T.ScalarType, periodic: bool) -> Any:
    """``build_grid(x, cell_size, lower, upper)``: the grid's arrays and sizes."""
    return as_func(define(_build_source(dim, scalar, periodic), "build_grid",
                          f"neighbor grid build {dim}d {scalar} {periodic}",
                          {"radix_sort": radix_sort_func(T.i32, T.i32)}))


def query_source(dim: int, periodic: bool, target: str, prefix: str) -> str:
    """The loop nest visiting every particle within ``{prefix}radius`` of ``{prefix}q``
    once, binding its index to ``target``; ``pass`` marks where the body goes. Names
    starting with ``prefix`` are the grid's values, bound by the caller.

    The cells along the last axis that a query reaches lie next to each other in the
    sorted order, so the innermost loop walks one run of particles per row of cells (two
    where a periodic row wraps around), reading their positions contiguously. Cell
    offsets wrap by a compare (the reach is under a grid's width), and the indices of
    the run and of its particles are non-negative by construction, so they are read
    without Python's negative-index wrap."""
    g = prefix
    axes = AXES[:dim]
    rows, last = axes[:-1], axes[-1]
    lines = [f"{g}r2 = {g}radius * {g}radius",
             f"{g}p = ({g}q - {g}lower) * {g}inverse",
             f"{g}inverse_extent = 1.0 / {g}extent"]
    for a in axes:
        # the reach in cells, kept within [-1, n] before it becomes an integer: a radius
        # longer than the domain (1e30, inf) reaches every cell, a NaN or negative one none
        lines += [f"{g}c{a} = kd.i64(kd.floor({g}p.{a}))",
                  f"{g}span{a} = {g}radius * {g}inverse.{a}",
                  f"if not {g}span{a} >= -1.0:",
                  f"    {g}span{a} = -1.0",
                  f"if {g}span{a} > {g}n{a}:",
                  f"    {g}reach{a} = {g}n{a}",
                  "else:",
                  f"    {g}reach{a} = kd.i64(kd.ceil({g}span{a}))"]
        if periodic:
            lines += [f"{g}c{a} = {g}c{a} % {g}n{a}",
                      f"{g}s{a} = {g}c{a} - {g}reach{a}",
                      f"{g}e{a} = {g}c{a} + {g}reach{a} + 1",
                      f"if {g}e{a} - {g}s{a} > {g}n{a}:",
                      f"    {g}s{a} = 0",
                      f"    {g}e{a} = {g}n{a}"]
        else:
            lines += [f"{g}c{a} = min(max({g}c{a}, 0), {g}n{a} - 1)",
                      f"{g}s{a} = max({g}c{a} - {g}reach{a}, 0)",
                      f"{g}e{a} = min({g}c{a} + {g}reach{a} + 1, {g}n{a})"]
    z = last
    if periodic:  # the row's cells as up to two runs, in the order of the offsets
        lines += [f"{g}first_lo = {g}s{z}",
                  f"{g}first_hi = {g}e{z}",
                  f"{g}second_lo = {g}e{z}",
                  f"{g}second_hi = {g}e{z}",
                  f"if {g}s{z} < 0:",
                  f"    {g}first_lo = {g}s{z} + {g}n{z}",
                  f"    {g}first_hi = {g}n{z}",
                  f"    {g}second_lo = 0",
                  f"elif {g}e{z} > {g}n{z}:",
                  f"    {g}first_hi = {g}n{z}",
                  f"    {g}second_lo = 0",
                  f"    {g}second_hi = {g}e{z} - {g}n{z}"]
    indent = ""
    for a in rows:
        lines += [f"{indent}for {g}o{a} in range({g}s{a}, {g}e{a}):"]
        indent += "    "
        if periodic:
            lines += [f"{indent}{g}w{a} = {g}o{a}",
                      f"{indent}if {g}w{a} < 0:",
                      f"{indent}    {g}w{a} = {g}w{a} + {g}n{a}",
                      f"{indent}elif {g}w{a} >= {g}n{a}:",
                      f"{indent}    {g}w{a} = {g}w{a} - {g}n{a}"]
        else:
            lines += [f"{indent}{g}w{a} = {g}o{a}"]
    row = f"{g}w{axes[0]}"
    for a in rows[1:]:
        row = f"({row}) * {g}n{a} + {g}w{a}"
    row = f"({row}) * {g}n{last}"
    lines += [f"{indent}{g}row = {row}"]
    if periodic:
        lines += [f"{indent}for {g}part in range(2):",
                  f"{indent}    {g}lo = {g}first_lo if {g}part == 0 else {g}second_lo",
                  f"{indent}    {g}hi = {g}first_hi if {g}part == 0 else {g}second_hi"]
        indent += "    "
    else:
        lines += [f"{indent}{g}lo = {g}s{z}",
                  f"{indent}{g}hi = {g}e{z}"]
    lines += [f"{indent}{g}begin = kd.i64(kd.u32({g}start[{g}row + {g}lo]))",
              f"{indent}{g}end = kd.i64(kd.u32({g}start[{g}row + {g}hi]))",
              f"{indent}for {g}k in range({g}begin, {g}end):"]
    indent += "    "
    lines += [f"{indent}{g}d = {g}sorted_x[{g}k] - {g}q"]
    if periodic:
        lines += [f"{indent}{g}d = {g}d - {g}extent * kd.floor({g}d * {g}inverse_extent + 0.5)"]
    lines += [f"{indent}if kd.dot({g}d, {g}d) <= {g}r2:",
              f"{indent}    {target} = kd.i64(kd.u32({g}order[{g}k]))",
              f"{indent}    pass"]
    return "\n".join(lines) + "\n"

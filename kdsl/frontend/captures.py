"""Arrays a kernel reads from globals and closures (as Taichi fields and Warp's module
arrays are used): captured by reference, never copied.

Each captured array is a hidden parameter of the kernel, appended after the user's
arguments and read from its global or closure cell at every call, so a kernel's writes
are visible to the caller and a new array bound to the name is seen on the next call.
Funcs that read captured arrays receive every capture of the kernel as hidden trailing
parameters too (unused ones vanish when funcs are inlined).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import numpy as np

from kdsl.frontend.analysis import assigned_names, scanned_once
from kdsl.frontend.source import MISSING, FunctionSource
from kdsl.records import dataclass


@dataclass(frozen=True)
class ArrayCapture:
    """One global or closure variable holding an array that some function reads."""

    name: str  # the variable's name, as the user wrote it
    owner: str  # the qualified name of the function that reads it (for messages)
    identity: tuple  # the cell or (globals dict, name) the value is read from
    getter: Callable[[], Any]

    def read(self) -> Any:
        return self.getter()


def is_array_object(obj: Any) -> bool:
    """NumPy arrays, kdsl's arrays and CUDA arrays: what a kernel takes as an array."""
    return isinstance(obj, np.ndarray) or hasattr(obj, "__kdsl_array__") or bool(
        getattr(type(obj), "__kdsl_cuda__", False)
    )


def variable_identity(fn: Any, name: str) -> tuple[tuple, Callable[[], Any]]:
    """Where a free name's value lives (a closure cell, or a module's globals), and a
    function reading it now."""
    code = fn.__code__
    if fn.__closure__ and name in code.co_freevars:
        cell = fn.__closure__[code.co_freevars.index(name)]
        return ("cell", id(cell)), lambda: cell.cell_contents
    namespace = fn.__globals__
    return ("global", id(namespace), name), lambda: namespace[name]


def bound_names(tree: ast.FunctionDef) -> set[str]:
    """Parameters and names assigned directly (``grid[i] = v`` does not bind ``grid``)."""
    return set(scanned_once(tree, "bound names", _bound_names))


def _bound_names(tree: ast.FunctionDef) -> frozenset[str]:
    return frozenset(assigned_names(tree.body, component_bases=False)) | {a.arg for a in tree.args.args}


def _free_names(tree: ast.FunctionDef) -> tuple[str, ...]:
    """The names ``tree`` uses and does not bind, in first-seen order."""
    bound = _bound_names(tree)
    names = (node.id for node in ast.walk(tree) if isinstance(node, ast.Name))
    return tuple(dict.fromkeys(name for name in names if name not in bound))


def free_array_names(source: FunctionSource) -> list[tuple[str, Any]]:
    """The free names of ``source`` that refer to arrays now, in first-seen order."""
    found: list[tuple[str, Any]] = []
    for name in scanned_once(source.tree, "free names", _free_names):
        obj = source.lookup(name)
        if obj is not MISSING and is_array_object(obj):
            found.append((name, obj))
    return found


def capture_for(source: FunctionSource, name: str) -> ArrayCapture:
    identity, getter = variable_identity(source.function, name)
    return ArrayCapture(name, source.function.__qualname__, identity, getter)

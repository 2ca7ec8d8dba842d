"""What a kernel's compiled code depends on besides its own source: the funcs it calls
(transitively) and the Python constants it reads from globals and closures.

Found by a static scan of the AST, so that a warm cache can be checked without lowering.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import field
from typing import Any

import numpy as np

from kdsl.frontend.analysis import scanned_once
from kdsl.frontend.captures import ArrayCapture, capture_for, free_array_names
from kdsl.frontend.source import MISSING, read_function
from kdsl.random_numbers import randint, randn, random
from kdsl.records import dataclass

Getter = Callable[[], Any]


@dataclass
class Dependencies:
    sources: list[str] = field(default_factory=list)
    constants: list[tuple[str, Getter, Any]] = field(default_factory=list)
    arrays: list[ArrayCapture] = field(default_factory=list)  # hidden array parameters
    # the functions read, with the code object each was read for (a reload, or an
    # autoreload that swaps __code__, makes the compiled code stale)
    functions: list[tuple[Any, Any]] = field(default_factory=list)
    # the funcs called, with how the kernel reaches each (``helpers.f`` after reloading
    # helpers is another func)
    funcs: list[tuple[Getter, Any]] = field(default_factory=list)
    uses_random: bool = False  # it or a func it calls draws random numbers (kd.random, ...)

    def unchanged(self) -> bool:
        """Whether code compiled for these dependencies is still what the source says."""
        for function, code in self.functions:
            if function.__code__ is not code:
                return False
        for getter, func in self.funcs:
            try:
                if getter() is not func:
                    return False
            except Exception:  # noqa: BLE001 - a vanished func is a change
                return False
        for _, getter, value in self.constants:
            try:
                current = getter()
            except Exception:  # noqa: BLE001 - a vanished global is a change
                return False
            if type(value) is _Snapshot:
                if not (value.frozen and current is value.source) and (
                        constant_snapshot(current) != value):
                    return False
            elif current is not value and not (type(current) is type(value) and current == value):
                return False
        return True

    def key_parts(self) -> list[str]:
        return self.sources + [f"{name}={type(v).__name__}:{v!r}" for name, _, v in self.constants] + [
            f"array {c.owner}:{c.name}" for c in self.arrays
        ] + (["random stream"] if self.uses_random else [])


def _is_constant(obj: Any) -> bool:
    return isinstance(obj, (bool, int, float, np.generic)) and not isinstance(obj, str)


class _Snapshot(str):
    """The value of a constant tuple, list or string as text that names every item's
    type (``(1,)`` and ``(1.0,)`` compile differently), compared at each call: a list
    changed in place, or a tuple bound anew, is a change the compiled code missed. A
    value with nothing mutable in it (``frozen``) is unchanged while it is the same
    object, which costs a call nothing."""

    source: Any
    frozen: bool


def constant_snapshot(obj: Any) -> _Snapshot | None:
    """A snapshot of a tuple or list of numbers, strings, vectors and such tuples, or of
    a string (read as constants by the kernels that use them); None for anything else."""
    text = _snapshot_text(obj, depth=0)
    if text is None:
        return None
    snapshot = _Snapshot(text)
    snapshot.source = obj
    snapshot.frozen = _immutable(obj)
    return snapshot


def _immutable(obj: Any) -> bool:
    if isinstance(obj, tuple):
        return all(_immutable(item) for item in obj)
    return isinstance(obj, str) or _is_constant(obj)


def _snapshot_text(obj: Any, depth: int) -> str | None:
    if isinstance(obj, str) or _is_constant(obj):
        return f"{type(obj).__name__}:{obj!r}"
    if depth > 0 and isinstance(obj, np.ndarray) and obj.ndim <= 2 and obj.size <= 16:
        return f"{type(obj).__name__}:{obj.dtype}:{obj.tolist()!r}"  # a vector or matrix
    if isinstance(obj, (tuple, list)) and depth < 4:
        items = [_snapshot_text(item, depth + 1) for item in obj]
        if any(item is None for item in items):
            return None
        return f"{type(obj).__name__}({', '.join(items)})"  # type: ignore[arg-type]
    return None


def _global_getter(fn: Any, name: str) -> Getter:
    code = fn.__code__
    if fn.__closure__ and name in code.co_freevars:
        cell = fn.__closure__[code.co_freevars.index(name)]
        return lambda: cell.cell_contents
    namespace = fn.__globals__
    return lambda: namespace[name]


def _attribute_chain(node: ast.Attribute) -> list[str] | None:
    names = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        names.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    names.append(current.id)
    return names[::-1]


def _global_reads(tree: ast.FunctionDef) -> list[tuple[str, ...]]:
    """What ``tree`` reads that is not local, in the order of ``ast.walk``: a name as
    ``(name,)``, an attribute chain ``a.b.c`` as ``(a, b, c)`` (whose ``a`` is read too)."""
    locals_ = {a.arg for a in tree.args.args}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                # only the names bound: a[N] = ... and h[kd.randint(0, n)] += 1 read N, kd
                locals_.update(n.id for n in ast.walk(t)
                               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    reads: list[tuple[str, ...]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in locals_:
            reads.append((node.id,))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            chain = _attribute_chain(node)
            if chain and chain[0] not in locals_:
                reads.append(tuple(chain))
    return reads


def scan_dependencies(fn: Any) -> Dependencies:
    """The sources of ``fn`` and its funcs, and the constants they read, in a stable order."""
    deps = Dependencies()
    seen: set[Any] = set()

    def visit(function: Any) -> None:
        if function in seen:
            return
        seen.add(function)
        source = read_function(function)
        deps.functions.append((function, function.__code__))
        # the position matters too: error messages name absolute lines
        deps.sources.append(f"{source.file}:{source.first_line}\n{source.text}")
        for name, _ in free_array_names(source):
            capture = capture_for(source, name)
            if all(c.identity != capture.identity for c in deps.arrays):
                deps.arrays.append(capture)
        for chain in scanned_once(source.tree, "global reads", _global_reads):
            if len(chain) == 1:
                obj = source.lookup(chain[0])
                if obj is MISSING:
                    continue
                _note(function, chain[0], obj, _global_getter(function, chain[0]))
            else:
                obj = source.lookup(chain[0])
                getter_base = _global_getter(function, chain[0])
                for attr in chain[1:]:
                    obj = getattr(obj, attr, MISSING)
                    if obj is MISSING:
                        break
                if obj is not MISSING:
                    path = chain[1:]

                    def getter(base: Getter = getter_base, path: tuple[str, ...] = path) -> Any:
                        value = base()
                        for attr in path:
                            value = getattr(value, attr)
                        return value

                    _note(function, ".".join(chain), obj, getter)

    def _note(function: Any, name: str, obj: Any, getter: Getter) -> None:
        if any(obj is r for r in (random, randn, randint)):
            deps.uses_random = True
        if _is_constant(obj):
            deps.constants.append((f"{function.__qualname__}:{name}", getter, obj))
        elif (snapshot := constant_snapshot(obj)) is not None:
            key = f"{function.__qualname__}:{name}"
            if all(known != key for known, _, _ in deps.constants):  # read more than once
                deps.constants.append((key, getter, snapshot))
        elif getattr(obj, "__kdsl_func__", False):
            deps.funcs.append((getter, obj))
            visit(obj.py_function)
            custom = getattr(obj, "custom_gradient", None)
            if custom is not None:  # a hand-written gradient is part of the kernel's code
                visit(custom.py_function)

    visit(fn)
    return deps

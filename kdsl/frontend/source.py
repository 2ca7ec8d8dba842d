"""Reading a Python function's source, its AST, and the names it closes over."""

from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kdsl.errors import CompileError
from kdsl.ir.location import SourceLocation

_MISSING = object()


@dataclass
class FunctionSource:
    """A function's parsed definition with the file and line offset of its source."""

    function: Callable[..., Any]
    tree: ast.FunctionDef
    text: str
    file: str
    first_line: int
    column_offset: int

    @property
    def name(self) -> str:
        return self.function.__name__

    def location(self, node: ast.AST) -> SourceLocation:
        line = getattr(node, "lineno", 1)
        column = getattr(node, "col_offset", 0)
        return SourceLocation(
            self.file, self.first_line + line - 1, column + self.column_offset, self.name
        )

    def lookup(self, name: str) -> Any:
        """The object a free name refers to: a closure cell, a global, or a builtin."""
        fn = self.function
        code = fn.__code__
        if fn.__closure__ and name in code.co_freevars:
            cell = fn.__closure__[code.co_freevars.index(name)]
            try:
                return cell.cell_contents
            except ValueError:
                return _MISSING
        value = fn.__globals__.get(name, _MISSING)
        if value is _MISSING:
            value = getattr(builtins, name, _MISSING)
        return value

    def fingerprint(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


MISSING = _MISSING
_CACHE: dict[Callable[..., Any], FunctionSource] = {}


def read_function(fn: Callable[..., Any]) -> FunctionSource:
    """Parses ``fn``'s source (never traces it); cached per function object."""
    cached = _CACHE.get(fn)
    if cached is not None:
        return cached
    try:
        lines, first_line = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise CompileError(f"cannot read the source of {fn.__qualname__}: {exc}") from None
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    indent = len(raw) - len(raw.lstrip()) - (len(text) - len(text.lstrip()))
    module = ast.parse(text)
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise CompileError(f"{fn.__qualname__} is not a plain function definition")
    source = FunctionSource(fn, tree, text, file, first_line, max(0, indent))
    _CACHE[fn] = source
    return source

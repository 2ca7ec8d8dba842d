"""Reading a Python function's source, its AST, and the names it closes over."""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import textwrap
import weakref
from collections.abc import Callable
from typing import Any

from kdsl.digests import sha256
from kdsl.errors import CompileError
from kdsl.ir.location import SourceLocation
from kdsl.records import dataclass

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
        return sha256(self.text.encode()).hexdigest()


MISSING = _MISSING


def _source_lines(fn: Callable[..., Any]) -> tuple[list[str], int, str]:
    """The lines of ``fn``'s definition, found from its code object's positions (much
    faster than ``inspect.getsourcelines``, which tokenises the file)."""
    code = fn.__code__
    file = code.co_filename
    linecache.checkcache(file)  # a file edited (and reloaded) since it was last read
    all_lines = linecache.getlines(file, fn.__globals__)
    if not all_lines:
        lines, first = inspect.getsourcelines(fn)
        return lines, first, inspect.getsourcefile(fn) or file
    first = code.co_firstlineno
    last = first
    stack = [code]
    while stack:
        c = stack.pop()
        if hasattr(c, "co_positions"):
            last = max([last] + [p[1] for p in c.co_positions() if p[1] is not None])
        else:  # Python 3.10
            last = max([last] + [line for _, _, line in c.co_lines() if line is not None])
        stack.extend(k for k in c.co_consts if hasattr(k, "co_code"))
    lines = all_lines[first - 1:last]
    if not lines or not lines[0].lstrip().startswith(("@", "def ")):
        lines, first = inspect.getsourcelines(fn)
    return lines, first, file
@dataclass(frozen=True)
class _Parsed:
    """What reading a function's source gave, for the code object it was read for."""

    code: Any
    tree: ast.FunctionDef
    text: str
    file: str
    first_line: int
    column_offset: int


# weak: a function that is no longer referenced takes its parsed source with it
_CACHE: weakref.WeakKeyDictionary[Callable[..., Any], _Parsed] = weakref.WeakKeyDictionary()


def reject_async(fn: Callable[..., Any]) -> None:
    """A located CompileError, at decoration, for an ``async def`` marked as a kernel or func."""
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        read_function(fn)
        raise CompileError(f"{fn.__qualname__} is an 'async def': kernels and funcs must be "
                           "plain 'def' functions")


def read_function(fn: Callable[..., Any]) -> FunctionSource:
    """Parses ``fn``'s source (never traces it); cached per function object and code
    object (a reload, or an autoreload that swaps ``__code__``, reads it again)."""
    try:
        cached = _CACHE.get(fn)
    except TypeError:  # not weakly referenceable
        cached = None
    if cached is not None and cached.code is fn.__code__:
        return FunctionSource(fn, cached.tree, cached.text, cached.file, cached.first_line,
                              cached.column_offset)
    try:
        lines, first_line, file = _source_lines(fn)
    except (OSError, TypeError) as exc:
        raise CompileError(f"cannot read the source of {fn.__qualname__}: {exc}") from None
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    indent = len(raw) - len(raw.lstrip()) - (len(text) - len(text.lstrip()))
    module = ast.parse(text)
    tree = module.body[0]
    if isinstance(tree, ast.FunctionDef):
        from kdsl.frontend.sequence_loops import rewrite_sequence_loops

        tree = rewrite_sequence_loops(tree)
    if not isinstance(tree, ast.FunctionDef):
        where = SourceLocation(file, first_line + getattr(tree, "lineno", 1) - 1,
                               getattr(tree, "col_offset", 0) + max(0, indent), fn.__name__)
        kind = "an 'async def'" if isinstance(tree, ast.AsyncFunctionDef) else "not a plain 'def'"
        raise CompileError(f"{fn.__qualname__} is {kind}: kernels and funcs must be plain "
                           "'def' functions", where)
    source = FunctionSource(fn, tree, text, file, first_line, max(0, indent))
    try:
        _CACHE[fn] = _Parsed(fn.__code__, tree, text, file, first_line, max(0, indent))
    except TypeError:
        pass
    return source

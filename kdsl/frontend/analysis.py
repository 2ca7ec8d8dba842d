"""Scans of the Python AST that the lowering needs before it builds a construct."""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

_Result = TypeVar("_Result")
_Tree = TypeVar("_Tree", bound=ast.AST)
# by function tree (a function's parsed source, shared by every lowering and never
# changed: rewrites work on copies), what each whole-tree scan found
_SCANS: weakref.WeakKeyDictionary[ast.AST, dict[str, Any]] = weakref.WeakKeyDictionary()


def scanned_once(tree: _Tree, name: str, scan: Callable[[_Tree], _Result]) -> _Result:
    """``scan(tree)``, computed once per tree (callers must not change what it returns)."""
    found = _SCANS.get(tree)
    if found is None:
        found = _SCANS[tree] = {}
    if name not in found:
        found[name] = scan(tree)
    return found[name]


# by statement or expression node, what the scans below found in it (nodes are never
# changed once made; a rewrite makes new ones)
_FACTS: weakref.WeakKeyDictionary[ast.AST, dict[Any, Any]] = weakref.WeakKeyDictionary()
_Key = TypeVar("_Key")


def _node_fact(node: ast.AST, key: _Key, find: Callable[[ast.AST, _Key], _Result]) -> _Result:
    """``find(node, key)``, once per node and key."""
    facts = _FACTS.get(node)
    if facts is None:
        facts = _FACTS[node] = {}
    if key not in facts:
        facts[key] = find(node, key)
    return facts[key]  # type: ignore[no-any-return]


def _walk_no_functions(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    stack = list(nodes)[::-1]
    while stack:
        node = stack.pop()
        yield node
        children = [
            c for c in ast.iter_child_nodes(node)
            if not isinstance(c, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef))
        ]
        stack.extend(reversed(children))


def _target_names(target: ast.AST, component_bases: bool = True) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _target_names(elt, component_bases)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value, component_bases)
    elif isinstance(target, (ast.Attribute, ast.Subscript)) and component_bases:
        # v.x = 1 and v[0] = 1 rebind the local v when v is a vector
        base = target.value
        while isinstance(base, (ast.Attribute, ast.Subscript)):
            base = base.value
        if isinstance(base, ast.Name):
            yield base.id


def assigned_names(nodes: Iterable[ast.AST], component_bases: bool = True) -> list[str]:
    """Names bound anywhere in ``nodes`` (assignments, loop targets), in first-seen order.

    With ``component_bases``, ``v`` counts as bound by ``v[0] = 1`` and ``v.x = 1`` (which
    rebind a local vector); without, only names assigned directly count."""
    seen: dict[str, None] = {}
    for node in nodes:  # the walk of a list is that of each node in turn
        for name in _node_fact(node, ("assigned", component_bases), _assigned_in):
            seen.setdefault(name, None)
    return list(seen)


def _assigned_in(node: ast.AST, key: tuple[str, bool]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for n in _walk_no_functions([node]):
        targets: list[ast.AST] = []
        if isinstance(n, ast.Assign):
            targets = list(n.targets)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        elif isinstance(n, ast.For):
            targets = [n.target]
        elif isinstance(n, ast.NamedExpr):
            targets = [n.target]
        for t in targets:
            for name in _target_names(t, key[1]):
                seen.setdefault(name, None)
    return tuple(seen)


def loaded_names(nodes: Iterable[ast.AST]) -> set[str]:
    return {
        n.id for n in _walk_no_functions(nodes)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _jumps(node: ast.AST, kinds: tuple[type, ...], through_loops: bool) -> bool:
    return _node_fact(node, ("jumps", kinds, through_loops), _search_jumps)


def _search_jumps(node: ast.AST, key: tuple[str, tuple[type, ...], bool]) -> bool:
    _, kinds, through_loops = key
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, kinds):
            return True
        for c in ast.iter_child_nodes(n):
            if isinstance(c, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef)):
                continue
            if not through_loops and isinstance(c, (ast.For, ast.While)):
                if ast.Return in kinds:
                    if _jumps(c, (ast.Return,), True):
                        return True
                continue
            stack.append(c)
    return False


def may_break_or_continue(stmts: Iterable[ast.AST]) -> tuple[bool, bool]:
    """Whether these statements break or continue the loop that directly contains them."""
    brk = cont = False
    for s in stmts:
        if isinstance(s, (ast.For, ast.While)):
            continue  # its jumps are its own
        brk = brk or _jumps(s, (ast.Break,), False)
        cont = cont or _jumps(s, (ast.Continue,), False)
    return brk, cont


def may_return(stmts: Iterable[ast.AST]) -> bool:
    return any(_jumps(s, (ast.Return,), True) for s in stmts)


def stmt_may_jump(stmt: ast.AST) -> tuple[bool, bool, bool]:
    """(break, continue, return) reachable from inside ``stmt`` for its enclosing loop."""
    if isinstance(stmt, (ast.For, ast.While)):
        return False, False, may_return(stmt.body) or may_return(stmt.orelse)
    brk, cont = may_break_or_continue([stmt])
    return brk, cont, may_return([stmt])


def first_jump(stmts: Iterable[ast.AST], kinds: tuple[type, ...], through_loops: bool) -> ast.AST | None:
    """The first break/continue/return of ``kinds`` that belongs to these statements."""
    for s in stmts:
        stack = [s]
        while stack:
            n = stack.pop(0)
            if isinstance(n, kinds):
                return n
            for c in ast.iter_child_nodes(n):
                if isinstance(c, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef)):
                    continue
                if not through_loops and isinstance(c, (ast.For, ast.While)):
                    continue
                stack.append(c)
    return None


def always_returns(stmts: list[ast.stmt]) -> bool:
    """Whether running these statements surely ends in a ``return`` (conservatively: a
    ``return``, an ``if`` whose branches both return, a ``while True`` never broken)."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and always_returns(s.body) and always_returns(s.orelse):
            return True
        if isinstance(s, ast.While) and _surely_true(s.test) and not any(
            _jumps(b, (ast.Break,), False) for b in s.body
            if not isinstance(b, (ast.For, ast.While))
        ):
            return True
        if isinstance(s, (ast.For, ast.While)) and s.orelse and always_returns(s.orelse) and not any(
            _jumps(b, (ast.Break,), False) for b in s.body
            if not isinstance(b, (ast.For, ast.While))
        ):
            return True
    return False


def _surely_true(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value) is True

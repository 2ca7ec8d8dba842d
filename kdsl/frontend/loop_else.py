"""``for ... else`` and ``while ... else`` of serial loops, as in Python and Numba: the
``else`` clause runs when the loop ends without ``break``. Rewritten in the syntax tree
before lowering into a flag the loop's own breaks clear:

    _kd_no_break_N = True
    for ...:                    # each break of this loop: _kd_no_break_N = False; break
        ...
    if _kd_no_break_N:
        <else clause>

(a loop without a break of its own is followed by its else clause as it stands).

A parallel loop (``kd.prange``, ``kd.ndrange``) keeps its ``else``: loops.py refuses it.
"""

from __future__ import annotations

import ast
import itertools

_PARALLEL_LOOPS = ("prange", "ndrange")


def _is_parallel(node: ast.For | ast.While) -> bool:
    if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
        return False
    function = node.iter.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
    return name in _PARALLEL_LOOPS


class _MarkBreaks(ast.NodeTransformer):
    """Sets the flag before each ``break`` of one loop (not those of loops inside it)."""

    def __init__(self, flag: str) -> None:
        self.flag = flag
        self.breaks = 0

    def visit_Break(self, node: ast.Break) -> list[ast.stmt]:
        self.breaks += 1
        clear = ast.Assign([ast.Name(self.flag, ast.Store())], ast.Constant(False))
        return [ast.copy_location(clear, node), node]

    def visit_For(self, node: ast.For) -> ast.For:
        return node  # its breaks are its own

    def visit_While(self, node: ast.While) -> ast.While:
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        return node


class _Rewriter(ast.NodeTransformer):
    def __init__(self) -> None:
        self.counter = itertools.count()

    def _rewrite(self, node: ast.For | ast.While) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        if not node.orelse or _is_parallel(node):
            return node
        flag = f"_kd_no_break_{next(self.counter)}"
        marker = _MarkBreaks(flag)
        node.body = [s for stmt in node.body for s in _as_list(marker.visit(stmt))]
        orelse, node.orelse = node.orelse, []
        if marker.breaks == 0:  # the else clause always runs after the loop
            return [node, *orelse]
        out: list[ast.stmt] = [ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(True)), node,
               ast.If(ast.Name(flag, ast.Load()), orelse, [])]
        for stmt in out:
            for child in ast.walk(stmt):
                if isinstance(child, (ast.expr, ast.stmt)) and not hasattr(child, "lineno"):
                    ast.copy_location(child, node)
        return out

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        return self._rewrite(node)

    def visit_While(self, node: ast.While) -> ast.AST | list[ast.stmt]:
        return self._rewrite(node)


def _as_list(result: ast.AST | list[ast.stmt]) -> list[ast.stmt]:
    return result if isinstance(result, list) else [result]  # type: ignore[list-item]


def rewrite_loop_else(tree: ast.FunctionDef) -> ast.FunctionDef:
    """``tree`` with the ``else`` clauses of its serial loops made flags and ``if``s (the
    same tree when it has none)."""
    if not any(isinstance(n, (ast.For, ast.While)) and n.orelse for n in ast.walk(tree)):
        return tree
    rewritten = _Rewriter().visit(tree)
    assert isinstance(rewritten, ast.FunctionDef)
    return rewritten

"""``for i in reversed(range(...))``, as Python users write a countdown: rewritten in the
syntax tree, before lowering, into the ``range`` loop that visits the same values in
reverse order (``range(stop - 1, start - 1, -1)``; with a step, from the last value
``start + (n - 1) * step`` down by the step, ``n`` the range's length)."""

from __future__ import annotations

import ast
import itertools


def _reversed_range(node: ast.For) -> list[ast.expr] | None:
    """The arguments of ``range`` in ``for ... in reversed(range(...))``, or None."""
    it = node.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
            and it.func.id == "reversed" and len(it.args) == 1 and not it.keywords):
        return None
    inner = it.args[0]
    if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name)
            and inner.func.id == "range" and 1 <= len(inner.args) <= 3 and not inner.keywords
            and not any(isinstance(a, ast.Starred) for a in inner.args)):
        return None
    return list(inner.args)


def _name(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _call(function: str, *args: ast.expr) -> ast.Call:
    return ast.Call(_name(function), list(args), [])


def _binary(left: ast.expr, op: ast.operator, right: ast.expr) -> ast.BinOp:
    return ast.BinOp(left, op, right)


class _Rewriter(ast.NodeTransformer):
    def __init__(self) -> None:
        self.counter = itertools.count()

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        args = _reversed_range(node)
        if args is None:
            return node
        prologue: list[ast.stmt] = []
        start: ast.expr
        step: ast.expr | None
        if len(args) == 1:
            start, stop, step = ast.Constant(0), args[0], None
        else:
            start, stop = args[0], args[1]
            step = args[2] if len(args) == 3 else None
        one = ast.Constant(1)
        if step is None:  # range(stop - 1, start - 1, -1)
            bounds = [_binary(stop, ast.Sub(), one), _binary(start, ast.Sub(), one),
                      ast.UnaryOp(ast.USub(), one)]
        else:
            number = next(self.counter)
            names = [f"_kd_reversed_{number}_{part}" for part in ("start", "stop", "step")]
            for name, value in zip(names, (start, stop, step)):  # each evaluated once
                prologue.append(ast.Assign([ast.Name(name, ast.Store())], value))
            a, b, s = (_name(n) for n in names)
            # n = len(range(a, b, s)) = max(0, (b - a + s - sign(s)) // s)
            sign = ast.IfExp(ast.Compare(s, [ast.Gt()], [ast.Constant(0)]), one,
                             ast.UnaryOp(ast.USub(), one))
            span = _binary(_binary(_binary(b, ast.Sub(), a), ast.Add(), s), ast.Sub(), sign)
            count = _call("max", ast.Constant(0), _binary(span, ast.FloorDiv(), s))
            last = _binary(a, ast.Add(), _binary(_binary(count, ast.Sub(), one), ast.Mult(), s))
            bounds = [last, _binary(a, ast.Sub(), s), ast.UnaryOp(ast.USub(), s)]
        loop = ast.For(node.target, _call("range", *bounds), node.body, node.orelse, None)
        out = [*prologue, loop]
        for stmt in out:
            ast.copy_location(stmt, node)
            for child in ast.walk(stmt):
                if not hasattr(child, "lineno") and isinstance(child, (ast.expr, ast.stmt)):
                    ast.copy_location(child, node.iter)
        return out


def has_reversed_ranges(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.For) and _reversed_range(n) is not None for n in ast.walk(tree))


def rewrite_reversed_ranges(tree: ast.FunctionDef) -> ast.FunctionDef:
    """``tree`` with its ``reversed(range(...))`` loops made ``range`` loops."""
    if not has_reversed_ranges(tree):
        return tree
    rewritten = _Rewriter().visit(tree)
    assert isinstance(rewritten, ast.FunctionDef)
    return rewritten

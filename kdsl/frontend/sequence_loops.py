"""Loops over arrays, as in NumPy and Numba: ``for v in a``, ``for i, v in enumerate(a)``,
``for u, v in zip(a, b)`` and ``for i, (u, v) in enumerate(zip(a, b))`` become serial
``range`` loops that index the arrays (``a[k]``: an element, a row, a vector), rewritten
in the syntax tree before lowering."""

from __future__ import annotations

import ast
import itertools

_PURE = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Slice, ast.Tuple, ast.Load,
         ast.UnaryOp, ast.BinOp, ast.operator, ast.unaryop, ast.expr_context)


def _is_pure(node: ast.expr) -> bool:
    """An expression that may be evaluated once per iteration (no calls)."""
    return all(isinstance(n, _PURE) for n in ast.walk(node))


def _sequences(node: ast.For) -> tuple[list[ast.expr], ast.expr | None, list[ast.expr]] | None:
    """The arrays a loop walks, the ``enumerate`` start (or None) and the targets each
    element goes to; None for loops this rewrite leaves alone (range, kd.prange, ...)."""
    it = node.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not any(
            isinstance(a, ast.Starred) for a in it.args):
        if it.func.id == "enumerate" and 1 <= len(it.args) <= 2 and all(
                k.arg == "start" for k in it.keywords):
            start = it.args[1] if len(it.args) == 2 else (
                it.keywords[0].value if it.keywords else ast.Constant(0))
            target = node.target
            if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
                return None
            inner = it.args[0]
            if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name)
                    and inner.func.id == "zip" and inner.args and not inner.keywords
                    and isinstance(target.elts[1], ast.Tuple)
                    and len(target.elts[1].elts) == len(inner.args)):  # enumerate(zip(a, b))
                return list(inner.args), start, list(target.elts[1].elts)
            return [inner], start, [target.elts[1]]
        if it.func.id == "zip" and it.args and not it.keywords:
            target = node.target
            if not (isinstance(target, ast.Tuple) and len(target.elts) == len(it.args)):
                return None
            return list(it.args), None, list(target.elts)
        return None
    if isinstance(it, (ast.Name, ast.Attribute, ast.Subscript)):
        return [it], None, [node.target]
    return None


class _Rewriter(ast.NodeTransformer):
    def __init__(self) -> None:
        self.counter = itertools.count()

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        found = _sequences(node)
        if found is None or node.orelse:
            return node
        arrays, start, targets = found
        number = next(self.counter)
        prologue: list[ast.stmt] = []
        names: list[ast.expr] = []
        for k, a in enumerate(arrays):
            if _is_pure(a):
                names.append(a)
            else:  # evaluated once, before the loop
                temp = f"_kd_sequence_{number}_{k}"
                prologue.append(ast.Assign([ast.Name(temp, ast.Store())], a))
                names.append(ast.Name(temp, ast.Load()))
        lengths: list[ast.expr] = [ast.Call(ast.Name("len", ast.Load()), [n], []) for n in names]
        count = lengths[0] if len(lengths) == 1 else ast.Call(ast.Name("min", ast.Load()),
                                                              lengths, [])
        index = f"_kd_index_{number}"
        body: list[ast.stmt] = []
        if start is not None:
            assert isinstance(node.target, ast.Tuple)
            position: ast.expr = ast.Name(index, ast.Load())
            if not (isinstance(start, ast.Constant) and start.value == 0):
                position = ast.BinOp(position, ast.Add(), start)
            body.append(ast.Assign([node.target.elts[0]], position))
        for target, name in zip(targets, names):
            body.append(ast.Assign([target], ast.Subscript(name, ast.Name(index, ast.Load()),
                                                           ast.Load())))
        loop = ast.For(ast.Name(index, ast.Store()),
                       ast.Call(ast.Name("range", ast.Load()), [count], []),
                       body + node.body, [], None)
        setattr(loop, "kd_sequences", names)  # noqa: B010  (loops.py checks they are arrays)
        if start is None and len(arrays) == 1 and not prologue:  # for d in offsets: a tuple?
            setattr(loop, "kd_original", node)  # noqa: B010
        out = [*prologue, loop]
        for stmt in out:
            ast.copy_location(stmt, node)
            for child in ast.walk(stmt):
                if not hasattr(child, "lineno") and isinstance(child, (ast.expr, ast.stmt)):
                    ast.copy_location(child, node)
        return out


def loop_over_local(node: ast.For, name: str) -> list[ast.stmt]:
    """``for v in <expression>`` (``for c in kd.cumsum(a)``, ``for v in a * 2``), the
    expression's array already in the local ``name``: a loop over that array, as ``for v
    in a`` is rewritten above."""
    array = ast.copy_location(ast.Name(name, ast.Load()), node.iter)  # errors point here
    loop = ast.copy_location(ast.For(node.target, array, node.body, [], None), node)
    rewriter = _Rewriter()
    rewriter.counter = itertools.count(id(node))  # names distinct from the whole tree's
    rewritten = rewriter.visit_For(loop)
    assert isinstance(rewritten, list)
    for stmt in rewritten:
        for child in ast.walk(stmt):
            if isinstance(child, (ast.expr, ast.stmt)) and not hasattr(child, "lineno"):
                ast.copy_location(child, node)
    return rewritten


def rewrite_sequence_loops(tree: ast.FunctionDef) -> ast.FunctionDef:
    """``tree`` with its loops over arrays made ``range`` loops (the same tree when it has
    none); ``for i in reversed(range(...))`` too, and the ``else`` of serial loops."""
    from kdsl.frontend.loop_else import rewrite_loop_else
    from kdsl.frontend.reversed_loops import rewrite_reversed_ranges

    tree = rewrite_reversed_ranges(rewrite_loop_else(tree))
    if not any(isinstance(n, ast.For) and _sequences(n) is not None for n in ast.walk(tree)):
        return tree
    rewritten = _Rewriter().visit(tree)
    assert isinstance(rewritten, ast.FunctionDef)
    return rewritten

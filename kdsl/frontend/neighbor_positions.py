"""Reading a neighbour's position from the grid's own copy: in
``for j in grid.neighbors(q, r):``, the body's ``x[j]`` (``x`` the positions the grid was
built from) becomes the copy in cell order at the particle's place in the run, which the
query has just read. The values are the same bits (the copy is ``x[order[k]]``), but the
copy is read in order while ``x[j]`` jumps about memory. Done only where the kernel
cannot have changed ``x`` since: the function only ever reads ``x`` (indexing, its
shape, building grids), and the body never rebinds ``j``."""

from __future__ import annotations

import ast
import copy


def _read_only(tree: ast.AST, name: str) -> bool:
    """Whether every use of ``name`` in ``tree`` reads it: ``name[index]`` loads of one
    element (no slices, no views), ``name.shape`` and the positions of
    ``NeighborGrid(name, ...)``; not ``name[i].x = ...`` nor any other use."""
    allowed: set[int] = set()
    written: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
            inner: ast.expr = node.value
            while isinstance(inner, (ast.Subscript, ast.Attribute)):
                inner = inner.value
            written.add(id(inner))
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name) and _one_element(node.slice)):
            allowed.add(id(node.value))
        elif (isinstance(node, ast.Attribute) and node.attr == "shape"
              and isinstance(node.value, ast.Name)):
            allowed.add(id(node.value))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            func = node.func
            callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if callee == "NeighborGrid":
                allowed.add(id(node.args[0]))
    return all(id(node) in allowed and id(node) not in written for node in ast.walk(tree)
               if isinstance(node, ast.Name) and node.id == name)


def _one_element(index: ast.expr) -> bool:
    if isinstance(index, ast.Constant):
        return isinstance(index.value, int) and not isinstance(index.value, bool)
    return not isinstance(index, (ast.Slice, ast.Tuple, ast.List, ast.Starred))


def _binds(body: list[ast.stmt], name: str) -> bool:
    return any(isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load)
               for stmt in body for node in ast.walk(stmt))


class _FromCopy(ast.NodeTransformer):
    def __init__(self, positions: str, target: str, copy_name: str, place: str) -> None:
        self.positions, self.target = positions, target
        self.copy_name, self.place = copy_name, place

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if (isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                and node.value.id == self.positions and isinstance(node.slice, ast.Name)
                and node.slice.id == self.target):
            new = ast.Subscript(ast.Name(self.copy_name, ast.Load()),
                                ast.Name(self.place, ast.Load()), ast.Load())
            return ast.copy_location(new, node)
        return node


def body_reading_the_copy(body: list[ast.stmt], function: ast.AST, positions: list[str],
                          target: str, copy_name: str, place: str) -> list[ast.stmt]:
    """``body`` (a copy of it, where anything changes) with ``x[target]`` read as
    ``copy_name[place]`` for each name ``x`` in ``positions`` that the function only reads."""
    names = [p for p in positions if _read_only(function, p)]
    if not names or _binds(body, target):
        return body
    body = copy.deepcopy(body)
    for name in names:
        body = [_FromCopy(name, target, copy_name, place).visit(stmt) for stmt in body]
    for stmt in body:
        ast.fix_missing_locations(stmt)
    return body

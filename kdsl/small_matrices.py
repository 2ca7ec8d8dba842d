"""Formulas for small square matrices (trace, determinant, inverse), written once for any
scalar type with + - * /: NumPy scalars in plain-Python mode, IR values when compiling,
so both evaluate the same operations in the same order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Rows = Sequence[Sequence[Any]]


def trace(m: Rows) -> Any:
    total = m[0][0]
    for k in range(1, len(m)):
        total = total + m[k][k]
    return total


def _minor(m: Rows, row: int, col: int) -> list[list[Any]]:
    return [[m[i][j] for j in range(len(m)) if j != col] for i in range(len(m)) if i != row]


def determinant(m: Rows) -> Any:
    """Cofactor expansion along the first row (2x2, 3x3 and 4x4 matrices)."""
    n = len(m)
    if n == 1:
        return m[0][0]
    if n == 2:
        return m[0][0] * m[1][1] - m[0][1] * m[1][0]
    total = None
    for j in range(n):
        term = m[0][j] * determinant(_minor(m, 0, j))
        if total is None:
            total = term
        elif j % 2:
            total = total - term
        else:
            total = total + term
    return total


def inverse(m: Rows) -> list[list[Any]]:
    """The adjugate divided by the determinant (no pivoting: a singular matrix gives
    infinities or NaNs, as a division by zero does)."""
    n = len(m)
    det = determinant(m)
    if n == 2:
        cofactors = [[m[1][1], -m[0][1]], [-m[1][0], m[0][0]]]
        return [[c / det for c in row] for row in cofactors]
    result: list[list[Any]] = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            minor = determinant(_minor(m, j, i))  # the adjugate is the transposed cofactors
            result[i][j] = (minor if (i + j) % 2 == 0 else -minor) / det
    return result

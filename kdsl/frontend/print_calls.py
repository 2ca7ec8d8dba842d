"""``print(...)`` in kernels: arguments, f-strings and ``sep=``, lowered to one ``print``
op."""

from __future__ import annotations

import ast
import builtins as py
from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.frontend.calls import builtin
from kdsl.frontend.values import FormattedText, Static
from kdsl.ir.core import Value

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering


def _print_separator(lo: FunctionLowering, node: ast.Call) -> str:
    """The text ``print(..., sep=...)`` puts between arguments: a string constant (None
    gives Python's space). Other keywords (``end=``, ``file=``, ``flush=``) are refused."""
    separator = " "
    for keyword in node.keywords:
        if keyword.arg != "sep":
            name = f"{keyword.arg}=" if keyword.arg else "**"
            lo.error(f"print({name}...) is not supported in kernels (only sep=; each print "
                     "ends its line)", keyword.value)
        value = lo.expr(keyword.value)
        if isinstance(value, Static) and (value.obj is None or isinstance(value.obj, str)):
            separator = " " if value.obj is None else value.obj
        else:
            lo.error("print(sep=...) takes a string constant in kernels", keyword.value)
    return separator


@builtin(py.print)
def _print(lo: FunctionLowering, node: ast.Call, args: list) -> None:
    between = _print_separator(lo, node)
    parts: list[str | None] = []
    separators: list[str] = []  # the text before each part: a space between arguments
    operands: list[Value] = []
    for k, (a, arg_node) in enumerate(zip(args, node.args)):
        pieces = a.pieces if isinstance(a, FormattedText) else (a,)  # f"{i}: {x}"
        for j, piece in enumerate(pieces):
            separators.append(between if k and not j else "")
            if isinstance(piece, str) or (isinstance(piece, Static) and isinstance(piece.obj, str)):
                parts.append(piece if isinstance(piece, str) else piece.obj)
                continue
            v = lo.value_of(piece, arg_node)
            if isinstance(v.type, T.ArrayType):
                lo.error("print() of a whole array is not supported in kernels", arg_node)
            if isinstance(v.type, T.MatrixType):  # [[a, b], [c, d]]: its rows, as lists
                rows = lo.unpacked_parts(v).items
                parts.append("[")
                for r, row in enumerate(rows):
                    separators.extend(["", ""] if r else [""])
                    parts.extend([", ", None] if r else [None])
                    operands.append(row)
                separators.append("")
                parts.append("]")
                continue
            parts.append(None)
            operands.append(v)
    attrs: dict[str, Any] = {"parts": tuple(parts)}
    if separators != [" " if k else "" for k in range(len(separators))]:
        attrs["separators"] = tuple(separators)
    lo.builder.create("print", operands, attrs)
    return None

"""Boolean-mask assignment in tensor statements, as NumPy: ``a[a < 0] = 0``,
``a[mask] = b[mask]``, ``a[mask] += 1``.

Each becomes a whole-array assignment ``a[...] = where(mask, new, a)``, which fuses into
one loop over ``a``. Reading ``b[mask]`` elsewhere (a compressed copy) is not supported.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from kdsl import types as T
from kdsl.frontend.tensors import is_array
from kdsl.ir.core import Value

if TYPE_CHECKING:
    from kdsl.frontend.statements import StatementLowering

_MASK_FORMS = (ast.Name, ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Attribute)


def mask_index(lo: StatementLowering, array: Value, index: ast.expr) -> Value | None:
    """The boolean array ``index`` evaluates to, where it is one that can mask ``array``
    (looked at only for index forms that hold no call, so nothing is evaluated twice)."""
    if not isinstance(index, _MASK_FORMS) or any(isinstance(n, ast.Call) for n in ast.walk(index)):
        return None
    if not isinstance(array.type, T.ArrayType):
        return None
    mask = lo.expr(index)
    if not is_array(mask) or mask.type.dtype != T.bool_:
        return None
    if mask.type.ndim != array.type.ndim:
        lo.error(f"a boolean mask needs as many axes as the array ({array.type.ndim}), "
                 f"got {mask.type.ndim}", index)
    return mask


def masked_assign(lo: StatementLowering, array: Value, mask: Value, value: Value,
                  node: ast.AST) -> None:
    """``array[mask] = value`` with ``value`` a scalar (or vector) or an array of the shape
    of ``array`` read at the same positions."""
    if not isinstance(value.type, (T.ScalarType, T.VectorType, T.MatrixType)) and not is_array(value):
        lo.error(f"cannot assign a value of type {value.type} through a mask", node)
    lo.check_in_place(array, value, node)
    lo.tensor_assign(array, lo.tensor_where(mask, value, array, node), node)


def assign_through_mask(lo: StatementLowering, target: ast.Subscript, node: ast.Assign) -> bool:
    """``a[mask] = v`` (a scalar) or ``a[mask] = b[mask]`` (the same mask expression):
    lowered here, returning True; False when ``target`` is no mask assignment."""
    array = lo.value(target.value)
    mask = mask_index(lo, array, target.slice)
    if mask is None:
        return False
    source = node.value
    if isinstance(source, ast.Subscript) and ast.dump(source.slice) == ast.dump(target.slice):
        new = lo.value(source.value)  # b[mask] at a's masked positions: b itself
        if not is_array(new):
            lo.error(f"b[mask] needs an array b, got {new.type}", source)
    else:
        new = lo.value(source)
        if is_array(new):
            lo.error("a[mask] = b takes a scalar, or b[mask] with the same mask (NumPy would "
                     "assign b's elements in order to the selected positions)", source)
    masked_assign(lo, array, mask, new, node)
    return True


def update_through_mask(lo: StatementLowering, array: Value, target: ast.Subscript, op_name: str,
                        node: ast.AugAssign) -> bool:
    """``a[mask] op= v``: where the mask holds, ``a op v``."""
    mask = mask_index(lo, array, target.slice)
    if mask is None:
        return False
    value = lo.value(node.value)
    if is_array(value):
        lo.error("a[mask] op= b takes a scalar; write a[...] op= kd.where(mask, b, 0)", node.value)
    masked_assign(lo, array, mask, lo.binary(op_name, array, value, node), node)
    return True

"""``kd.argmin``/``kd.argmax`` (and NumPy's) in kernels: generated funcs, one per kind,
number of axes and reduced axis, lowered and inlined like the user's funcs.

Over the whole array the scan is serial, in C order (the first extreme wins, and the
first NaN, as in NumPy); along an axis, the other axes run in parallel.
"""

from __future__ import annotations

import ast
import functools
import linecache
from typing import TYPE_CHECKING, Any

import numpy as np

from kdsl import searching
from kdsl import types as T
from kdsl.frontend.calls import _new_array, builtin
from kdsl.frontend.tensors import is_array, reduction_arguments
from kdsl.ir.core import Value

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering

_BETTER = {"argmin": "<", "argmax": ">"}


def _whole_source(kind: str, ndim: int) -> str:
    axes = range(ndim)
    lines = [f"def {kind}_of_{ndim}d(a):",
             f"    if {' or '.join(f'a.shape[{k}] == 0' for k in axes)}:",
             "        return -1",
             f"    best = a[{', '.join('0' for _ in axes)}]",
             "    found = 0",
             "    flat = 0"]
    indent = "    "
    for k in axes:
        lines.append(f"{indent}for i{k} in range(a.shape[{k}]):")
        indent += "    "
    lines += [f"{indent}x = a[{', '.join(f'i{k}' for k in axes)}]",
              f"{indent}if x {_BETTER[kind]} best or (x != x and best == best):",
              f"{indent}    best = x",
              f"{indent}    found = flat",
              f"{indent}flat += 1",
              "    return found"]
    return "\n".join(lines) + "\n"


def _axis_source(kind: str, ndim: int, axis: int) -> str:
    others = [k for k in range(ndim) if k != axis]
    loop = (f"kd.prange(a.shape[{others[0]}])" if len(others) == 1 else
            f"kd.ndrange({', '.join(f'a.shape[{k}]' for k in others)})")
    names = ", ".join(f"j{k}" for k in others)

    def index(along: str) -> str:
        return ", ".join(along if k == axis else f"j{k}" for k in range(ndim))

    return "\n".join([
        f"def {kind}_of_{ndim}d_along_{axis}(a, out):",
        f"    if a.shape[{axis}] == 0:",
        "        return",
        f"    for {names} in {loop}:",
        f"        best = a[{index('0')}]",
        "        found = 0",
        f"        for i in range(1, a.shape[{axis}]):",
        f"            x = a[{index('i')}]",
        f"            if x {_BETTER[kind]} best or (x != x and best == best):",
        "                best = x",
        "                found = i",
        f"        out[{names}] = found",
    ]) + "\n"


class GeneratedFunc:
    """A func the frontend writes itself; kernels call it as they call a ``kd.func``
    (which the frontend knows by ``__kdsl_func__`` and ``py_function``)."""

    __kdsl_func__ = True
    custom_gradient = None

    def __init__(self, fn: Any) -> None:
        self.py_function = fn


@functools.cache
def _generated_func(kind: str, ndim: int, axis: int | None) -> Any:
    """The func for these parameters, compiled from generated source that the frontend
    reads back through ``linecache`` as it reads any func."""
    from kdsl import builtins

    source = _whole_source(kind, ndim) if axis is None else _axis_source(kind, ndim, axis)
    filename = f"<kdsl {kind} {ndim}d {axis}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"kd": builtins}
    exec(compile(ast.parse(source), filename, "exec"), namespace)  # noqa: S102
    name = next(k for k in namespace if k.startswith(kind))
    return GeneratedFunc(namespace[name])


def _arg_extreme(kind: str) -> Any:
    def handler(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
        if len(args) != 1:
            lo.error(f"{kind}() takes one array (and axis=), got {len(args)} arguments", node)
        a = lo.value_of(args[0], node)
        if not is_array(a):
            lo.error(f"{kind}() needs an array, got {a.type}", node)
        if not isinstance(a.type.dtype, T.ScalarType):
            lo.error(f"{kind}() needs an array of scalars, got {a.type}", node)
        axis = reduction_arguments(lo, node, ("axis",))["axis"]
        ndim = a.type.ndim
        if axis is not None and not -ndim <= axis < ndim:
            lo.error(f"axis {axis} is out of range for an array of {ndim} axes", node)
        if axis is None or ndim == 1:
            return lo.strong(lo.builder.cast(lo.call_func(_generated_func(kind, ndim, None), [a],
                                                          node), T.i64))
        axis %= ndim
        dims = [lo.array_dim(a, k) for k in range(ndim) if k != axis]
        out = _new_array(lo, node, dims, T.i64, "empty", None)
        lo.call_func(_generated_func(kind, ndim, axis), [a, out], node)
        return out

    return handler


builtin(searching.argmin, np.argmin)(_arg_extreme("argmin"))
builtin(searching.argmax, np.argmax)(_arg_extreme("argmax"))

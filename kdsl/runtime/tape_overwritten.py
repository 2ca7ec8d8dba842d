"""Arrays a kernel overwrites before it reads them (a force array computed in one parallel
loop and read in the next): ``kd.Tape`` needs no copy of what such an array held before
a call, since neither the call nor its vector-Jacobian product reads it. Nor of an array
the vector-Jacobian product itself never reads, or overwrites before reading it (the
positions of an update ``x[i] += dt * v[i]`` whose step is not differentiated: the
product reads adjoints only).

The test is conservative, on the kernel's IR before optimisation: every use of the array
is an element load, an element store or a dimension; every store is at the top level of
the body of a top-level parallel loop, at the loop's own index (so each iteration writes
its element); every load is at a parallel loop's own index, after a store in the same
iteration, or in a later parallel loop over the same extents as a loop that stores.
"""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Function, Operation, Value

_SAME_WHEN_OPERANDS_ARE = frozenset({"constant", "array_dim", "max", "min", "add", "sub", "mul",
                                     "cast", "floordiv"})


def overwritten_arguments(kernel: Any, args: tuple, positions: tuple[int, ...]) -> frozenset[int]:
    """The positions among ``positions`` of the array arguments ``kernel`` overwrites
    before it reads them, called with ``args``."""
    from kdsl.runtime.compiler import lower_and_optimize

    module, _ = lower_and_optimize(kernel.py_function, kernel.parameters(args), kernel.options,
                                   stop_after="drop-index-wraps")
    fn = module.kernel
    return frozenset(k for k in positions if k < len(fn.args) and _overwritten_first(fn, fn.args[k]))


def unread_by_product(kernel: Any, args: tuple, argnums: tuple[int, ...], arrays: tuple[int, ...],
                      positions: tuple[int, ...],
                      unit_axes: tuple[tuple[int, tuple[int, ...]], ...] = ()) -> frozenset[int]:
    """The positions among ``positions`` of the array arguments whose values the
    vector-Jacobian product of ``kernel`` with respect to ``argnums`` (nothing returned)
    does not read, called with ``args`` (``arrays``: the positions of the arrays; ``unit_axes``:
    the axes of size 1 of the differentiated ones): used
    only for their dimensions, or overwritten before they are read (its optimised IR)."""
    from kdsl.runtime.compiler import lower_and_optimize
    from kdsl.runtime.vjp_kernel import vjp_kernel

    product = vjp_kernel(kernel, argnums, None, unit_axes)
    adjoints = [args[k] for k in argnums if k in arrays]  # stand-ins of their types
    params = product.parameters((*args, *adjoints, 0.0))
    module, _ = lower_and_optimize(product.py_function, params, product.options)
    fn = module.kernel
    return frozenset(k for k in positions if k < len(args)
                     and (_only_dimensions(fn, fn.args[k]) or _overwritten_first(fn, fn.args[k])))


def _only_dimensions(fn: Function, array: Value) -> bool:
    return all(op.name == "array_dim" for op in fn.body.walk() if array in op.operands)


def _overwritten_first(fn: Function, array: Value) -> bool:
    uses = [op for op in fn.body.walk() if array in op.operands]
    for op in uses:
        if op.name == "array_dim":
            continue
        if op.name not in ("array_load", "array_store") or op.operands[0] is not array or (
                array in op.operands[1:]):
            return False
    top = fn.body.ops
    place: dict[Operation, tuple[int, int, Operation]] = {}  # op -> (loop, position, op there)
    for k, loop in enumerate(top):
        if loop.name != "parallel_for":
            continue
        for position, op in enumerate(loop.regions[0].ops):
            for inner in op.walk():
                place[inner] = (k, position, op)
    first_store: dict[int, int] = {}  # loop -> the position of its first store
    for op in uses:
        if op.name != "array_store":
            continue
        found = place.get(op)
        if found is None:
            return False
        k, position, at = found
        if at is not op or op.operands[1:-1] != _ivs(top[k]):
            return False
        first_store[k] = min(first_store.get(k, position), position)
    if not first_store:
        return False
    definitions = {r: op for op in fn.body.walk() for r in op.results}
    for op in uses:
        if op.name != "array_load":
            continue
        found = place.get(op)
        if found is None or op.operands[1:] != _ivs(top[found[0]]):
            return False
        k, position, _ = found
        if k in first_store and first_store[k] < position:
            continue
        if not any(q < k and _same_extents(top[q], top[k], definitions) for q in first_store):
            return False
    return True


def _ivs(loop: Operation) -> list[Value]:
    return loop.regions[0].args[:loop.attrs["ndim"]]


def _same_extents(a: Operation, b: Operation, definitions: dict[Value, Operation]) -> bool:
    ndim = a.attrs["ndim"]
    return ndim == b.attrs["ndim"] and all(
        _same_value(x, y, definitions) for x, y in zip(a.operands[:ndim], b.operands[:ndim]))


def _same_value(a: Value, b: Value, definitions: dict[Value, Operation]) -> bool:
    """Whether two values are equal: the same value, or the same pure op of equal values."""
    if a is b:
        return True
    x, y = definitions.get(a), definitions.get(b)
    return (x is not None and y is not None and x.name == y.name
            and x.name in _SAME_WHEN_OPERANDS_ARE and not x.regions and not y.regions
            and x.attrs == y.attrs and len(x.operands) == len(y.operands)
            and all(_same_value(p, q, definitions) for p, q in zip(x.operands, y.operands)))

"""Arrays a kernel updates in place, under a gradient.

An array the kernel both writes and reads (or writes with values that vary) is *state*:
the reverse sweep must see it as it was when each recomputed region first ran. The
forward sweep copies the state a region writes before the region runs (before each
iteration, for serial loops); the reverse sweep copies it back before it recomputes and
reverses that region. The adjoint of a store reads and clears the adjoint element.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value

if TYPE_CHECKING:
    from kdsl.ir.autodiff.emitter_base import EmitterBase

_VIEW_OPS = ("array_view", "array_transpose", "cast")
_WRITES = ("array_store", "atomic_rmw", "tensor_assign")


def array_bases(body: Block) -> dict[Value, Value]:
    """The array each view refers to (views of views followed)."""
    bases: dict[Value, Value] = {}
    for op in body.walk():
        if op.name in _VIEW_OPS and op.results and isinstance(op.results[0].type, T.ArrayType):
            bases[op.results[0]] = bases.get(op.operands[0], op.operands[0])
    return bases


def written_arrays(body: Block) -> set[Value]:
    """The arrays written somewhere (through a view or not)."""
    bases = array_bases(body)
    return {bases.get(op.operands[0], op.operands[0]) for op in body.walk() if op.name in _WRITES}


def stateful_arrays(body: Block, varied_arrays: set[Value]) -> set[Value]:
    """Arrays written somewhere that are also read somewhere, or whose values vary."""
    bases = array_bases(body)
    written = {bases.get(op.operands[0], op.operands[0])
               for op in body.walk() if op.name in _WRITES}
    loaded = {bases.get(op.operands[0], op.operands[0])
              for op in body.walk() if op.name == "array_load"}
    return {a for a in written if a in loaded or a in varied_arrays}


def written_state(op: Operation, stateful: set[Value]) -> list[Value]:
    """The state arrays ``op`` writes that exist before it (not made inside it)."""
    made = {inner.result for inner in op.walk() if inner.name == "array_new"}
    found: dict[Value, None] = {}
    for inner in op.walk():
        if inner.name in _WRITES and inner.operands[0] in stateful and inner.operands[0] not in made:
            found.setdefault(inner.operands[0], None)
    return list(found)


def copy_elements(e: EmitterBase, source: Value, source_prefix: Sequence[Value],
                  target: Value, target_prefix: Sequence[Value], shape_of: Value) -> None:
    """``target[*target_prefix, ...] = source[*source_prefix, ...]`` over every element of
    the array ``shape_of``, in a parallel loop."""
    t = shape_of.type
    assert isinstance(t, T.ArrayType)
    dims = [e.b.create("array_dim", [shape_of], {"axis": k}).result for k in range(t.ndim)]
    body = Block([Value(T.i64, f"i{k}") for k in range(t.ndim)])
    with e.b.at(body):
        value = e.b.create("array_load", [source, *source_prefix, *body.args]).result
        e.b.create("array_store", [target, *target_prefix, *body.args, value])
        e.b.create("yield", [])
    e.b.create("parallel_for", dims, {"ndim": t.ndim, "reductions": ()}, [body], [])


def snapshot_storage(e: EmitterBase, array: Value, count: Value | None) -> Value:
    """A new array for copies of ``array`` (``count`` of them along a new first axis)."""
    t = array.type
    assert isinstance(t, T.ArrayType)
    dims = [e.b.create("array_dim", [array], {"axis": k}).result for k in range(t.ndim)]
    sizes = ([count] if count is not None else []) + dims
    storage_type = T.ArrayType(t.dtype, len(sizes), True)
    storage = e.b.create("array_new", sizes, {"type": storage_type, "fill": "empty"}).result
    e.tape_arrays.add(storage)
    return storage


def zeros_like_array(e: EmitterBase, array: Value) -> Value:
    t = array.type
    assert isinstance(t, T.ArrayType)
    dims = [e.b.create("array_dim", [array], {"axis": k}).result for k in range(t.ndim)]
    return e.b.create("array_new", dims, {"type": T.ArrayType(t.dtype, t.ndim, True),
                                          "fill": "zeros"}).result


def component_adjoint(e: EmitterBase, array: Value) -> Value:
    """A zeroed array of the components of ``array``'s vector elements, component axis
    first: adjoints added at scattered indices update contiguous values (one vector
    load and store per component in a vectorised loop, not an interleaved triple)."""
    t = array.type
    assert isinstance(t, T.ArrayType) and isinstance(t.dtype, T.VectorType)
    count = e.b.constant(t.dtype.size, T.i64)
    dims = [e.b.create("array_dim", [array], {"axis": k}).result for k in range(t.ndim)]
    storage_type = T.ArrayType(t.dtype.element, t.ndim + 1, True)
    return e.b.create("array_new", [count, *dims],
                      {"type": storage_type, "fill": "zeros"}).result


def add_components(e: EmitterBase, components: Value, target: Value) -> None:
    """``target[...] += vector(components[0, ...], components[1, ...], ...)`` over the
    elements of ``target``, in serial loops (a pass over memory, short next to the loops
    that summed the components: not vectorised, which would cost more compile time than
    it saves run time)."""
    t = target.type
    assert isinstance(t, T.ArrayType)
    dtype = t.dtype
    assert isinstance(dtype, T.VectorType)
    zero = e.b.constant(0, T.i64)
    one = e.b.constant(1, T.i64)
    dims = [e.b.create("array_dim", [target], {"axis": k}).result for k in range(t.ndim)]
    ivs: list[Value] = []

    def level(axis: int) -> None:
        body = Block([Value(T.i64, f"i{axis}")])
        ivs.append(body.args[0])
        with e.b.at(body):
            if axis + 1 < t.ndim:
                level(axis + 1)
            else:
                parts = [e.b.create("array_load", [components, e.b.constant(c, T.i64), *ivs]).result
                         for c in range(dtype.size)]
                vector = e.b.create("make_vector", parts, {"type": dtype}).result
                old = e.b.create("array_load", [target, *ivs]).result
                e.b.create("array_store", [target, *ivs, e.b.create("add", [old, vector]).result])
            e.b.create("yield", [])
        e.b.create("for", [zero, dims[axis], one], {"vectorize": False}, [body])

    level(0)

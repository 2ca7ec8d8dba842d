"""Memory effects and derivative slots come from the op registry."""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir import ops
from kdsl.ir.core import Operation, Value
from kdsl.ir.effects import (
    allocates,
    array_effects,
    element_access,
    has_side_effects,
    view_source,
    writes_memory,
    written_arrays,
)
from kdsl.ir.ops import Memory

ARRAY = T.ArrayType(T.f32, 1)


def _op(name: str, operands: list[Value], types: list, **attrs: object) -> Operation:
    return Operation(name, operands, types, dict(attrs), [], None)


def test_loads_read_and_stores_write_the_array_operand_only() -> None:
    a, i, x = Value(ARRAY), Value(T.i64), Value(T.f32)
    load = _op("array_load", [a, i], [T.f32])
    store = _op("array_store", [a, i, x], [])
    assert array_effects(load) == [(a, Memory.READ)]
    assert array_effects(store) == [(a, Memory.WRITE)]
    assert not has_side_effects(load) and has_side_effects(store)
    access = element_access(store)
    assert access is not None and access.array is a and access.indices == [i] and access.writes
    atomic = element_access(_op("atomic_rmw", [a, i, x], [T.f32], kind="add"))
    assert atomic is not None and atomic.indices == [i] and atomic.writes


def test_views_alias_and_tensor_maps_read() -> None:
    a, b = Value(ARRAY), Value(ARRAY)
    view = _op("array_view", [a], [ARRAY], spec=(), type=ARRAY)
    assert view_source(view) is a and not writes_memory(view)
    mapped = _op("tensor_map", [a, b, Value(T.f32)], [ARRAY], type=ARRAY)
    assert array_effects(mapped) == [(a, Memory.READ), (b, Memory.READ)]
    assert not ops.lookup("tensor_map").has(ops.Trait.PURE)
    assert view_source(_op("cast", [Value(T.i32)], [T.f32], type=T.f32)) is None


def test_allocation_and_whole_array_writes() -> None:
    n, a, b = Value(T.i64), Value(ARRAY), Value(ARRAY)
    assert allocates(_op("array_new", [n], [ARRAY], type=ARRAY, fill="empty"))
    assign = _op("tensor_assign", [a, b], [])
    assert array_effects(assign) == [(a, Memory.WRITE), (b, Memory.READ)]
    assert written_arrays(assign) == {a}
    assert has_side_effects(_op("array_free", [a], []))


def test_every_op_that_is_not_pure_is_accounted_for() -> None:
    """Reading the table alone tells a pass whether an op may be deleted or moved."""
    for definition in ops.REGISTRY.values():
        if definition.has(ops.Trait.PURE):
            assert not any(m & (Memory.READ | Memory.WRITE | Memory.FREE) for m in definition.memory)
            assert not definition.has(ops.Trait.SIDE_EFFECT)


def test_derivative_rules_attach_to_an_op() -> None:
    before = ops.lookup("sin")  # kdsl.ir.autodiff may have attached its rules already
    try:
        ops.set_derivative_rules("sin", adjoint=print)
        ops.set_derivative_rules("sin", tangent=repr)
        after = ops.lookup("sin")
        assert after.adjoint is print and after.tangent is repr
        assert after.result_types is before.result_types
    finally:
        ops.REGISTRY["sin"] = before

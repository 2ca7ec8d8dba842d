"""What an operation does to memory and the world, asked of the op registry.

Every pass that moves, fuses, speculates or deletes an op asks here rather than keeping
its own list of op names.
"""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.ops import Memory, Trait, lookup
from kdsl.records import dataclass


@dataclass(frozen=True)
class ElementAccess:
    """One element of ``array`` read or written at ``indices``."""

    array: Value
    indices: list[Value]
    writes: bool


def array_effects(op: Operation) -> list[tuple[Value, Memory]]:
    """The effect of ``op`` itself (not its regions) on each of its array operands."""
    definition = lookup(op.name)
    return [
        (v, definition.operand_memory(k)) for k, v in enumerate(op.operands)
        if isinstance(v.type, T.ArrayType) and definition.operand_memory(k) != Memory.NONE
    ]


def element_access(op: Operation) -> ElementAccess | None:
    """The element ``op`` loads or stores, if it is an element access."""
    definition = lookup(op.name)
    if not definition.has(Trait.ELEMENT_ACCESS):
        return None
    writes = bool(definition.operand_memory(0) & Memory.WRITE)
    indices = op.operands[1:-1] if writes else op.operands[1:]
    return ElementAccess(op.operands[0], list(indices), writes)


def writes_memory(op: Operation) -> bool:
    """Whether ``op`` itself writes or frees the memory of an array operand."""
    return any(effect & (Memory.WRITE | Memory.FREE) for _, effect in array_effects(op))


def written_arrays(root: Operation | Block) -> set[Value]:
    """The arrays ``root`` or an op nested in it may write."""
    return {v for op in root.walk() for v, effect in array_effects(op) if effect & Memory.WRITE}


def allocates(op: Operation) -> bool:
    """Whether ``op`` returns newly allocated memory."""
    return lookup(op.name).result_memory == Memory.ALLOCATE


def view_source(op: Operation) -> Value | None:
    """The array whose memory the result of ``op`` refers to, when it is a view of one."""
    if op.operands and isinstance(op.operands[0].type, T.ArrayType) and (
        lookup(op.name).operand_memory(0) & Memory.ALIAS
    ):
        return op.operands[0]
    return None


def has_effect(op: Operation) -> bool:
    """Whether ``op`` itself (not its regions) writes memory or has an effect beyond
    memory (output, an error, leaving the function)."""
    return lookup(op.name).has(Trait.SIDE_EFFECT) or writes_memory(op)


def has_side_effects(op: Operation) -> bool:
    """Whether removing ``op`` (when its results are unused) could change behaviour."""
    if op.name == "while":
        return True  # it may not terminate; keep it
    return has_effect(op) or any(has_side_effects(inner) for region in op.regions for inner in region.ops)

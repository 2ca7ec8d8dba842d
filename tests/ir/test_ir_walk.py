"""Block.walk and Operation.walk: every nested operation, outermost first, in the order
of a recursive walk, reading each list as it is when its turn comes."""

from __future__ import annotations

from collections.abc import Iterator

from kdsl import types as T
from kdsl.ir.core import Block, Operation


def recursive(block: Block) -> Iterator[Operation]:
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from recursive(region)


def op(name: str, *regions: Block) -> Operation:
    return Operation(name, [], [T.i32], regions=list(regions))


def block(*ops: Operation) -> Block:
    b = Block()
    for o in ops:
        b.append(o)
    return b


def nested() -> Block:
    inner = block(op("a"), op("b", block(op("c")), block()), op("d"))
    return block(op("outer", inner, block(op("e"))), op("f"), op("g", block(op("h", block(op("i"))))))


def test_walk_order_is_that_of_a_recursive_walk() -> None:
    body = nested()
    assert [o.name for o in body.walk()] == [o.name for o in recursive(body)] == [
        "outer", "a", "b", "c", "d", "e", "f", "g", "h", "i"]
    first = body.ops[0]
    assert [o.name for o in first.walk()] == ["outer", "a", "b", "c", "d", "e"]
    assert list(Block().walk()) == [] and [o.name for o in op("x").walk()] == ["x"]


def test_operations_added_while_walking_are_visited_as_by_a_recursive_walk() -> None:
    body = nested()
    seen = []
    for o in body.walk():
        seen.append(o.name)
        if o.name == "a":  # appended to the list being walked: visited after "d"
            o.parent.append(op("late"))
        if o.name == "f":  # regions given to an operation before the walk reaches them
            o.regions.append(block(op("new")))
    assert seen == ["outer", "a", "b", "c", "d", "late", "e", "f", "new", "g", "h", "i"]

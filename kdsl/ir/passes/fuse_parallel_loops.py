"""Loop fusion: adjacent parallel loops over the same domain become one loop when no
iteration of the second depends on another iteration of the first.

A whole-array statement next to a hand-written ``kd.prange`` loop over the same array
(``for i in kd.prange(n): vel[i] += ...`` then ``pos += dt * vel``) runs as one pass over
memory. The rule: every pair of accesses, one in each loop and one of them a write, to
the same array must be at exactly the loops' indices, and not through two different views
of it. Distinct arrays are assumed not to overlap (as for whole-array assignment). A
whole-array statement
comes in two versions (plain indexing when no operand broadcasts, else broadcasting);
the loop fuses with the plain one.
"""

from __future__ import annotations

from typing import Any

from kdsl.ir.analysis import definitions
from kdsl.ir.builder import typed_operation
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.effects import allocates, element_access, has_effect, view_source
from kdsl.ir.ops import Trait, lookup
from kdsl.ir.rewrite import clone_block, remap_operands
from kdsl.ir.structured import ParallelForOp


def _accesses(loop: Operation) -> list[tuple[Value, list[Value], bool]]:
    """(array, indices, is a write) of every memory access in the loop."""
    accesses = (element_access(op) for op in loop.regions[0].walk())
    return [(a.array, a.indices, a.writes) for a in accesses if a is not None]


def _has_ordered_effects(loop: Operation) -> bool:
    """Prints, errors, calls and allocations keep their order: the effects other than
    element accesses (which ``legal`` compares index by index)."""
    return any(
        allocates(op) or (has_effect(op) and element_access(op) is None)
        for op in loop.regions[0].walk()
    )


class _Fuser:
    def __init__(self, function: Function) -> None:
        body = function.body
        self.definitions = definitions(body)
        self.mapping: dict[Value, Value] = {}

    def base(self, array: Value) -> Value:
        op = self.definitions.get(array)
        while op is not None and (source := view_source(op)) is not None:
            array = source
            op = self.definitions.get(array)
        return array

    def resolve(self, value: Value) -> Value:
        """What ``value`` is now: a result of a loop fused away is the fused loop's (which
        may itself have been fused again)."""
        while value in self.mapping:
            value = self.mapping[value]
        return value

    def reads_results_of(self, op: Operation, loop: Operation) -> bool:
        produced = set(loop.results)
        return any(self.resolve(v) in produced for inner in op.walk() for v in inner.operands)

    def identity(self, indices: list[Value], ivs: list[Value]) -> bool:
        return len(indices) == len(ivs) and all(i is v for i, v in zip(indices, ivs))

    def legal(self, first: Operation, second: Operation) -> bool:
        if first.attrs.get("many_updates") or second.attrs.get("many_updates"):
            return False  # a scatter-heavy loop nest (a reverse sweep) is optimised best alone
        if first.attrs.get("stops") or second.attrs.get("stops"):
            return False  # a loop left by break or return skips iterations
        nest_a, nest_b = ParallelForOp(first), ParallelForOp(second)
        if nest_a.ndim != nest_b.ndim or any(
            x is not y for x, y in zip(nest_a.extents, nest_b.extents)
        ):
            return False
        if self.reads_results_of(second, first):
            return False  # the second loop reads a reduction of the first
        if _has_ordered_effects(first) or _has_ordered_effects(second):
            return False  # prints, errors, allocations keep their order
        ivs_first, ivs_second = nest_a.ivs, nest_b.ivs
        accesses_first, accesses_second = _accesses(first), _accesses(second)
        for array_a, index_a, write_a in accesses_first:
            for array_b, index_b, write_b in accesses_second:
                if not (write_a or write_b):
                    continue
                if array_a is not array_b:
                    if self.base(array_a) is not self.base(array_b):
                        continue  # distinct arrays (arguments are assumed not to overlap)
                    return False  # two views of one array
                if not (self.identity(index_a, ivs_first) and self.identity(index_b, ivs_second)):
                    return False
        return True

    def fuse(self, first: Operation, second: Operation) -> Operation:
        nest_a, nest_b = ParallelForOp(first), ParallelForOp(second)
        ndim, a_body = nest_a.ndim, nest_a.body
        b_clone = clone_block(nest_b.body, {})
        # the second loop's variables are the first loop's
        remap = dict(zip(b_clone.args[:ndim], nest_a.ivs))
        body = Block(list(a_body.args) + list(b_clone.args[ndim:]))
        a_yield, b_yield = a_body.ops[-1], b_clone.ops[-1]
        for op in a_body.ops[:-1] + b_clone.ops[:-1]:
            body.append(op)
        body.append(typed_operation("yield", list(a_yield.operands) + list(b_yield.operands),
                                    location=a_yield.location))
        remap_operands(body, remap)
        fused = typed_operation(
            "parallel_for",
            list(first.operands) + list(nest_b.inits),
            {"ndim": ndim, "reductions": tuple(first.attrs["reductions"])
             + tuple(second.attrs["reductions"])},
            [body], first.location,
        )
        for old, new in zip(list(first.results) + list(second.results), fused.results):
            self.mapping[old] = new
        return fused

    def versions(self, op: Operation) -> tuple[Operation, Operation] | None:
        """The two loops of a whole-array statement's versions, when ``op`` is one."""
        if op.name != "if" or op.results:
            return None
        loops = []
        for region in op.regions:
            if len(region.ops) != 2 or region.ops[0].name != "parallel_for":
                return None
            loops.append(region.ops[0])
        return loops[0], loops[1]

    def visit(self, block: Block) -> None:
        for op in block.ops:
            for region in op.regions:
                self.visit(region)
        ops = list(block.ops)
        k = 0
        while k < len(ops):
            op = ops[k]
            if op.name != "parallel_for":
                k += 1
                continue
            j = k + 1
            movable: list[Operation] = []
            # pure ops and the next statement's shape checks may move in front of the loop
            # (a shape error then stops the kernel before the loop instead of after it)
            while j < len(ops) and not ops[j].regions and (
                lookup(ops[j].name).has(Trait.PURE) or ops[j].name == "raise_shape_error"
            ) and not self.reads_results_of(ops[j], op):
                movable.append(ops[j])
                j += 1
            if j >= len(ops):
                break
            nxt = ops[j]
            if nxt.name == "parallel_for" and self.legal(op, nxt):
                fused = self.fuse(op, nxt)
                ops[k:j + 1] = movable + [fused]
                k += len(movable)
                continue
            pair = self.versions(nxt)
            if pair is not None and self.legal(op, pair[0]) and not op.results:
                direct_block = nxt.regions[0]
                fused = self.fuse(op, pair[0])
                direct_block.ops[0] = fused
                fused.parent = direct_block
                other = nxt.regions[1]
                other.ops.insert(0, op)
                op.parent = other
                ops[k:j + 1] = movable + [nxt]
                k += len(movable)
                continue
            k += 1
        block.ops = ops
        for op in ops:
            op.parent = block


def run(function: Function, options: Any = None) -> None:
    fuser = _Fuser(function)
    fuser.visit(function.body)
    remap_operands(function.body, {v: fuser.resolve(v) for v in fuser.mapping})

"""Structured control flow in LLVM IR: ``if`` (as branches, or as selects where both
sides are cheap and safe to run), counted ``for`` loops and ``while`` loops with their
carried values as phis. Mixed into the kernel emitter (emit_kernel.py), whose builder,
values and helpers it uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl.codegen.llvm_types import (
    Repr,
    flat_types,
    flatten,
    i64,
    unflatten,
)
from kdsl.codegen.scalar_ops import range_length
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.ops import Trait, lookup
from kdsl.ir.structured import ForOp, IfOp, WhileOp

SPECULATION_LIMIT = 48  # ops an if may run on both sides to become a select

# LLVM loop metadata by hint: loops that run a few times, where vectorised and unrolled
# copies would cost compile time and save nothing
_LOOP_HINTS: dict[str, list[tuple[str, bool | None]]] = {
    "no-vectorize": [("llvm.loop.vectorize.enable", False)],
    "no-unroll": [("llvm.loop.unroll.disable", None)],
    "no-runtime-unroll": [("llvm.loop.unroll.runtime.disable", None)],
}


def loop_hints(module: ir.Module, hints: tuple[str, ...]) -> ir.MDValue:
    """A loop's ``!llvm.loop`` metadata: a node whose first operand is itself, then
    one per hint."""
    options: list[ir.MDValue] = []
    for hint in hints:
        if hint.startswith("interleave-"):  # vectorised math (vector_math.interleave_hints)
            options.append(module.add_metadata([
                ir.MetaDataString(module, "llvm.loop.interleave.count"),
                ir.Constant(ir.IntType(32), int(hint.removeprefix("interleave-")))]))
            continue
        for name, flag in _LOOP_HINTS[hint]:
            operands: list[Any] = [ir.MetaDataString(module, name)]
            if flag is not None:
                operands.append(ir.Constant(ir.IntType(1), int(flag)))
            options.append(module.add_metadata(operands))
    # a node of its own per loop (add_metadata returns an equal node made before: the
    # placeholder first operand differs), made to refer to itself as LLVM's loop ids do
    placeholder = ir.MetaDataString(module, f"kdsl.loop.{len(module.metadata)}")
    node = module.add_metadata([placeholder, *options])
    node.operands = (node, *options)
    return node


def _speculatable(op: Operation) -> bool:
    """A branch whose regions only compute (no memory, no loops) and are small."""
    count = 0
    for region in op.regions:
        for inner in region.walk():
            count += 1
            if inner.name in ("yield", "if"):
                continue
            if not lookup(inner.name).has(Trait.PURE) or inner.name == "pow":
                return False
    return count <= SPECULATION_LIMIT


def _same_llvm_value(x: ir.Value, y: ir.Value) -> bool:
    """One value: the same instruction or argument, or two constants of one type and value
    (llvmlite makes a new Constant object for each literal)."""
    if x is y:
        return True
    return (isinstance(x, ir.Constant) and isinstance(y, ir.Constant) and x.type == y.type
            and str(x) == str(y))


def _addend_to(total: ir.Value, base: ir.Value) -> ir.Value | None:
    """``x`` when ``total`` is ``base + x`` or ``x + base`` (an integer or float add)."""
    if not (isinstance(total, ir.Instruction) and total.opname in ("fadd", "add")
            and len(total.operands) == 2):
        return None
    first, second = total.operands
    if _same_llvm_value(first, base):
        return second
    if _same_llvm_value(second, base):
        return first
    return None


class ControlFlow:
    """The control-flow part of the kernel emitter."""

    values: dict[Value, Repr]

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def _phis(self, types: list[Any], incoming: list[Repr], block: ir.Block) -> list[Repr]:
        out = []
        for t, init in zip(types, incoming):
            parts = []
            for lt, v in zip(flat_types(t), flatten(init, t)):
                phi = self.b.phi(lt)
                phi.add_incoming(v, block)
                parts.append(phi)
            out.append(unflatten(t, parts))
        return out

    @staticmethod
    def _add_incoming(phis: list[Repr], values: list[Repr], block: ir.Block,
                      types: list[Any]) -> None:
        for phi, v, t in zip(phis, values, types):
            for p, x in zip(flatten(phi, t), flatten(v, t)):
                p.add_incoming(x, block)

    def emit_if(self, op: Operation) -> list[Repr]:
        branch = IfOp(op)
        cond = self.values[branch.condition]
        if _speculatable(op):
            return self._emit_if_as_select(op, cond)
        fn = self.b.function
        then_bb = fn.append_basic_block("if.then")
        else_bb = fn.append_basic_block("if.else")
        merge_bb = fn.append_basic_block("if.end")
        self.b.cbranch(cond, then_bb, else_bb)
        incoming = []
        for region, bb in zip((branch.then_block, branch.else_block), (then_bb, else_bb)):
            self.b.position_at_end(bb)
            values = self.emit_block(region)
            incoming.append((values, self.b.block))
            self.b.branch(merge_bb)
        self.b.position_at_end(merge_bb)
        types = [r.type for r in op.results]
        if not types:
            return []
        (then_vals, then_end), (else_vals, else_end) = incoming
        phis = self._phis(types, then_vals, then_end)
        self._add_incoming(phis, else_vals, else_end, types)
        return phis

    def _emit_if_as_select(self, op: Operation, cond: ir.Value) -> list[Repr]:
        """Both branches run and the results are selected: straight-line code that the
        loop vectoriser can handle (only for small, pure branches)."""
        then_values = self.emit_block(op.regions[0])
        else_values = self.emit_block(op.regions[1])
        results = []
        for result, a, b in zip(op.results, then_values, else_values):
            parts = [self._select(cond, x, y)
                     for x, y in zip(flatten(a, result.type), flatten(b, result.type))]
            results.append(unflatten(result.type, parts))
        return results

    def _select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        """``cond ? a : b``; a conditional accumulation ``cond ? s + x : s`` becomes
        ``s + (cond ? x : 0)``, the form LLVM's loop vectoriser recognises as a reduction."""
        for taken, other, flip in ((a, b, False), (b, a, True)):
            addend = _addend_to(taken, other)
            if addend is not None:
                assert isinstance(taken, ir.Instruction)
                # -0.0 is the exact identity of fadd: s + -0.0 == s even for s == -0.0
                zero = ir.Constant(addend.type, -0.0 if taken.opname == "fadd" else 0)
                picked = self.b.select(cond, zero, addend) if flip else self.b.select(cond, addend, zero)
                if taken.opname == "fadd":
                    return self.b.fadd(other, picked, flags=self.options.fastmath)
                return self.b.add(other, picked)
        return self.b.select(cond, a, b)

    def emit_for(self, op: Operation) -> list[Repr]:
        if op.attrs.get("prefetch_next_row"):  # row_prefetch.py
            self.prefetch_next_rows(op)
        if op.attrs.get("stream_stores"):  # streaming_stores.py
            streamed = self.emit_streaming_for(op)
            if streamed is not None:
                return streamed
        return self.emit_plain_for(op)

    def emit_plain_for(self, op: Operation) -> list[Repr]:
        loop = ForOp(op)
        start, stop, step = (self.values[v] for v in (loop.start, loop.stop, loop.step))
        inits = [self.values[v] for v in loop.inits]
        body = loop.body
        types = [r.type for r in op.results]
        # ``vectorize = False``: a pass over memory the compiler adds, short next to the
        # loops around it, where a vectorised copy costs compile time and saves nothing
        hints = ("no-vectorize", "no-unroll") if op.attrs.get("vectorize") is False else ()
        if op.attrs.get("unroll") is False:  # a loop whose body is a loop, run a few times
            hints = tuple(dict.fromkeys((*hints, "no-unroll")))
        if isinstance(step, ir.Constant) and step.constant == 1:  # iv + 1 <= stop: no overflow
            return self._counted_loop(start, stop, step, inits, types,
                                      lambda iv, carried: self._run_body(body, [iv, *carried]),
                                      hints)
        # a larger step could carry the induction variable past INT64_MAX: count instead
        count = range_length(self.b, start, stop, step)

        def run(counter: ir.Value, carried: list[Repr]) -> list[Repr]:
            return self._run_body(body, [self.b.add(start, self.b.mul(counter, step)), *carried])

        return self._counted_loop(ir.Constant(i64, 0), count, ir.Constant(i64, 1), inits, types,
                                  run, hints)

    def emit_range_length(self, op: Operation) -> list[Repr]:
        start, stop, step = (self.values[v] for v in op.operands)
        return [range_length(self.b, start, stop, step)]

    def _run_body(self, body: Block, args: list[Repr]) -> list[Repr]:
        for a, v in zip(body.args, args):
            self.values[a] = v
        return self.emit_block(body)

    def _counted_loop(self, start: ir.Value, stop: ir.Value, step: ir.Value, inits: list[Repr],
                      types: list[Any], body: Any, hints: tuple[str, ...] = ()) -> list[Repr]:
        """A loop from ``start`` to ``stop``; ``hints`` name LLVM loop transformations it
        is not worth (see ``loop_hints``)."""
        fn = self.b.function
        pre = self.b.block
        header = fn.append_basic_block("for.header")
        body_bb = fn.append_basic_block("for.body")
        exit_bb = fn.append_basic_block("for.end")
        self.b.branch(header)
        self.b.position_at_end(header)
        iv = self.b.phi(i64)
        iv.add_incoming(start, pre)
        carried = self._phis(types, inits, pre)
        self.b.cbranch(self.b.icmp_signed("<", iv, stop), body_bb, exit_bb)
        self.b.position_at_end(body_bb)
        math_calls = self.scalar.vector_math_calls
        wide_accesses = self.scalar.wide_element_accesses
        new_values = body(iv, carried)
        next_iv = self.b.add(iv, step, flags=["nsw"])
        latch = self.b.block
        iv.add_incoming(next_iv, latch)
        self._add_incoming(carried, new_values, latch, types)
        back_edge = self.b.branch(header)
        if self.scalar.vector_math_calls > math_calls:
            from kdsl.codegen.vector_math import interleave_hints

            hints += interleave_hints(self.scalar.vector_math_calls - math_calls)
        if self.scalar.wide_element_accesses > wide_accesses and not types and (
                "no-vectorize" not in hints):
            # a loop streaming 3x3 f64 matrices: vectorised across iterations, each
            # component would be gathered (or shuffled out of 72-element loads), several
            # times slower than each iteration vectorised on its own (SLP). A loop that
            # carries sums is vectorised still: its arithmetic pays for the loads
            hints += ("no-vectorize",)
        if hints:
            back_edge.set_metadata("llvm.loop", loop_hints(self.b.module, hints))
        self.b.position_at_end(exit_bb)
        return carried

    def emit_while(self, op: Operation) -> list[Repr]:
        loop = WhileOp(op)
        inits = [self.values[v] for v in loop.inits]
        before, body = loop.before, loop.body
        fn = self.b.function
        pre = self.b.block
        header = fn.append_basic_block("while.cond")
        body_bb = fn.append_basic_block("while.body")
        exit_bb = fn.append_basic_block("while.end")
        self.b.branch(header)
        self.b.position_at_end(header)
        types = [r.type for r in op.results]
        carried = self._phis(types, inits, pre)
        (cond,) = self._run_body(before, carried)
        self.b.cbranch(cond, body_bb, exit_bb)
        self.b.position_at_end(body_bb)
        new_values = self._run_body(body, carried)
        self._add_incoming(carried, new_values, self.b.block, types)
        self.b.branch(header)
        self.b.position_at_end(exit_bb)
        return carried

    def _entry_alloca(self, t: ir.Type, count: int = 1) -> ir.Value:
        builder, _ = self.alloca_builders[self.b.function]
        return builder.alloca(t, size=count) if count != 1 else builder.alloca(t)

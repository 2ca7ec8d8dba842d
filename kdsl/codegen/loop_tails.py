"""An inner loop of a parallel region with its remainder in a function of its own.

LLVM vectorises a heavy loop of f32 (16 lanes with AVX-512, two vectors an iteration)
into three copies of its body: the vector loop, a vectorised epilogue of 4 lanes for the
remainder, and a scalar loop for the last iterations; a region is compiled on one
thread, which the rest of a split module's compile (split_module) waits for. Here the
loop runs its whole iterations of two vectors inline, vectorised at that width, behind a
branch that skips it where there is none (LLVM then compiles neither an epilogue nor a
scalar loop for it), and the rest in a function of the module (``<region>.tail.<k>``,
split_module.TAIL_NAME) that runs the same body 4 lanes at a time: a module compiled in
parts compiles it on the calling thread while another compiles the region. The code run
is LLVM's own epilogue's, behind one call per run of the loop that has a remainder (the
n-body runs as fast; its region's LLVM time drops by about a seventh).

Only for loops where LLVM would vectorise such an epilogue (16 or more lanes), which
carry sums and whose body is heavy enough for its compile time to matter, and only with
bodies the tail function can run as they are: arithmetic, loads, stores and branches, no
inner loop, no atomic update (a region's private copies are values of its own function),
no call, no vector math.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import Repr, flat_types, flatten, i64, unflatten
from kdsl.codegen.parallel_cost import body_cost
from kdsl.ir.analysis import free_values
from kdsl.ir.core import Block, Operation, Value
from kdsl.ir.ops import MATH_FUNCTIONS, Trait, lookup
from kdsl.ir.structured import ForOp

# the least body cost (parallel_cost.body_cost) worth a tail function: below it the
# epilogue compiles in little time, and the call would be a larger part of a short loop
MIN_BODY_COST = 16
# the lanes LLVM vectorises an epilogue from (its -epilogue-vectorization-minimum-VF),
# and the lanes of its epilogue for such a loop
MIN_LANES = 16
TAIL_LANES = 4
# the vectors of an iteration of the inline loop: what LLVM chooses for a loop carrying
# sums inside another loop (its -max-nested-scalar-reduction-interleave); with one, the
# n-body ran 4% slower
INTERLEAVE = 2
# operations the tail function runs as they are; a math function is a call of the
# compiler's vector math (with hints of its own) unless LLVM has an instruction for it
_EFFECTS = frozenset({"array_load", "array_store", "if", "yield", "raise_index_error", "assert"})
_NATIVE_MATH = frozenset({"sqrt", "fma", "copysign", "rint", "sign", "isnan", "isinf", "isfinite"})


@functools.cache
def host_vector_bytes() -> int:
    """The width of the vectors LLVM's loop vectoriser uses on this host: 64 bytes on AMD
    processors with AVX-512 (LLVM's Intel models prefer 256-bit vectors), 32 with AVX2,
    16 otherwise. Read from the OS, as the cache key's description of the processor is:
    the compiler's output must not depend on whether LLVM has loaded yet."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("flags", "vendor_id"))]
    except OSError:
        return 16
    flags = set(" ".join(ln.split(":", 1)[-1] for ln in lines if ln.startswith("flags")).split())
    amd = any("AuthenticAMD" in ln for ln in lines if ln.startswith("vendor_id"))
    if "avx512f" in flags and amd:
        return 64
    return 32 if "avx2" in flags else 16


def _runs_as_is(op: Operation) -> bool:
    if op.name in _EFFECTS:
        return True
    if op.name in MATH_FUNCTIONS and op.name not in _NATIVE_MATH:
        return False
    return op.name != "pow" and lookup(op.name).has(Trait.PURE)


def _widest_item(body: Block, carried: list[Any]) -> int:
    """The largest element size the loop loads, stores or carries (what LLVM's vectoriser
    takes its number of lanes from)."""
    types = list(carried)
    for op in body.walk():
        if op.name == "array_load":
            types.append(op.result.type)
        elif op.name == "array_store":
            types.append(op.operands[-1].type)
    sizes = [T.element_scalar(t).itemsize for t in types
             if isinstance(t, (T.ScalarType, T.VectorType, T.MatrixType))]
    return max(sizes, default=0)


def tail_lanes(op: Operation) -> int:
    """The vector width (in elements) of the loop's inline part where its remainder is
    worth a tail function; 0 where it is not: a loop that carries no sums (LLVM would
    interleave it otherwise), a body the tail function cannot run or too light, fewer
    than MIN_LANES lanes, or one core (the module is then compiled on one thread, where
    a function more only costs time)."""
    from kdsl.codegen.cpu import usable_cores

    loop = ForOp(op)
    body = loop.body
    carried = [r.type for r in op.results]
    if not carried or not all(isinstance(t, (T.ScalarType, T.VectorType)) for t in carried):
        return 0
    if not all(_runs_as_is(inner) for inner in body.walk()):
        return 0
    if body_cost(body) < MIN_BODY_COST or usable_cores() < 2:
        return 0
    widest = _widest_item(body, carried)
    if widest == 0:
        return 0
    lanes = host_vector_bytes() // widest
    return lanes if lanes >= MIN_LANES else 0


class LoopTails:
    """The tail-function part of the kernel emitter (mixed into KernelEmitter, whose
    builder, values and helpers it uses)."""

    values: dict[Value, Repr]
    status: ir.Value
    module: ir.Module
    tail_count: int
    outlines_loop_tails = True

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def emit_loop_with_tail(self, op: Operation, lanes: int) -> list[Repr]:
        """The loop's multiple of ``lanes`` iterations inline, the rest in a call of a
        tail function (where there is a rest)."""
        loop = ForOp(op)
        body = loop.body
        start, stop = self.values[loop.start], self.values[loop.stop]
        inits = [self.values[v] for v in loop.inits]
        types = [r.type for r in op.results]
        zero, one = ir.Constant(i64, 0), ir.Constant(i64, 1)
        length = self.b.sub(stop, start)
        length = self.b.select(self.b.icmp_signed(">", length, zero), length, zero)
        # whole vectors, and a branch around the loop where there is none: LLVM then knows
        # the loop runs at least one vector's iterations, a multiple of them, and
        # compiles no scalar remainder for it
        block = lanes * INTERLEAVE
        vectors = self.b.lshr(length, ir.Constant(i64, block.bit_length() - 1))
        inline_stop = self.b.add(start, self.b.mul(vectors, ir.Constant(i64, block),
                                                   flags=["nuw", "nsw"]))

        def run(iv: ir.Value, carried: list[Repr]) -> list[Repr]:
            return self._run_body(body, [iv, *carried])

        fn = self.b.function
        before = self.b.block
        loop_bb = fn.append_basic_block("vectors")
        after_bb = fn.append_basic_block("vectors.done")
        self.b.cbranch(self.b.icmp_unsigned("!=", vectors, zero), loop_bb, after_bb)
        self.b.position_at_end(loop_bb)
        looped = self._counted_loop(start, inline_stop, one, inits, types, run,
                                    (f"vectorize-width-{lanes}", f"interleave-{INTERLEAVE}"))
        looped_end = self.b.block
        self.b.branch(after_bb)
        self.b.position_at_end(after_bb)
        main = self._merge([(inits, before), (looped, looped_end)], types)
        tail = self._tail_function(body, types)
        arguments = self._tail_arguments(body)
        before = self.b.block
        call_bb = fn.append_basic_block("tail.call")
        done_bb = fn.append_basic_block("tail.done")
        self.b.cbranch(self.b.icmp_signed("<", inline_stop, stop), call_bb, done_bb)
        self.b.position_at_end(call_bb)
        flat_main = [part for value, t in zip(main, types) for part in flatten(value, t)]
        result = self.b.call(tail, [inline_stop, stop, self.status, *arguments, *flat_main])
        flat_tail = [self.b.extract_value(result, k) for k in range(len(flat_main))]
        rest = []
        for t in types:
            width = len(flat_types(t))
            rest.append(unflatten(t, flat_tail[:width]))
            flat_tail = flat_tail[width:]
        self.b.branch(done_bb)
        self.b.position_at_end(done_bb)
        return self._merge([(main, before), (rest, call_bb)], types)

    def _merge(self, incoming: list[tuple[list[Repr], ir.Block]], types: list[Any]) -> list[Repr]:
        """Phis of the values each block brings (at the start of the current block)."""
        (first, first_block), *others = incoming
        phis = self._phis(types, first, first_block)
        for values, block in others:
            self._add_incoming(phis, values, block, types)
        return phis

    def _tail_arguments(self, body: Block) -> list[ir.Value]:
        """The parts of the values the body uses from outside that are no constants
        (constants, such as a contiguous array's strides, stay constants in the tail)."""
        return [part for v in free_values(body) for part in flatten(self.values[v], v.type)
                if not isinstance(part, ir.Constant)]

    def _tail_function(self, body: Block, types: list[Any]) -> ir.Function:
        """``tail(start, stop, status, captured..., carried...) -> {carried...}``: the loop
        from ``start`` to ``stop``, vectorised TAIL_LANES at a time."""
        free = free_values(body)
        captured = [(v, flatten(self.values[v], v.type)) for v in free]
        carried_types = [lt for t in types for lt in flat_types(t)]
        parameters = [i64, i64, self.status.type,
                      *[part.type for _, parts in captured for part in parts
                        if not isinstance(part, ir.Constant)],
                      *carried_types]
        region = self.b.function
        self.tail_count += 1
        fn = ir.Function(self.module, ir.FunctionType(ir.LiteralStructType(carried_types),
                                                      parameters),
                         f"{region.name}.tail.{self.tail_count}")
        fn.linkage = "internal"
        fn.attributes.add("noinline")  # a call per run of the loop, not a copy inline
        saved = (self.scalar.builder, self.status, dict(self.values))
        self._start_function(fn)
        start, stop, self.status, *rest = fn.args
        position = 0
        for v, parts in captured:
            mine = []
            for part in parts:
                if isinstance(part, ir.Constant):
                    mine.append(part)
                else:
                    mine.append(rest[position])
                    position += 1
            self.values[v] = unflatten(v.type, mine)
        inits, carried_params = [], rest[position:]
        position = 0
        for t in types:
            width = len(flat_types(t))
            inits.append(unflatten(t, list(carried_params[position:position + width])))
            position += width

        def run(iv: ir.Value, carried: list[Repr]) -> list[Repr]:
            return self._run_body(body, [iv, *carried])

        finals = self._counted_loop(start, stop, ir.Constant(i64, 1), inits, types, run,
                                    (f"vectorize-width-{TAIL_LANES}", "interleave-1"))
        result: ir.Value = ir.Constant(fn.ftype.return_type, None)
        for k, part in enumerate(p for value, t in zip(finals, types) for p in flatten(value, t)):
            result = self.b.insert_value(result, part, k)
        self.b.ret(result)
        self._finish_function(fn)
        self.scalar.builder, self.status, self.values = saved
        return fn

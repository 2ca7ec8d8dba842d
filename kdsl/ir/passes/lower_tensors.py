"""Lowering of tensor ops to loop nests, fusing elementwise chains into their consumers.

- ``tensor_assign(dest, expr)`` becomes one parallel loop nest over ``dest``'s shape that
  computes ``expr`` element by element: every elementwise producer used only there (and
  with no write to memory in between) is computed in that loop, with no temporary array.
- ``tensor_reduce`` becomes a parallel loop with a reduction (or, along one axis, a
  parallel loop over the other axes with a serial loop inside), fused the same way.
- An elementwise result used anywhere else (twice, by ``@``, returned, stored in a local
  read after a write) is materialised: a new array and one loop nest to fill it.
- ``@`` becomes a loop nest whose innermost loop runs along contiguous rows
  (``tensor_matmul.py``); which producers fuse into which consumers is decided in
  ``tensor_fusion.py``.

Shapes are checked before each loop nest: a mismatch raises ``ValueError`` naming the
sizes, never an out-of-bounds access. A destination that overlaps an operand read at
other indices (``a[1:] = a[:-1]``) gets its value computed into a temporary first, as
NumPy does.
"""

from __future__ import annotations

from typing import Any

from kdsl import types as T
from kdsl.ir.analysis import definitions, users
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Operation, Value, use_counts
from kdsl.ir.effects import view_source
from kdsl.ir.passes.tensor_fusion import disjoint_rows, feeds_elementwise, fusable, lower_deferred
from kdsl.ir.passes.tensor_matmul import (
    assigned_product,
    lower_matmul,
    lower_matmul_into,
    lower_matmul_with_epilogue,
)
from kdsl.ir.passes.tensor_rows import (
    absorbed_ops,
    lower_rows,
    nan_ignoring,
    row_invariant,
    row_plans,
)
from kdsl.ir.reductions import REDUCTION_COMBINE, reduction_identity
from kdsl.ir.rewrite import remap_operands

# statements with at most this many array operands get a vectorised loop per broadcasting
# pattern of their innermost axis (see TensorLowerer.element)
UNSWITCHED_OPERANDS = 2
_TENSOR_OPS = ("tensor_map", "tensor_assign", "tensor_reduce", "tensor_matmul")
# tensor_map functions that are IR min or max plus NumPy's rule for NaN: (op, ignore NaN)
_NAN_RULES = {"minimum": ("min", False), "maximum": ("max", False), "fmin": ("min", True),
              "fmax": ("max", True)}


def _base(v: Value, definitions: dict[Value, Operation]) -> Value:
    """The array a view was taken of."""
    op = definitions.get(v)
    while op is not None and (source := view_source(op)) is not None:
        v = source
        op = definitions.get(v)
    return v


class TensorLowerer:
    def __init__(self, function: Function, target: str = "cpu") -> None:
        self.target = target
        self.assigned: dict[Operation, Operation] = {}  # c[...] = a @ b: assignment -> @
        body = function.body
        self.definitions = definitions(body)
        self.uses = use_counts(body)
        self.users = users(body)
        self.fused: set[Value] = set()
        self.mapping: dict[Value, Value] = {}
        self.deferred: dict[Value, Operation] = {}  # products waiting for their epilogue
        self.direct = False
        self.unswitch_innermost = False  # see element()
        self.builder = IRBuilder(Block())
        # reductions computed row by row (tensor_rows.py): the current row's value, and
        # the shape of the reduction's result
        self.row_values: dict[Value, Value] = {}
        self.row_shapes: dict[Value, list[Value]] = {}
        self.row_stored: dict[Value, Value] = {}  # values kept in the destination's row
        self.fastmath = True

    # --- driving ---------------------------------------------------------------------

    def visit(self, block: Block) -> None:
        out: list[Operation] = []
        plans = row_plans(self, block)
        absorbed = absorbed_ops(plans)
        for position, op in enumerate(block.ops):
            for region in op.regions:
                self.visit(region)
            op.operands = [self.resolve(v) for v in op.operands]
            if op.name not in _TENSOR_OPS:
                out.append(op)
                continue
            if op in absorbed:  # computed in its assignment's row loop, then dropped as dead
                if op.name == "tensor_map":
                    self.fused.add(op.result)
                out.append(op)
                continue
            self.builder = IRBuilder(Block())
            self.builder.location = op.location
            if op in plans:
                lower_rows(self, op, plans[op])
            elif op.name == "tensor_map":
                if fusable(self, op, block, position):
                    self.fused.add(op.result)
                    out.append(op)  # read by its consumer's loop, then dropped as dead
                    continue
                self.mapping[op.result] = self.materialize(op.result)
            elif op in self.assigned:  # c[...] = a @ b: the product writes into c
                lower_matmul_into(self, self.assigned.pop(op), op)
            elif op.name == "tensor_assign":
                lower_deferred(self, op.operands[1])
                self.assign(op.operands[0], op.operands[1],
                            accumulate=op.attrs.get("accumulate"))
            elif op.name == "tensor_reduce":
                lower_deferred(self, op.operands[0])
                self.mapping[op.result] = self.reduce(op)
            elif (assign := assigned_product(self, op, block, position)) is not None:
                self.assigned[assign] = op  # lowered at the assignment (after c's view)
                continue
            elif op.operands[1].type.ndim == 2 and feeds_elementwise(self, op, block, position):
                self.deferred[op.result] = op  # lowered with its elementwise epilogue
                out.append(op)
                continue
            else:
                self.mapping[op.result] = lower_matmul(self, op)
            emitted = self.builder.block.ops
            for new in emitted:
                for r in new.results:
                    self.definitions[r] = new
            out.extend(emitted)
        block.ops = out
        for op in out:
            op.parent = block

    def resolve(self, v: Value) -> Value:
        while v in self.mapping:
            v = self.mapping[v]
        return v

    # --- helpers --------------------------------------------------------------------

    def value(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.builder.value(name, *operands, **attrs)

    def constant(self, value: Any, t: T.ScalarType) -> Value:
        return self.builder.constant(value, t)

    def dims(self, v: Value) -> list[Value]:
        v = self.resolve(v)
        if v in self.row_shapes:
            return self.row_shapes[v]
        return [self.value("array_dim", v, axis=k) for k in range(v.type.ndim)]

    def leaves(self, v: Value) -> list[Value]:
        """The arrays an expression reads (its fused producers looked through)."""
        v = self.resolve(v)
        if not isinstance(v.type, T.ArrayType):
            return []
        if v in self.fused:
            return [leaf for operand in self.definitions[v].operands for leaf in self.leaves(operand)]
        return [v]

    def broadcast_shape(self, v: Value, ndim: int, what: str) -> list[Value]:
        """The shape of an expression's result, with run-time checks that its operands'
        shapes broadcast (equal sizes, or 1)."""
        one = self.constant(1, T.i64)
        shape = [one] * ndim
        for leaf in self.leaves(v):
            offset = ndim - leaf.type.ndim
            for axis, size in enumerate(self.dims(leaf)):
                current = shape[offset + axis]
                if current is one:
                    shape[offset + axis] = size
                    continue
                same = self.value("eq", size, current)
                ok = self.value("bit_or", same, self.value("bit_or", self.value("eq", size, one),
                                                             self.value("eq", current, one)))
                self.builder.create("raise_shape_error", [ok, size, current],
                                    {"axis": offset + axis, "what": what})
                is_one = self.value("eq", current, one)
                shape[offset + axis] = self.value("select", is_one, size, current)
        return shape

    def check_fits(self, v: Value, shape: list[Value], what: str) -> None:
        """``v`` broadcasts to ``shape`` (each size equal or 1)."""
        one = self.constant(1, T.i64)
        ndim = len(shape)
        for leaf in self.leaves(v):
            offset = ndim - leaf.type.ndim
            for axis, size in enumerate(self.dims(leaf)):
                target = shape[offset + axis]
                ok = self.value("bit_or", self.value("eq", size, target), self.value("eq", size, one))
                self.builder.create("raise_shape_error", [ok, size, target],
                                    {"axis": offset + axis, "what": what})

    def convert(self, v: Value, t: Any) -> Value:
        if v.type == t:
            return v
        if isinstance(t, (T.VectorType, T.MatrixType)) and isinstance(v.type, T.ScalarType):
            return self.value("splat", self.builder.cast(v, t.element), type=t)
        return self.builder.cast(v, t)

    def element(self, v: Value, index: list[Value]) -> Value:
        """The element of expression ``v`` at the multi-index ``index`` (right-aligned).

        In the loop version for operands that all have the result's shape (``self.direct``)
        the index is used as it is; otherwise a size-1 axis is broadcast."""
        v = self.resolve(v)
        if not isinstance(v.type, T.ArrayType):
            return v
        if v in self.row_values:
            return self.row_values[v]
        if v in self.row_stored:
            return self.value("array_load", self.row_stored[v], *index)
        if v in self.fused:
            op = self.definitions[v]
            operand_type = op.attrs["operand_type"]
            args = [self.element(a, index) for a in op.operands]
            fn = op.attrs["fn"]
            if fn == "select":
                cond = args[0] if args[0].type == T.bool_ else self.value("ne", args[0], self.constant(0, args[0].type))
                args = [cond] + [self.convert(a, operand_type) for a in args[1:]]
            else:
                args = [self.convert(a, operand_type) for a in args]
            if fn in _NAN_RULES:
                return self.convert(self.min_max_with_nan(fn, args[0], args[1]),
                                    op.result.type.dtype)
            if fn == "div" and self.fastmath and row_invariant(self, op.operands[1]):
                # a multiplication by the row's reciprocal (hoisted out of the row loop)
                one = self.convert(self.constant(1, T.element_scalar(operand_type)), operand_type)
                args = [args[0]] + [self.value("div", one, args[1])]
                product = self.builder.create("mul", args, {"by_reciprocal": True}).result
                return self.convert(product, op.result.type.dtype)
            result = self.builder.create(fn, args).result
            return self.convert(result, op.result.type.dtype)
        offset = len(index) - v.type.ndim
        if self.direct:
            return self.value("array_load", v, *index[offset:])
        # A select on a loop-invariant size == 1 is unswitched by LLVM into a loop copy
        # per case, each vectorised: for the innermost axis of statements with few
        # operands only (a copy per operand otherwise). Elsewhere index * min(size - 1, 1),
        # 0 on a size-1 axis, which nothing copies (an outer index is invariant in the
        # vectorised inner loop anyway).
        one = self.constant(1, T.i64)
        innermost = len(index) - 1
        indices = []
        for axis, size in enumerate(self.dims(v)):
            i = index[offset + axis]
            if offset + axis == innermost and self.unswitch_innermost:
                is_one = self.value("eq", size, one)
                indices.append(self.value("select", is_one, self.constant(0, T.i64), i))
            else:
                keep = self.value("min", self.value("sub", size, one), one)
                indices.append(self.value("mul", i, keep))
        return self.value("array_load", v, *indices)

    def min_max_with_nan(self, fn: str, a: Value, b: Value) -> Value:
        """np.minimum/np.maximum (NaN wins) and np.fmin/np.fmax (NaN loses) from the IR's
        min and max, which give ``a`` when either is NaN."""
        kind, ignore_nan = _NAN_RULES[fn]
        result = self.value(kind, a, b)
        if not T.element_scalar(a.type).is_float:
            return result
        tested = a if ignore_nan else b
        return self.value("select", self.value("ne", tested, tested), b, result)

    def versions(self, source: Value, shape: list[Value], loop: Any, types: list[Any]) -> list[Value]:
        """``loop()`` emitted twice: for operands whose shapes all equal ``shape`` (plain
        indexing, which vectorises), and for broadcasting ones; chosen at run time."""
        leaves = self.leaves(source)
        if not leaves:
            self.direct = True
            results = loop()
            self.direct = False
            return results
        same: Value | None = None
        for leaf in leaves:
            offset = len(shape) - leaf.type.ndim
            for axis, size in enumerate(self.dims(leaf)):
                equal = self.value("eq", size, shape[offset + axis])
                same = equal if same is None else self.value("bit_and", same, equal)
            if leaf.type.ndim != len(shape):
                same = self.constant(False, T.bool_)
        assert same is not None
        self.unswitch_innermost = len(leaves) <= UNSWITCHED_OPERANDS
        regions = []
        for direct in (True, False):
            block = Block()
            with self.builder.at(block):
                self.direct = direct
                results = loop()
                self.builder.create("yield", results)
            regions.append(block)
        self.direct = False
        return self.builder.create("if", [same], {"types": types}, regions, types).results

    def parallel_loop(self, extents: list[Value], body: Any, reductions: tuple = (),
                      inits: tuple = ()) -> Operation:
        """``parallel_for`` over ``extents``; ``body(ivs, accs)`` returns the yielded values."""
        block = Block([Value(T.i64, f"i{k}") for k in range(len(extents))]
                      + [Value(v.type) for v in inits])
        with self.builder.at(block):
            yielded = body(block.args[:len(extents)], block.args[len(extents):])
            self.builder.create("yield", yielded)
        return self.builder.create(
            "parallel_for", [*extents, *inits], {"ndim": len(extents), "reductions": reductions},
            [block], [v.type for v in inits],
        )

    def serial_loop(self, stop: Value, inits: list[Value], body: Any,
                    start: Value | None = None) -> Operation:
        block = Block([Value(T.i64, "k")] + [Value(v.type) for v in inits])
        with self.builder.at(block):
            self.builder.create("yield", body(block.args[0], block.args[1:]))
        zero, one = self.constant(0, T.i64), self.constant(1, T.i64)
        return self.builder.create("for", [start or zero, stop, one, *inits], {}, [block],
                                   [v.type for v in inits])

    # --- lowering ---------------------------------------------------------------------

    def assign(self, dest: Value, source: Value, check: bool = True,
               accumulate: str | None = None) -> None:
        """``dest[...] = source``; with ``accumulate`` ("add" or "sub"), ``dest[...] +=
        source`` element by element with atomic updates (in a parallel loop)."""
        dest_base = _base(dest, self.definitions)
        overlapping = [leaf for leaf in self.leaves(source)
                       if leaf is not dest and _base(leaf, self.definitions) is dest_base
                       and not disjoint_rows(self, leaf, dest)]
        if overlapping:  # read everything before writing anything, as NumPy does
            source = self.materialize(source, copy=True)
        shape = self.dims(dest)
        if check:
            self.check_fits(source, shape, "cannot assign: array shapes")

        def body(ivs: list[Value], accs: list[Value]) -> list[Value]:
            value = self.convert(self.element(source, list(ivs)), dest.type.dtype)
            if accumulate is not None:
                self.builder.create("atomic_rmw", [dest, *ivs, value],
                                    {"kind": accumulate, "implicit": True})
            else:
                self.builder.create("array_store", [dest, *ivs, value])
            return []

        if not shape:
            return
        extents = [self.value("max", s, self.constant(0, T.i64)) for s in shape]

        def loop() -> list[Value]:
            self.parallel_loop(extents, body)
            return []

        self.versions(source, shape, loop, [])

    def materialize(self, v: Value, copy: bool = False) -> Value:
        """A new array holding the value of expression ``v`` (or a copy of array ``v``)."""
        op = self.definitions.get(v)
        is_expression = op is not None and op.name == "tensor_map"
        if not isinstance(v.type, T.ArrayType) or not (is_expression or copy):
            return v
        if is_expression:
            self.fused.add(v)  # computed element by element into the new array
            leaves = self.leaves(v)
            products = [leaf for leaf in leaves if leaf in self.deferred]
            # the epilogue writes into the product's own rows: only when nothing else can
            # make the result bigger than the product (other operands of at most 1 axis)
            others_small = all(leaf.type.ndim < 2 for leaf in leaves if leaf not in products)
            if (len(products) == 1 and v.type.ndim == 2 and others_small
                    and products[0].type.dtype == v.type.dtype):
                return lower_matmul_with_epilogue(self, self.deferred.pop(products[0]), v)
            lower_deferred(self, v)
        t: T.ArrayType = v.type
        shape = self.broadcast_shape(v, t.ndim, "operands could not be broadcast together")
        new = self.value("array_new", *shape, type=T.ArrayType(t.dtype, t.ndim, True), fill="empty")
        self.assign(new, v, check=False)
        return new

    def _identity(self, kind: str, t: T.ScalarType) -> Value:
        t = T.element_scalar(t)
        return self.constant(reduction_identity(kind, t), t)

    def reduce(self, op: Operation) -> Value:
        source = op.operands[0]
        kind, axis, keepdims = op.attrs["kind"], op.attrs["axis"], op.attrs["keepdims"]
        combine = REDUCTION_COMBINE[kind]
        result_type = op.result.type
        element_t = result_type.dtype if isinstance(result_type, T.ArrayType) else result_type
        scalar = T.element_scalar(element_t)
        ndim = source.type.ndim
        shape = self.broadcast_shape(source, ndim, "operands could not be broadcast together")
        if kind in ("min", "max"):  # NumPy: a zero-size array has no minimum
            count = self.constant(1, T.i64)
            for size in shape:
                count = self.value("mul", count, size)
            nonempty = self.value("gt", count, self.constant(0, T.i64))
            self.builder.create("raise_value_error", [nonempty, count], {
                "what": f"zero-size array to reduction operation {kind} which has no identity"})
        if axis is None or ndim == 1:
            init = self.convert(self._identity(combine, scalar), element_t)

            def accumulate(ivs: list[Value], accs: list[Value]) -> list[Value]:
                value = self.convert(self.element(source, list(ivs)), element_t)
                return [self.builder.create(combine, [accs[0], value]).result]

            extents = [self.value("max", s, self.constant(0, T.i64)) for s in shape]

            def loop() -> list[Value]:
                return [self.parallel_loop(extents, accumulate, (combine,), (init,)).result]

            (total,) = self.versions(source, shape, loop, [element_t])
            if kind == "mean":
                count = self.constant(1, T.i64)
                for s in shape:
                    count = self.value("mul", count, s)
                total = self.value("div", total, self.convert(self.builder.cast(count, scalar), element_t))
            if not isinstance(result_type, T.ArrayType):
                return total
            ones = [self.constant(1, T.i64)] * result_type.ndim
            out = self.value("array_new", *ones, type=result_type, fill="empty")
            zero = self.constant(0, T.i64)
            self.builder.create("array_store", [out, *([zero] * result_type.ndim), total])
            return out
        out_shape = [s for k, s in enumerate(shape) if k != axis]
        if keepdims:
            out_shape.insert(axis, self.constant(1, T.i64))
        out = self.value("array_new", *out_shape, type=result_type, fill="empty")
        outer = [s for k, s in enumerate(shape) if k != axis]

        def body(ivs: list[Value], accs: list[Value]) -> list[Value]:
            init = self.convert(self._identity(combine, scalar), element_t)

            def inner(k: Value, carried: list[Value]) -> list[Value]:
                index = list(ivs[:axis]) + [k] + list(ivs[axis:])
                value = self.convert(self.element(source, index), element_t)
                return [self.builder.create(combine, [carried[0], value],
                                            nan_ignoring(combine, scalar)).result]

            total = self.serial_loop(shape[axis], [init], inner).result
            if kind == "mean":
                count = self.convert(self.builder.cast(shape[axis], scalar), element_t)
                total = self.value("div", total, count)
            store_index = list(ivs)
            if keepdims:
                store_index.insert(axis, self.constant(0, T.i64))
            self.builder.create("array_store", [out, *store_index, total])
            return []

        extents = [self.value("max", s, self.constant(0, T.i64)) for s in outer]

        def loop_rows() -> list[Value]:
            self.parallel_loop(extents, body)
            return []

        self.versions(source, shape, loop_rows, [])
        return out


def run(function: Function, options: Any = None, packed_products: bool = True) -> None:
    """``packed_products=False``: matrix products become plain loop nests on the CPU too
    (which reverse-mode differentiation of the loops follows; it has no rule for
    ``gemm``)."""
    if not any(op.name in _TENSOR_OPS for op in function.walk()):
        return
    target = getattr(options, "target", "cpu")
    lowerer = TensorLowerer(function, target if packed_products else "loops")
    lowerer.fastmath = getattr(options, "fastmath", True)
    lowerer.visit(function.body)
    for old, new in lowerer.mapping.items():  # debug-mode errors name the user's array
        if old.name_hint and not new.name_hint:
            new.name_hint = old.name_hint
    remap_operands(function.body, lowerer.mapping)

"""Lowering of tensor ops to loop nests, fusing elementwise chains into their consumers.

- ``tensor_assign(dest, expr)`` becomes one parallel loop nest over ``dest``'s shape that
  computes ``expr`` element by element: every elementwise producer used only there (and
  with no write to memory in between) is computed in that loop, with no temporary array.
- ``tensor_reduce`` becomes a parallel loop with a reduction (or, along one axis, a
  parallel loop over the other axes with a serial loop inside), fused the same way.
- An elementwise result used anywhere else (twice, by ``@``, returned, stored in a local
  read after a write) is materialised: a new array and one loop nest to fill it.
- ``@`` becomes a loop nest whose innermost loop runs along contiguous rows.

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
from kdsl.ir.core import Block, Module, Operation, Value, use_counts
from kdsl.ir.effects import has_side_effects, view_source
from kdsl.ir.rewrite import remap_operands

_TENSOR_OPS = ("tensor_map", "tensor_assign", "tensor_reduce", "tensor_matmul")
MATMUL_ROWS = 8  # rows of the result computed together, sharing each row of b
MATMUL_UNROLL = 4  # products accumulated per load and store of the result
_REDUCTION_KINDS = {"sum": "add", "mean": "add", "min": "min", "max": "max"}


def _base(v: Value, definitions: dict[Value, Operation]) -> Value:
    """The array a view was taken of."""
    op = definitions.get(v)
    while op is not None and (source := view_source(op)) is not None:
        v = source
        op = definitions.get(v)
    return v


class TensorLowerer:
    def __init__(self, module: Module) -> None:
        self.module = module
        body = module.kernel.body
        self.definitions = definitions(body)
        self.uses = use_counts(body)
        self.users = users(body)
        self.fused: set[Value] = set()
        self.mapping: dict[Value, Value] = {}
        self.deferred: dict[Value, Operation] = {}  # products waiting for their epilogue
        self.direct = False
        self.builder = IRBuilder(Block())

    # --- driving ---------------------------------------------------------------------

    def visit(self, block: Block) -> None:
        out: list[Operation] = []
        for position, op in enumerate(block.ops):
            for region in op.regions:
                self.visit(region)
            op.operands = [self.resolve(v) for v in op.operands]
            if op.name not in _TENSOR_OPS:
                out.append(op)
                continue
            self.builder = IRBuilder(Block())
            self.builder.location = op.location
            if op.name == "tensor_map":
                if self._fusable(op, block, position):
                    self.fused.add(op.result)
                    out.append(op)  # read by its consumer's loop, then dropped as dead
                    continue
                self.mapping[op.result] = self.materialize(op.result)
            elif op.name == "tensor_assign":
                self.lower_deferred(op.operands[1])
                self.assign(op.operands[0], op.operands[1],
                            accumulate=op.attrs.get("accumulate"))
            elif op.name == "tensor_reduce":
                self.lower_deferred(op.operands[0])
                self.mapping[op.result] = self.reduce(op)
            elif op.operands[1].type.ndim == 2 and self._feeds_elementwise(op, block, position):
                self.deferred[op.result] = op  # lowered with its elementwise epilogue
                out.append(op)
                continue
            else:
                self.mapping[op.result] = self.matmul(op)
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

    def _feeds_elementwise(self, op: Operation, block: Block, position: int) -> bool:
        users = self.users.get(op.result, [])
        return (len(users) == 1 and users[0].name == "tensor_map"
                and self._fusable(op, block, position))

    def lower_deferred(self, value: Value) -> None:
        """Lowers the products an expression reads that wait for an epilogue, before it."""
        for leaf in self.leaves(value):
            if leaf in self.deferred:
                self.mapping[leaf] = self.matmul(self.deferred.pop(leaf))

    def _fusable(self, op: Operation, block: Block, position: int) -> bool:
        users = self.users.get(op.result, [])
        if len(users) != 1 or self.uses.get(op.result, 0) != 1:
            return False
        user = users[0]
        if user.name not in ("tensor_map", "tensor_assign", "tensor_reduce"):
            return False
        if user not in block.ops:
            return False
        between = block.ops[position + 1:block.ops.index(user)]
        return not any(has_side_effects(other) for other in between)

    # --- helpers --------------------------------------------------------------------

    def value(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.builder.value(name, *operands, **attrs)

    def constant(self, value: Any, t: T.ScalarType) -> Value:
        return self.builder.constant(value, t)

    def dims(self, v: Value) -> list[Value]:
        v = self.resolve(v)
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
            result = self.builder.create(fn, args).result
            return self.convert(result, op.result.type.dtype)
        offset = len(index) - v.type.ndim
        if self.direct:
            return self.value("array_load", v, *index[offset:])
        indices = []
        for axis, size in enumerate(self.dims(v)):
            i = index[offset + axis]
            is_one = self.value("eq", size, self.constant(1, T.i64))
            indices.append(self.value("select", is_one, self.constant(0, T.i64), i))
        return self.value("array_load", v, *indices)

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
                       and not self._disjoint_rows(leaf, dest)]
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

    def _disjoint_rows(self, a: Value, b: Value) -> bool:
        """Views of one array at two different constant indices of its first axis
        (``a[0, 1:-1]`` and ``a[1, 1:-1]``) share no element."""
        ops = [self.definitions.get(v) for v in (a, b)]
        if any(op is None or op.name != "array_view" for op in ops):
            return False
        first, second = ops
        assert first is not None and second is not None
        if first.operands[0] is not second.operands[0]:
            return False
        if first.attrs["spec"][0] != ("index",) or second.attrs["spec"][0] != ("index",):
            return False
        indices = [self.definitions.get(op.operands[1]) for op in (first, second)]
        if any(i is None or i.name != "constant" for i in indices):
            return False
        x, y = (i.attrs["value"] for i in indices)  # type: ignore[union-attr]
        return (x >= 0) == (y >= 0) and x != y

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
                return self.matmul_with_epilogue(self.deferred.pop(products[0]), v)
            self.lower_deferred(v)
        t: T.ArrayType = v.type
        shape = self.broadcast_shape(v, t.ndim, "operands could not be broadcast together")
        new = self.value("array_new", *shape, type=T.ArrayType(t.dtype, t.ndim, True), fill="empty")
        self.assign(new, v, check=False)
        return new

    def _identity(self, kind: str, t: T.ScalarType) -> Value:
        t = T.element_scalar(t)
        if kind == "add":
            return self.constant(0, t)
        if t.is_float:
            return self.constant(float("inf") if kind == "min" else float("-inf"), t)
        info = (2 ** (t.bits - 1) - 1, -(2 ** (t.bits - 1))) if t.is_signed else (2**t.bits - 1, 0)
        return self.constant(info[0] if kind == "min" else info[1], t)

    def reduce(self, op: Operation) -> Value:
        source = op.operands[0]
        kind, axis, keepdims = op.attrs["kind"], op.attrs["axis"], op.attrs["keepdims"]
        combine = _REDUCTION_KINDS[kind]
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
                return [self.builder.create(combine, [carried[0], value]).result]

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

    def matmul(self, op: Operation) -> Value:
        a, b = (self.resolve(v) for v in op.operands)
        result_type: T.ArrayType = op.result.type
        scalar = result_type.dtype
        n, inner = self.dims(a)
        b_dims = self.dims(b)
        ok = self.value("eq", inner, b_dims[0])
        self.builder.create("raise_shape_error", [ok, inner, b_dims[0]],
                            {"axis": 0, "what": "matmul: the inner sizes"})
        if b.type.ndim == 1:
            out = self.value("array_new", n, type=result_type, fill="empty")

            def row(ivs: list[Value], accs: list[Value]) -> list[Value]:
                def step(k: Value, carried: list[Value]) -> list[Value]:
                    x = self.convert(self.value("array_load", a, ivs[0], k), scalar)
                    y = self.convert(self.value("array_load", b, k), scalar)
                    return [self.value("add", carried[0], self.value("mul", x, y))]

                zero = self.constant(0, T.element_scalar(scalar))
                total = self.serial_loop(inner, [zero], step).result
                self.builder.create("array_store", [out, ivs[0], total])
                return []

            self.parallel_loop([n], row)
            return out
        m = b_dims[1]
        out = self.value("array_new", n, m, type=result_type, fill="zeros")
        self.matmul_rows(a, b, out, n, inner, m, scalar)
        return out

    def matmul_with_epilogue(self, product: Operation, expression: Value) -> Value:
        """``f(a @ b, ...)`` in one loop nest: each block of rows of the product is finished
        by the elementwise ``f`` while it is still in cache."""
        a, b = (self.resolve(v) for v in product.operands)
        n, inner = self.dims(a)
        b_dims = self.dims(b)
        ok = self.value("eq", inner, b_dims[0])
        self.builder.create("raise_shape_error", [ok, inner, b_dims[0]],
                            {"axis": 0, "what": "matmul: the inner sizes"})
        m = b_dims[1]
        out = self.value("array_new", n, m, type=expression.type, fill="zeros")
        self.mapping[product.result] = out  # the epilogue reads the product from out itself
        self.check_fits(expression, [n, m], "operands could not be broadcast together")

        def epilogue(i: Value, j: Value) -> list[Value]:
            value = self.convert(self.element(expression, [i, j]), expression.type.dtype)
            self.builder.create("array_store", [out, i, j, value])
            return []

        self.matmul_rows(a, b, out, n, inner, m, expression.type.dtype, epilogue)
        return out

    def matmul_rows(self, a: Value, b: Value, out: Value, n: Value, inner: Value, m: Value,
                    scalar: Any, epilogue: Any = None) -> None:
        """``out += a @ b``, parallel over blocks of ``MATMUL_ROWS`` rows: each row of ``b``
        is loaded once per block and used for all its rows (the innermost loop runs along
        contiguous rows of ``b`` and ``out`` and vectorises). ``epilogue(i, j)`` runs on each
        finished block row."""
        rows_per_block = self.constant(MATMUL_ROWS, T.i64)
        one = self.constant(1, T.i64)
        blocks = self.value("floordiv", self.value("add", n, self.value("sub", rows_per_block, one)),
                            rows_per_block)

        def block_rows(ivs: list[Value], accs: list[Value]) -> list[Value]:
            first = self.value("mul", ivs[0], rows_per_block)
            last = self.value("min", self.value("add", first, rows_per_block), n)

            def update(ks: list[Value]) -> None:
                """out[i, :] += sum over ks of a[i, k] * b[k, :], for the block's rows."""
                def over_i(i: Value, c: list[Value]) -> list[Value]:
                    coefficients = [self.convert(self.value("array_load", a, i, k), scalar) for k in ks]

                    def over_j(j: Value, cj: list[Value]) -> list[Value]:
                        total = self.value("array_load", out, i, j)
                        for k, coefficient in zip(ks, coefficients):
                            y = self.convert(self.value("array_load", b, k, j), scalar)
                            total = self.value("add", total, self.value("mul", coefficient, y))
                        self.builder.create("array_store", [out, i, j, total])
                        return []

                    self.serial_loop(m, [], over_j)
                    return []

                self.serial_loop(last, [], over_i, start=first)

            # k in steps of MATMUL_UNROLL: one load and store of out per several products
            unroll = self.constant(MATMUL_UNROLL, T.i64)
            whole = self.value("mul", self.value("floordiv", inner, unroll), unroll)

            def over_k_groups(g: Value, carried: list[Value]) -> list[Value]:
                k0 = self.value("mul", g, unroll)
                update([k0] + [self.value("add", k0, self.constant(d, T.i64))
                               for d in range(1, MATMUL_UNROLL)])
                return []

            self.serial_loop(self.value("floordiv", inner, unroll), [], over_k_groups)

            def over_k(k: Value, carried: list[Value]) -> list[Value]:
                update([k])
                return []

            self.serial_loop(inner, [], over_k, start=whole)
            if epilogue is not None:
                def finish_row(i: Value, c: list[Value]) -> list[Value]:
                    self.serial_loop(m, [], lambda j, cj: epilogue(i, j) or [])
                    return []

                self.serial_loop(last, [], finish_row, start=first)
            return []

        self.parallel_loop([blocks], block_rows)


def run(module: Module, options: Any = None) -> None:
    if not any(op.name in _TENSOR_OPS for op in module.kernel.walk()):
        return
    lowerer = TensorLowerer(module)
    lowerer.visit(module.kernel.body)
    for old, new in lowerer.mapping.items():  # debug-mode errors name the user's array
        if old.name_hint and not new.name_hint:
            new.name_hint = old.name_hint
    remap_operands(module.kernel.body, lowerer.mapping)

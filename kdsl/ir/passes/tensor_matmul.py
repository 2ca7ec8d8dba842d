"""The schedule of whole-array ``@``, part of lowering tensor ops. On the CPU a product
of float matrices of one type becomes the ``gemm`` op (the packed, register-blocked product
of ``codegen.gemm``), followed by its elementwise epilogue (``a @ b + c``) over the result;
otherwise (CUDA, integer or mixed types, matrix-vector products) blocks of rows of the
result share each row of ``b``, products accumulate along contiguous rows, and the
epilogue runs on each finished row."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kdsl import types as T
from kdsl.ir.core import Block, Operation, Value

if TYPE_CHECKING:
    from kdsl.ir.passes.lower_tensors import TensorLowerer

MATMUL_ROWS = 8  # rows of the result computed together, sharing each row of b
MATMUL_UNROLL = 4  # products accumulated per load and store of the result


def lower_matmul(lo: TensorLowerer, op: Operation) -> Value:
    a, b = (lo.resolve(v) for v in op.operands)
    result_type: T.ArrayType = op.result.type
    scalar = result_type.dtype
    n, inner = lo.dims(a)
    b_dims = lo.dims(b)
    ok = lo.value("eq", inner, b_dims[0])
    lo.builder.create("raise_shape_error", [ok, inner, b_dims[0]],
                      {"axis": 0, "what": "matmul: the inner sizes"})
    if b.type.ndim == 1:
        out = lo.value("array_new", n, type=result_type, fill="empty")

        def row(ivs: list[Value], accs: list[Value]) -> list[Value]:
            def step(k: Value, carried: list[Value]) -> list[Value]:
                x = lo.convert(lo.value("array_load", a, ivs[0], k), scalar)
                y = lo.convert(lo.value("array_load", b, k), scalar)
                return [lo.value("add", carried[0], lo.value("mul", x, y))]

            zero = lo.constant(0, T.element_scalar(scalar))
            total = lo.serial_loop(inner, [zero], step).result
            lo.builder.create("array_store", [out, ivs[0], total])
            return []

        lo.parallel_loop([n], row)
        return out
    m = b_dims[1]
    if packed_product(lo, a, b, scalar):
        out = lo.value("array_new", n, m, type=result_type, fill="empty")
        lo.builder.create("gemm", [a, b, out])
        return out
    out = lo.value("array_new", n, m, type=result_type, fill="zeros")
    matmul_rows(lo, a, b, out, n, inner, m, scalar)
    return out



# ops that may stand between ``@`` and the assignment of its result (``out[i] = a @ b``
# views ``out`` after computing the product): they write nothing
_BETWEEN = ("array_view", "array_transpose", "array_dim", "constant")


def assigned_product(lo: TensorLowerer, op: Operation, block: Block, position: int) -> Operation | None:
    """The ``tensor_assign`` right after ``op`` (a ``@``) that is its only use, when the
    packed product can write straight into its destination (``c[...] = a @ b``)."""
    if lo.uses.get(op.result, 0) != 1:
        return None
    later = iter(block.ops[position + 1:])
    assign = next(later, None)
    while assign is not None and assign.name in _BETWEEN:  # the destination's view
        assign = next(later, None)
    if (assign is None or assign.name != "tensor_assign" or assign.attrs.get("accumulate")
            or assign.operands[1] is not op.result):
        return None
    a, b = (lo.resolve(v) for v in op.operands)
    dest = lo.resolve(assign.operands[0])
    scalar = op.result.type.dtype
    if dest.type.ndim != 2 or dest.type.dtype != scalar or not packed_product(lo, a, b, scalar):
        return None
    return assign


def lower_matmul_into(lo: TensorLowerer, op: Operation, assign: Operation) -> None:
    """``dest[...] = a @ b`` with the product written into ``dest`` when the shapes are
    equal (the product itself copes with strides and overlap), else through a new array
    and the assignment's broadcasting."""
    a, b = (lo.resolve(v) for v in op.operands)
    dest = lo.resolve(assign.operands[0])
    n, inner = lo.dims(a)
    b_dims = lo.dims(b)
    ok = lo.value("eq", inner, b_dims[0])
    lo.builder.create("raise_shape_error", [ok, inner, b_dims[0]],
                      {"axis": 0, "what": "matmul: the inner sizes"})
    m = b_dims[1]
    rows, cols = lo.dims(dest)
    same = lo.value("bit_and", lo.value("eq", rows, n), lo.value("eq", cols, m))
    regions = []
    for direct in (True, False):
        region = Block()
        with lo.builder.at(region):
            if direct:
                lo.builder.create("gemm", [a, b, dest])
            else:
                out = lo.value("array_new", n, m, type=op.result.type, fill="empty")
                lo.builder.create("gemm", [a, b, out])
                lo.assign(dest, out)
            lo.builder.create("yield", [])
        regions.append(region)
    lo.builder.create("if", [same], {"types": []}, regions, [])

def packed_product(lo: TensorLowerer, a: Value, b: Value, scalar: Any) -> bool:
    """Whether ``a @ b`` becomes the CPU's packed product (``gemm``): 2-D operands of the
    result's float type. (CUDA keeps the loop nest below.)"""
    return (lo.target == "cpu" and scalar in (T.f32, T.f64)
            and a.type.ndim == 2 and b.type.ndim == 2
            and a.type.dtype == scalar and b.type.dtype == scalar)


def lower_matmul_with_epilogue(lo: TensorLowerer, product: Operation, expression: Value) -> Value:
    """``f(a @ b, ...)`` in one loop nest: each block of rows of the product is finished
    by the elementwise ``f`` while it is still in cache."""
    a, b = (lo.resolve(v) for v in product.operands)
    n, inner = lo.dims(a)
    b_dims = lo.dims(b)
    ok = lo.value("eq", inner, b_dims[0])
    lo.builder.create("raise_shape_error", [ok, inner, b_dims[0]],
                      {"axis": 0, "what": "matmul: the inner sizes"})
    m = b_dims[1]
    scalar = expression.type.dtype
    fill = "empty" if packed_product(lo, a, b, scalar) else "zeros"
    out = lo.value("array_new", n, m, type=expression.type, fill=fill)
    lo.mapping[product.result] = out  # the epilogue reads the product from out itself
    lo.check_fits(expression, [n, m], "operands could not be broadcast together")

    def epilogue(i: Value, j: Value) -> list[Value]:
        value = lo.convert(lo.element(expression, [i, j]), expression.type.dtype)
        lo.builder.create("array_store", [out, i, j, value])
        return []

    if fill == "empty":
        packed_with_epilogue(lo, a, b, out, n, m, expression, epilogue)
        return out
    matmul_rows(lo, a, b, out, n, inner, m, scalar, epilogue)
    return out


def packed_with_epilogue(lo: TensorLowerer, a: Value, b: Value, out: Value, n: Value, m: Value,
                         expression: Value, epilogue: Any) -> None:
    """The packed product (on its threads), then the epilogue in one parallel pass over
    the rows. The epilogue indexes its operands directly (a loop that vectorises) where
    their shapes are the result's trailing axes, and broadcasts them otherwise.

    (Finishing blocks of rows while they are in cache instead, each block a product of
    its own, packs ``b`` once per block: measured slower than this second pass.)"""
    same: Value | None = None
    shape = [n, m]
    for leaf in lo.leaves(expression):
        offset = len(shape) - leaf.type.ndim
        for axis, size in enumerate(lo.dims(leaf)):
            equal = lo.value("eq", size, shape[offset + axis])
            same = equal if same is None else lo.value("bit_and", same, equal)
    lo.builder.create("gemm", [a, b, out])

    def finish_row(ivs: list[Value], accs: list[Value]) -> list[Value]:
        lo.serial_loop(m, [], lambda j, cj: epilogue(ivs[0], j) or [])
        return []

    if same is None:
        lo.parallel_loop([n], finish_row)
        return
    regions = []
    for direct in (True, False):
        block = Block()
        with lo.builder.at(block):
            lo.direct = direct
            lo.parallel_loop([n], finish_row)
            lo.builder.create("yield", [])
        regions.append(block)
    lo.direct = False
    lo.builder.create("if", [same], {"types": []}, regions, [])


def matmul_rows(lo: TensorLowerer, a: Value, b: Value, out: Value, n: Value, inner: Value, m: Value,
                scalar: Any, epilogue: Any = None) -> None:
    """``out += a @ b``, parallel over blocks of ``MATMUL_ROWS`` rows: each row of ``b``
    is loaded once per block and used for all its rows (the innermost loop runs along
                                                        contiguous rows of ``b`` and ``out`` and vectorises). ``epilogue(i, j)`` runs on each
    finished block row."""
    rows_per_block = lo.constant(MATMUL_ROWS, T.i64)
    one = lo.constant(1, T.i64)
    blocks = lo.value("floordiv", lo.value("add", n, lo.value("sub", rows_per_block, one)),
                      rows_per_block)

    def block_rows(ivs: list[Value], accs: list[Value]) -> list[Value]:
        first = lo.value("mul", ivs[0], rows_per_block)
        last = lo.value("min", lo.value("add", first, rows_per_block), n)

        def update(ks: list[Value]) -> None:
            """out[i, :] += sum over ks of a[i, k] * b[k, :], for the block's rows."""
            def over_i(i: Value, c: list[Value]) -> list[Value]:
                coefficients = [lo.convert(lo.value("array_load", a, i, k), scalar) for k in ks]

                def over_j(j: Value, cj: list[Value]) -> list[Value]:
                    total = lo.value("array_load", out, i, j)
                    for k, coefficient in zip(ks, coefficients):
                        y = lo.convert(lo.value("array_load", b, k, j), scalar)
                        total = lo.value("add", total, lo.value("mul", coefficient, y))
                    lo.builder.create("array_store", [out, i, j, total])
                    return []

                lo.serial_loop(m, [], over_j)
                return []

            lo.serial_loop(last, [], over_i, start=first)

        # k in steps of MATMUL_UNROLL: one load and store of out per several products
        unroll = lo.constant(MATMUL_UNROLL, T.i64)
        whole = lo.value("mul", lo.value("floordiv", inner, unroll), unroll)

        def over_k_groups(g: Value, carried: list[Value]) -> list[Value]:
            k0 = lo.value("mul", g, unroll)
            update([k0] + [lo.value("add", k0, lo.constant(d, T.i64))
                           for d in range(1, MATMUL_UNROLL)])
            return []

        lo.serial_loop(lo.value("floordiv", inner, unroll), [], over_k_groups)

        def over_k(k: Value, carried: list[Value]) -> list[Value]:
            update([k])
            return []

        lo.serial_loop(inner, [], over_k, start=whole)
        if epilogue is not None:
            def finish_row(i: Value, c: list[Value]) -> list[Value]:
                lo.serial_loop(m, [], lambda j, cj: epilogue(i, j) or [])
                return []

            lo.serial_loop(last, [], finish_row, start=first)
        return []

    lo.parallel_loop([blocks], block_rows)

"""``a @ b`` of float matrices on the CPU: the packed, register-blocked product (API.md
section 7) against NumPy for many shapes (1, primes, sizes that are not multiples of the
register tile or of the packed block's depth), both float types, transposed and strided
operands (packed as they are, no copies), elementwise epilogues, several threads and
products inside a ``prange``; integer and mixed products keep the plain loop nest."""

import re

import numpy as np
import pytest
from kdsl_cpu_util import assert_same, check, kernel_from_source, with_threads
from kdsl_tensor_util import in_layout

import kdsl as kd
from kdsl.runtime.threads import set_min_parallel_work

SHAPES = [(1, 1, 1), (1, 7, 1), (2, 3, 5), (13, 17, 31), (15, 1, 33), (29, 300, 3),
          (31, 64, 97), (64, 64, 64), (97, 29, 13), (131, 270, 37)]


@kd.kernel
def product(a, b):
    return a @ b


@kd.kernel
def dense_tanh(x, w, bias):
    return kd.tanh(x @ w + bias)


@kd.kernel
def mlp(x, w1, b1, w2):
    return kd.tanh(x @ w1 + b1) @ w2


@kd.kernel
def batched(a, b, out):
    for i in kd.prange(a.shape[0]):
        out[i] = a[i] @ b[i]


@kd.kernel
def batched_transposed_epilogue(a, b, out):
    for i in kd.prange(a.shape[0]):
        out[i, :, :] = kd.tanh(a[i].T @ b[i] * 0.5)


def _data(rng: np.random.Generator, shape: tuple, dtype: type) -> np.ndarray:
    return (rng.standard_normal(shape) + 0.25).astype(dtype)


def _tolerance(dtype: type, k: int) -> dict:
    """Products of k terms of order 1: the rounding of f32 accumulation grows like k."""
    eps = float(np.finfo(dtype).eps)
    return {"rtol": 8 * eps * max(k, 1), "atol": 8 * eps * max(k, 1)}


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.result_type(a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shapes_against_numpy(rng, dtype):
    for m, k, n in SHAPES:
        a, b = _data(rng, (m, k), dtype), _data(rng, (k, n), dtype)
        result = product(a, b)
        assert result.dtype == dtype and result.shape == (m, n)
        assert_same(result, _reference(a, b), **_tolerance(dtype, k), what=f"{m}x{k}x{n}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_products_at_every_edge_of_the_register_block(rng, dtype):
    """Products whose b fits in L2 run unpacked: rows past a block of four or eight, columns past
    one, two or four vector registers (masked), and a b without unit column stride
    (packed instead)."""
    for m in (1, 4, 5, 7, 9, 17):
        for n in (3, 8, 15, 16, 17, 31, 33, 63, 65, 100):
            for k in (1, 9, 40):
                a, b = _data(rng, (m, k), dtype), _data(rng, (k, n), dtype)
                assert_same(product(a, b), _reference(a, b), **_tolerance(dtype, k),
                            what=f"{m}x{k}x{n}")
    a, b = _data(rng, (6, 20), dtype), _data(rng, (20, 34), dtype)[:, ::2]
    assert_same(product(a, b), _reference(a, b), **_tolerance(dtype, 20))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_against_kernel_python_and_on_device(rng, dtype):
    a, b = _data(rng, (19, 23), dtype), _data(rng, (23, 37), dtype)
    check(product, a, b, **_tolerance(dtype, 23))


@pytest.mark.parametrize("layout_a", ["C", "transposed", "strided", "reversed"])
@pytest.mark.parametrize("layout_b", ["C", "transposed", "strided"])
def test_operand_layouts(rng, layout_a, layout_b):
    dtype = np.float32 if layout_a != "strided" else np.float64
    a = in_layout(lambda s: _data(rng, s, dtype), (37, 45), layout_a)
    b = in_layout(lambda s: _data(rng, s, dtype), (45, 41), layout_b)
    assert_same(product(a, b), _reference(a, b), **_tolerance(dtype, 45))


def test_transposed_operands_in_the_kernel(rng):
    src = ("@kd.kernel\ndef k(a, b):\n    return a.T @ b, a @ b.T, a.T @ a\n")
    kernel = kernel_from_source(src, prefix="matmul")
    a, b = _data(rng, (33, 21), np.float32), _data(rng, (33, 21), np.float32)
    at_b, a_bt, at_a = kernel(a, b)
    tol = _tolerance(np.float32, 33)
    assert_same(at_b, _reference(a.T, b), **tol)
    assert_same(a_bt, _reference(a, b.T), **tol)
    assert_same(at_a, _reference(a.T, a), **tol)


def test_matrix_vector_and_vector_matrix(rng):
    a, v, u = _data(rng, (27, 13), np.float64), _data(rng, 13, np.float64), _data(rng, 27, np.float64)
    assert_same(product(a, v), a @ v, rtol=1e-12, atol=1e-12)
    assert_same(product(u, a), u @ a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_on_several_threads(rng, dtype):
    previous = set_min_parallel_work(0)  # every product runs on a team
    try:
        for m, k, n in [(5, 9, 3), (70, 40, 300), (301, 77, 45), (128, 257, 128)]:
            a, b = _data(rng, (m, k), dtype), _data(rng, (k, n), dtype)
            for threads in (2, 3):
                result = with_threads(threads, product, a, b)
                assert_same(result, _reference(a, b), **_tolerance(dtype, k),
                            what=f"{m}x{k}x{n} on {threads} threads")
    finally:
        set_min_parallel_work(previous)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_teams_packed_and_unpacked(rng, dtype):
    """On a team: b read unpacked (blocks of rows claimed by the threads as they go, more
    threads than blocks, a last block of fewer rows), b packed (too large to read
    unpacked; deeper than a packed block; transposed, which is packed whatever its size;
    wider than a packed block of columns for f64; many blocks deep)."""
    previous = set_min_parallel_work(0)
    try:
        cases = [((1001, 64), (64, 33), False), ((12, 5), (5, 40), False),
                 ((330, 1100), (1100, 300), False), ((260, 530), (530, 97), True),
                 ((40, 7), (7, 33), True), ((29, 300), (300, 17), False)]
        if dtype == np.float64:
            cases += [((2100, 3), (3, 2060), True), ((70, 3000), (3000, 64), False)]
        for a_shape, b_shape, transposed in cases:
            a = _data(rng, a_shape, dtype)
            b = _data(rng, b_shape[::-1], dtype).T if transposed else _data(rng, b_shape, dtype)
            for threads in (2, 3):
                assert_same(with_threads(threads, product, a, b), _reference(a, b),
                            **_tolerance(dtype, a_shape[1]),
                            what=f"{a_shape} @ {b_shape} on {threads} threads")
    finally:
        set_min_parallel_work(previous)


def test_large_product_crosses_every_block(rng):
    """Deeper than a packed block (k > 256) and taller than a block of rows; b too large
    to multiply unpacked."""
    a, b = _data(rng, (400, 530), np.float32), _data(rng, (530, 270), np.float32)
    assert_same(product(a, b), _reference(a, b), **_tolerance(np.float32, 530))


def test_empty_inner_size_gives_zeros():
    a, b = np.ones((3, 0)), np.ones((0, 4))
    assert_same(product(a, b), np.zeros((3, 4)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_epilogue(rng, dtype):
    x, w, bias = _data(rng, (45, 30), dtype), _data(rng, (30, 19), dtype) * 0.2, _data(rng, 19, dtype)
    expected = np.tanh(_reference(x, w) + bias)
    assert_same(dense_tanh(x, w, bias), expected, **_tolerance(dtype, 30))


def test_epilogue_over_many_row_blocks_and_broadcast_operands(rng):
    """More rows than one block of the epilogue, on two threads; a bias of one element
    takes the broadcasting version of the epilogue."""
    x, w = _data(rng, (401, 30), np.float32), _data(rng, (30, 35), np.float32) * 0.2
    tol = _tolerance(np.float32, 30)
    for bias in (_data(rng, 35, np.float32), _data(rng, 1, np.float32)):
        expected = np.tanh(_reference(x, w) + bias)
        assert_same(with_threads(2, dense_tanh, x, w, bias), expected, **tol)


def test_mlp_forward(rng):
    x, w1, b1 = _data(rng, (64, 32), np.float32), _data(rng, (32, 48), np.float32) * 0.2, _data(rng, 48, np.float32)
    w2 = _data(rng, (48, 10), np.float32)
    check(mlp, x, w1, b1, w2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_products_in_prange(rng, dtype):
    a, b = _data(rng, (23, 7, 9), dtype), _data(rng, (23, 9, 5), dtype)
    out = np.zeros((23, 7, 5), dtype)
    check(batched, a, b, out, **_tolerance(dtype, 9))
    assert_same(out, _reference(a, b), **_tolerance(dtype, 9))


def test_batched_transposed_with_epilogue(rng):
    a, b = _data(rng, (17, 11, 6), np.float32), _data(rng, (17, 11, 8), np.float32)
    out = np.zeros((17, 6, 8), np.float32)
    with_threads(2, batched_transposed_epilogue, a, b, out)
    expected = np.tanh(_reference(np.swapaxes(a, 1, 2), b) * 0.5)
    assert_same(out, expected, **_tolerance(np.float32, 11))


@kd.kernel
def product_into(a, b, c):
    c[:] = a @ b


def test_assigned_product_writes_into_the_destination(rng):
    a, b = _data(rng, (37, 29), np.float64), _data(rng, (29, 41), np.float64)
    tol = _tolerance(np.float64, 29)
    c = np.zeros((37, 41))
    check(product_into, a, b, c, **tol)
    assert_same(c, _reference(a, b), **tol)
    strided = np.zeros((41, 37)).T  # a column stride of a whole row
    product_into(a, b, strided)
    assert_same(strided, _reference(a, b), **tol)
    broadcast = np.zeros((37, 41))  # a product of one row fills every row
    product_into(a[:1], b, broadcast)
    assert_same(broadcast, np.broadcast_to(_reference(a[:1], b), (37, 41)), **tol)
    with pytest.raises(ValueError, match="37 and 5"):
        product_into(a, b, np.zeros((5, 41)))


def test_assigned_product_overlapping_its_operands(rng):
    """``s[:] = s @ s`` and ``s[:] = t @ s.T``: the whole product is computed before any
    element of the destination is written, as in NumPy."""
    s = _data(rng, (30, 30), np.float64)
    expected = s @ s
    product_into(s, s, s)
    assert_same(s, expected, rtol=1e-12, atol=1e-12)
    t = _data(rng, (30, 30), np.float64)
    expected = t @ s.T
    product_into(t, s.T, s)
    assert_same(s, expected, rtol=1e-12, atol=1e-12)


def test_integer_and_mixed_products_keep_numpy_types(rng):
    ai = rng.integers(-5, 5, (9, 7))
    bi = rng.integers(-5, 5, (7, 4))
    assert_same(product(ai, bi), ai @ bi)
    a32, b64 = _data(rng, (9, 7), np.float32), _data(rng, (7, 4), np.float64)
    assert_same(product(a32, b64), a32 @ b64, rtol=1e-6, atol=1e-6)


def test_ir_and_machine_code():
    from kdsl.runtime import gemm_library

    a = np.ones((4, 4), np.float32)
    assert "gemm %a, %b" in product.ir(a, a)
    text = batched.ir(*(np.ones((2, 4, 4)),) * 3)
    view = re.search(r"(%\d+) = array_view %out", text).group(1)
    assert re.search(rf"gemm %\d+, %\d+, {view}\n", text)  # straight into out[i]
    assert "kdsl.hook.gemm" in product.llvm_ir(a, a)  # the kernel calls the library
    library = gemm_library._llvm_ir()
    assert "llvm.fma.v" in library and "kdsl_gemm_f32" in library and "kdsl_gemm_f64" in library


def test_blocking_is_whole_register_tiles():
    """Packed blocks hold whole register tiles (a block of columns that is not a
    multiple of the tile's width overflowed the packing buffer of b)."""
    from kdsl.codegen.gemm import blocking
    from kdsl.codegen.gemm_small import small_b_bytes

    for avx512 in (True, False):
        for itemsize in (4, 8):
            blk = blocking(itemsize, avx512)
            assert blk.nr % blk.lanes == 0 and blk.mc % blk.mr == 0 and blk.nc % blk.nr == 0
    assert 64 * 1024 <= small_b_bytes() <= 1024 * 1024  # half the L2 cache, or 256 KiB


def test_the_routines_for_hosts_without_avx512_verify():
    """The AVX2 blocking (16 registers of 256 bits) is not run on an AVX-512 host: its
    IR is at least well formed."""
    from llvmlite import ir

    from kdsl.codegen.cpu import llvm
    from kdsl.codegen.gemm import GemmEmitter
    from kdsl.codegen.llvm_types import f32, f64
    from kdsl.codegen.runtime_hooks import RuntimeHooks

    module = ir.Module(name="gemm_avx2")
    hooks = RuntimeHooks.declare(module)
    for scalar in (f32, f64):
        GemmEmitter(module, hooks, scalar, avx512=False)
    llvm().parse_assembly(str(module)).verify()

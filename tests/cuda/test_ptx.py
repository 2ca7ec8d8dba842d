"""PTX generation (runs without a GPU): libNVVM compiles the device code of kernels, and
``ptxas`` assembles it for sm_90. The suite's conftest also does this for every kernel
any test compiles; here are the constructs that are particular to the GPU."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kdsl as kd
from kdsl.codegen import nvvm

try:
    nvvm.nvvm_version()
    HAVE_NVVM = True
except nvvm.NvvmUnavailable:
    HAVE_NVVM = False

pytestmark = pytest.mark.skipif(not HAVE_NVVM, reason="libNVVM or cuda-python not installed")
needs_ptxas = pytest.mark.skipif(nvvm.ptxas() is None, reason="ptxas not installed")

rng = np.random.default_rng(7)
X = rng.random(1000).astype(np.float32) + 0.5
GRID = rng.random((64, 48)).astype(np.float32)


def assembles(ptx: str) -> None:
    if nvvm.ptxas() is not None:
        nvvm.check_with_ptxas(ptx)


def entries(ptx: str) -> list[str]:
    return re.findall(r"\.entry\s+(\w+)", ptx)


@kd.kernel
def saxpy(a: kd.f32, x: kd.Array[kd.f32], y: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        out[i] = a * x[i] + y[i]


def test_parallel_loop_is_a_grid_stride_kernel():
    ptx = saxpy.ptx(np.float32(2), X, X, X.copy())
    assert ptx.count(".entry") == 1
    assert "%ctaid.x" in ptx and "%nctaid.x" in ptx and "%tid.x" in ptx
    assert "fma.rn.f32" in ptx
    assembles(ptx)


def test_architecture_is_chosen_by_argument():
    ptx = saxpy.ptx(np.float32(2), X, X, X.copy(), arch=(8, 0))
    assert ".target sm_80" in ptx
    assert ".target sm_90" in saxpy.ptx(np.float32(2), X, X, X.copy())


@kd.kernel
def moments(x: kd.Array[kd.f64]):
    s = 0.0
    lo = 1e300
    count = 0
    for i in kd.prange(x.shape[0]):
        s += x[i]
        lo = min(lo, x[i])
        if x[i] > 0.9:
            count += 1
    return s, lo, count


def test_reductions_use_warp_shuffles_and_shared_memory():
    ptx = moments.ptx(X.astype(np.float64))
    assert "shfl.sync.bfly.b32" in ptx
    assert "bar.sync" in ptx
    assert ".shared" in ptx
    assert "atom" not in ptx  # one partial per block, combined on the host: no atomics
    assembles(ptx)


@kd.kernel
def scatter(px: kd.Array[kd.f32], w: kd.Array[kd.f32], grid: kd.Array[kd.f32],
            hist: kd.Array[kd.i32], top: kd.Array[kd.f32]):
    n = grid.shape[0]
    for p in kd.prange(px.shape[0]):
        k = int(px[p] * n) % n
        grid[k] += w[p]
        hist[k] += 1
        kd.atomic_max(top, k, w[p])
        kd.atomic_min(hist, 0, k)


def test_atomics():
    ptx = scatter.ptx(X, X, np.zeros(16, np.float32), np.zeros(16, np.int32), np.zeros(16, np.float32))
    assert re.search(r"(red|atom)(\.global)?\.add\.f32", ptx)
    assert re.search(r"(red|atom)(\.global)?\.add(\.u32|\.s32)", ptx)
    assert re.search(r"atom(\.global)?\.cas\.b32", ptx)  # float max: compare and swap
    assert re.search(r"(red|atom)(\.global)?\.min\.s32", ptx)
    assembles(ptx)


@kd.kernel
def small_int_atomic(h: kd.Array[kd.i8]):
    for _ in kd.prange(h.shape[0]):
        h[0] += 1


def test_narrow_integer_atomics_are_a_clear_error():
    with pytest.raises(kd.CompileError, match="i8"):
        small_int_atomic.ptx(np.zeros(4, np.int8))


@kd.kernel
def math_kernel(x: kd.Array[kd.f32], out: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        v = x[i]
        out[i] = kd.sin(v) + kd.exp(kd.f64(v)) + kd.tanh(v) + kd.atan2(v, 2.0) + v ** 1.5 + kd.floor(v)


def test_math_is_linked_from_libdevice():
    ptx = math_kernel.ptx(X, np.zeros(1000))
    assert "__nv_" not in ptx  # libdevice linked in and inlined
    assert ".extern" not in ptx
    assembles(ptx)


@kd.kernel
def saturating(x: kd.Array[kd.f64], out: kd.Array[kd.i32]):
    for i in kd.prange(x.shape[0]):
        out[i] = kd.i32(x[i])


def test_float_to_int_casts_assemble():
    assembles(saturating.ptx(X.astype(np.float64), np.zeros(1000, np.int32)))


@kd.kernel
def talk(x: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        if i == 0:
            print("first", x[i], i, x[i] > 0.0)


def test_print_is_vprintf():
    ptx = talk.ptx(X)
    assert "vprintf" in ptx
    assert "first %g %lld %s" in talk.nvvm_ir(X)
    assembles(ptx)


@kd.kernel
def talk_formatted(x: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        if i == 0:
            print(f"x[{i}]={x[i]};", "done")


def test_f_strings_print_without_spaces_between_their_pieces():
    assert "x[%lld]=%g; done" in talk_formatted.nvvm_ir(X)
    assembles(talk_formatted.ptx(X))


@kd.kernel(debug=True)
def checked(x: kd.Array[kd.f32], k: int):
    for i in kd.prange(x.shape[0]):
        x[i + k] = 1.0


def test_debug_bounds_checks_report_through_the_status_slots():
    ptx = checked.ptx(X.copy(), 1)
    assert re.search(r"atom(\.global)?\.cas\.b64", ptx)  # the first error wins
    assembles(ptx)


@kd.kernel
def time_loop(a: kd.Array[kd.f32, 2], b: kd.Array[kd.f32, 2], steps: int):
    for _ in range(steps):
        for i, j in kd.ndrange(a.shape[0] - 2, a.shape[1] - 2):
            b[i + 1, j + 1] = 0.25 * (a[i, j + 1] + a[i + 2, j + 1] + a[i + 1, j] + a[i + 1, j + 2])
        a, b = b, a
        if a[1, 1] > 100.0:
            break
    return a[0, 0]


def test_serial_code_with_memory_becomes_kernels_of_one_thread():
    ptx = time_loop.ptx(GRID, GRID.copy(), 3)
    names = entries(ptx)
    assert any("parallel" in n for n in names)
    assert sum("serial" in n for n in names) >= 2  # the check of a[1, 1], and the read of a[0, 0]
    assert "%ctaid.y" in ptx  # outer axis on blockIdx.y
    assembles(ptx)


@kd.kernel
def temporaries(x: kd.Array[kd.f32, 2]):
    y = kd.exp(x - kd.max(x, axis=1, keepdims=True))
    return y / kd.sum(y, axis=1, keepdims=True)


def test_tensor_expressions():
    assembles(temporaries.ptx(GRID))


@kd.kernel
def local_arrays(x: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        tmp = kd.zeros(4, kd.f32)
        for k in range(4):
            tmp[k] = x[i] * k
        x[i] = tmp[3]


def test_arrays_made_in_device_code_use_the_device_heap():
    ptx = local_arrays.ptx(X.copy())
    assert "malloc" in ptx
    assembles(ptx)


def test_nvvm_ir_is_the_llvm7_dialect():
    text = moments.nvvm_ir(X.astype(np.float64))
    assert "!nvvmir.version" in text
    assert "nvptx64-nvidia-cuda" in text
    for newer in ("fneg ", "freeze ", "atomicrmw fadd", "llvm.smax", "llvm.sin.", "ptr addrspace"):
        assert newer not in text

"""The CUDA block scan (kdsl/codegen/device_scan.py: warp shuffles, shared memory across
warps, two levels across blocks) on the emulated device, against NumPy; and the
emulator's shuffles against PTX's rules."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import kdsl as kd
from kdsl import types as T
from kdsl.codegen import nvvm
from kdsl.primitives import kernels


def exclusive_cumsum(a: np.ndarray) -> np.ndarray:
    sums = np.cumsum(a)
    return np.concatenate([np.zeros(1, sums.dtype), sums[:-1]]) if a.size else sums


# 256 threads a block: one chunk, a partial warp, several blocks, several chunks a block
SIZES = [0, 1, 31, 33, 256, 257, 1000, 256 * 1024 + 300]
DTYPES = [np.int32, np.int64, np.uint32, np.float32, np.float64, np.int8, np.bool_]


def integer_valued(rng: np.random.Generator, n: int, dtype: type) -> np.ndarray:
    """Random values whose sums are exact in every dtype (floats hold integers)."""
    if dtype is np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    low = 0 if np.dtype(dtype).kind == "u" else -60
    return rng.integers(low, 60, n).astype(dtype)


@pytest.mark.parametrize("n", SIZES)
def test_cumsum_of_cuda_arrays_is_numpys(emulated_device, n):
    rng = np.random.default_rng(n)
    for dtype in DTYPES if n < 5000 else [np.int32]:
        a = integer_valued(rng, n, dtype)
        d = kd.array(a, device="cuda")
        inclusive, exclusive = kd.cumsum(d).numpy(), kd.cumsum(d, exclusive=True).numpy()
        assert inclusive.dtype == np.cumsum(a).dtype
        np.testing.assert_array_equal(inclusive, np.cumsum(a), err_msg=str(dtype))
        np.testing.assert_array_equal(exclusive, exclusive_cumsum(a), err_msg=str(dtype))


def test_adversarial_values(emulated_device):
    n = 3000
    equal = np.full(n, 7, np.int64)
    np.testing.assert_array_equal(kd.cumsum(kd.array(equal, device="cuda")).numpy(),
                                  np.cumsum(equal))
    wraps = np.full(n, 2**62, np.int64)  # overflows wrap around, as NumPy's
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(kd.cumsum(kd.array(wraps, device="cuda")).numpy(),
                                      np.cumsum(wraps))
    special = np.random.default_rng(5).standard_normal(n)
    special[[10, 700]] = np.inf
    special[2000] = np.nan
    got = kd.cumsum(kd.array(special, device="cuda")).numpy()
    np.testing.assert_allclose(got, np.cumsum(special), rtol=1e-9, atol=1e-9)
    assert np.isnan(got[2000:]).all() and np.isinf(got[700:2000]).all()


def test_float_sums_match_within_rounding(emulated_device):
    a = np.random.default_rng(2).standard_normal(5000).astype(np.float32)
    got = kd.cumsum(kd.array(a, device="cuda")).numpy()
    np.testing.assert_allclose(got, np.cumsum(a.astype(np.float64)), rtol=1e-4, atol=1e-3)


@kd.kernel
def scans_in_a_kernel(a: kd.Array[kd.f64], rows: kd.Array[kd.i32, 2], out: kd.Array[kd.f64],
                      per_row: kd.Array[kd.i64, 2]):
    every_other = kd.cumsum(a[::2], exclusive=True)  # a strided view: the block scan
    for i in kd.prange(every_other.shape[0]):
        out[i] = every_other[i] * 2.0
    for r in kd.prange(rows.shape[0]):  # inside a parallel loop: each thread's own scan
        s = kd.cumsum(rows[r])
        for j in range(rows.shape[1]):
            per_row[r, j] = s[j]


def test_kernel_scans_outside_and_inside_parallel_loops(emulated_device):
    rng = np.random.default_rng(3)
    a = rng.integers(-9, 9, 1001).astype(np.float64)
    rows = rng.integers(-5, 5, (7, 9)).astype(np.int32)
    out, per_row = np.zeros(501), np.zeros((7, 9), np.int64)
    args = [kd.array(x, device="cuda") for x in (a, rows, out, per_row)]
    scans_in_a_kernel(*args)
    np.testing.assert_array_equal(args[2].numpy(), exclusive_cumsum(a[::2]) * 2)
    np.testing.assert_array_equal(args[3].numpy(), np.cumsum(rows, axis=1))
    scans_in_a_kernel(a, rows, out, per_row)  # the CPU gives the same
    np.testing.assert_array_equal(out, args[2].numpy())


# --- PTX ---------------------------------------------------------------------------------

try:
    nvvm.nvvm_version()
    HAVE_NVVM = True
except nvvm.NvvmUnavailable:
    HAVE_NVVM = False


@pytest.mark.skipif(not HAVE_NVVM, reason="libNVVM or cuda-python not installed")
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32,
                                   np.int64, np.uint64, np.float32, np.float64])
@pytest.mark.parametrize("exclusive", [False, True])
def test_every_scan_variant_assembles(dtype, exclusive):
    result = T.scalar_from_numpy(np.cumsum(np.zeros(1, dtype)).dtype)
    a = np.zeros(4, dtype)
    ptx = kernels.scan_kernel(result, exclusive).ptx(a, np.zeros(4, np.cumsum(a).dtype))
    assert "shfl.sync.up.b32" in ptx and "shfl.sync.bfly.b32" in ptx and "bar.sync" in ptx
    assert len(re.findall(r"\.entry\s+\w+_scan_\d+\(", ptx)) >= 1
    if nvvm.ptxas() is not None:
        nvvm.check_with_ptxas(ptx)


# --- the emulator's shuffles ----------------------------------------------------------------

_MODES = ("up", "down", "bfly", "idx")
# (mode, b, c, member mask): c's low bits are the clamp, bits 8-12 the segment mask
_CASES = [
    ("up", 1, 0, -1), ("up", 5, 0, -1), ("up", 3, 0x1800, -1),  # width 8 segments
    ("down", 2, 31, -1), ("down", 3, 0x1807, -1),
    ("bfly", 1, 31, -1), ("bfly", 16, 31, -1), ("bfly", 4, 0x1c03, -1),
    ("idx", 7, 31, -1), ("idx", 2, 0x181f, -1), ("idx", 0, 31, 0x0000FFFE),
]
UNDEFINED = -559038737  # 0xdeadbeef: the emulator's value for a lane outside the mask


def ptx_shuffle(values: np.ndarray, mode: str, b: int, c: int, mask: int) -> np.ndarray:
    """PTX ISA's shfl.sync, lane by lane (values: one per thread, whole warps)."""
    out = np.empty_like(values)
    for t in range(values.size):
        lane, warp = t & 31, t & ~31
        bval, cval, segmask = b & 31, c & 31, (c >> 8) & 31
        max_lane = (lane & segmask) | (cval & ~segmask & 31)
        min_lane = lane & segmask
        j, ok = {
            "up": (lane - bval, lane - bval >= max_lane),
            "down": (lane + bval, lane + bval <= max_lane),
            "bfly": (lane ^ bval, lane ^ bval <= max_lane),
            "idx": (min_lane | (bval & ~segmask & 31), (min_lane | (bval & ~segmask & 31)) <= max_lane),
        }[mode]
        source = j if ok else lane
        out[t] = values[warp + source] if (mask >> source) & 1 else UNDEFINED
    return out


def _shuffle_module() -> str:
    body = ['define void @"shuffles"(i32* %out)', "{", "entry:",
            '  %t = call i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()',
            "  %v = mul i32 %t, 3", "  %value = add i32 %v, 100"]
    for k, (mode, b, c, mask) in enumerate(_CASES):
        body += [f'  %r{k} = call i32 @"llvm.nvvm.shfl.sync.{mode}.i32"(i32 {mask}, i32 %value, '
                 f"i32 {b}, i32 {c})",
                 f"  %slot{k}.i = add i32 %t, {k * 64}",
                 f"  %slot{k} = getelementptr i32, i32* %out, i32 %slot{k}.i",
                 f"  store i32 %r{k}, i32* %slot{k}"]
    body += ["  ret void", "}"]
    declares = [f'declare i32 @"llvm.nvvm.shfl.sync.{m}.i32"(i32, i32, i32, i32)' for m in _MODES]
    return "\n".join([
        *declares, 'declare i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()', "", *body, "",
        '!nvvm.annotations = !{!0}', '!0 = !{void (i32*)* @"shuffles", !"kernel", i32 1}',
        '!nvvmir.version = !{!1}', "!1 = !{i32 2, i32 0}", ""])


def test_emulated_shuffles_follow_ptx(emulated_device):
    driver = emulated_device
    module = driver.load_module(_shuffle_module())
    function = driver.get_function(module, "shuffles")
    out = np.zeros(64 * len(_CASES), np.int32)
    pointer = ctypes.c_void_p(out.ctypes.data)
    params = (ctypes.c_void_p * 1)(ctypes.addressof(pointer))
    assert driver._on_launch(function, 1, 1, 1, 64, 1, 1, 0, 0, params, None) == 0
    values = np.arange(64, dtype=np.int32) * 3 + 100
    for k, (mode, b, c, mask) in enumerate(_CASES):
        np.testing.assert_array_equal(out[k * 64:(k + 1) * 64], ptx_shuffle(values, mode, b, c, mask),
                                      err_msg=f"shfl.sync.{mode} b={b} c={c:#x} mask={mask:#x}")


@kd.kernel
def scans_under_control_flow(a: kd.Array[kd.i32], flag: kd.bool_, out: kd.Array[kd.i64]):
    for r in range(3):  # a serial loop on the host, launching the scan each time
        if flag:
            c = kd.cumsum(a)
            for i in kd.prange(c.shape[0]):
                out[i] += c[i] * (r + 1)


def test_scans_in_host_loops_and_branches(emulated_device):
    a = np.random.default_rng(8).integers(-50, 50, 700).astype(np.int32)
    for flag in (True, False):
        d_out = kd.array(np.zeros(700, np.int64), device="cuda")
        scans_under_control_flow(kd.array(a, device="cuda"), flag, d_out)
        np.testing.assert_array_equal(d_out.numpy(), np.cumsum(a) * 6 if flag else 0)

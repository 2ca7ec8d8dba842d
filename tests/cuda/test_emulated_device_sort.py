"""The CUDA radix sort (kdsl/primitives/device_sort_source.py: tiles of one thread each,
offsets from the device's block scan) on the emulated device: sort, argsort, sort_by_key
and the neighbour grid's build, against NumPy and brute force."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kdsl as kd

# insertion-sorted (up to 32), one tile, several tiles of the smallest size
SIZES = [0, 1, 32, 33, 1000, 3000]


def keys_of(dtype: type, n: int, rng: np.random.Generator) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        a = (rng.standard_normal(n) * 100).astype(dtype)
        a[::7] = np.nan
        a[1::11] = -0.0
        a[2::11] = 0.0
        a[3::13] = -np.inf
        return a
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -(2**40)), min(info.max, 2**40), n, dtype=dtype)


@pytest.mark.parametrize("n", SIZES)
def test_sort_and_argsort_are_numpys(emulated_device, n):
    rng = np.random.default_rng(n)
    for dtype in (np.int32, np.float32, np.int64, np.float64, np.uint8):
        a = keys_of(dtype, n, rng)
        d = kd.array(a, device="cuda")
        np.testing.assert_array_equal(kd.argsort(d).numpy(), np.argsort(a, kind="stable"),
                                      err_msg=str(dtype))
        kd.sort(d)
        np.testing.assert_array_equal(d.numpy(), np.sort(a), err_msg=str(dtype))
        if np.dtype(dtype).kind == "f":  # equal to NumPy's; kd.sort puts -0.0 before 0.0
            signs = np.signbit(d.numpy()[d.numpy() == 0])
            np.testing.assert_array_equal(signs, np.sort(signs)[::-1])


@pytest.mark.parametrize("case", ["equal", "sorted", "reversed", "wide"])
def test_adversarial_keys(emulated_device, case):
    n = 2000
    keys = {"equal": np.full(n, 5, np.int32),
            "sorted": np.arange(n, dtype=np.int32) * 3,
            "reversed": np.arange(n, dtype=np.int32)[::-1].copy(),
            "wide": np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max] * (n // 2),
                             np.int32)}[case]
    values = np.arange(n, dtype=np.float64) + 0.5
    d_keys, d_values = kd.array(keys, device="cuda"), kd.array(values, device="cuda")
    kd.sort_by_key(d_keys, d_values)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(d_keys.numpy(), keys[order])
    np.testing.assert_array_equal(d_values.numpy(), values[order])


@kd.kernel
def sort_in_kernel(keys: kd.Array[kd.f32], values: kd.Array[kd.i32], order: kd.Array[kd.i64]):
    kd.argsort(keys, order)
    kd.sort_by_key(keys, values)


def test_sorts_in_a_kernel_use_the_block_scan(emulated_device):
    rng = np.random.default_rng(4)
    keys = keys_of(np.float32, 1500, rng)
    values = rng.integers(0, 1000, keys.size).astype(np.int32)
    d = [kd.array(x, device="cuda") for x in (keys, values, np.zeros(keys.size, np.int64))]
    sort_in_kernel(*d)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(d[2].numpy(), order)
    np.testing.assert_array_equal(d[0].numpy(), keys[order])
    np.testing.assert_array_equal(d[1].numpy(), values[order])
    ptx = sort_in_kernel.ptx(*d)
    assert "shfl.sync.up.b32" in ptx and len(re.findall(r"\.entry\s+\w+_scan_\d+\(", ptx)) >= 1


@kd.kernel
def neighbours(x: kd.Array[kd.vec3], cell: kd.f32, radius: kd.f32, lower: kd.vec3,
               upper: kd.vec3, counts: kd.Array[kd.i64], index_sums: kd.Array[kd.i64]):
    grid = kd.NeighborGrid(x, cell, lower, upper, periodic=True)
    for i in kd.prange(x.shape[0]):
        c = 0
        for j in grid.neighbors(x[i], radius):
            c += 1
            index_sums[i] += j
        counts[i] = c


def test_neighbor_grid_built_on_the_device(emulated_device):
    rng = np.random.default_rng(9)
    box = np.float32(2.0)
    x = (rng.random((700, 3)) * box).astype(np.float32)
    lower, upper = np.zeros(3, np.float32), np.full(3, box, np.float32)
    counts, sums = np.zeros(700, np.int64), np.zeros(700, np.int64)
    d = [kd.array(v, device="cuda") for v in (x, counts, sums)]
    neighbours(d[0], np.float32(0.3), np.float32(0.25), lower, upper, d[1], d[2])
    diff = x[:, None, :] - x[None, :, :]
    diff = diff - box * np.floor(diff / box + np.float32(0.5))
    near = (diff * diff).sum(-1) <= np.float32(0.25) ** 2
    np.testing.assert_array_equal(d[1].numpy(), near.sum(1))
    np.testing.assert_array_equal(d[2].numpy(), (near * np.arange(700)).sum(1))
    assert d[1].numpy().min() >= 1 and d[1].numpy().max() > 1  # itself, and neighbours


def test_segment_sums_on_the_device(emulated_device):
    rng = np.random.default_rng(11)
    keys = np.sort(rng.integers(0, 40, 2500)).astype(np.int64)
    values = rng.integers(-9, 9, keys.size).astype(np.int32)
    unique, sums = kd.segment_sum(kd.array(keys, device="cuda"), kd.array(values, device="cuda"))
    expected, starts = np.unique(keys, return_index=True)
    np.testing.assert_array_equal(unique.numpy(), expected)
    np.testing.assert_array_equal(sums.numpy(), np.add.reduceat(values.astype(np.int64), starts))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64, np.float32, np.float64])
def test_every_device_sort_variant_assembles(dtype):
    from kdsl import types as T
    from kdsl.codegen import nvvm
    from kdsl.primitives import kernels

    try:
        nvvm.nvvm_version()
    except nvvm.NvvmUnavailable:
        pytest.skip("libNVVM or cuda-python not installed")
    t = T.scalar_from_numpy(np.dtype(dtype))
    keys = np.zeros(4, dtype)
    ptxs = [kernels.sort_kernel(t).ptx(keys), kernels.argsort_kernel(t).ptx(keys, np.zeros(4, np.int64)),
            kernels.sort_by_key_kernel(t, T.f32).ptx(keys, np.zeros(4, np.float32))]
    for ptx in ptxs:
        assert "shfl.sync.up.b32" in ptx
        if nvvm.ptxas() is not None:
            nvvm.check_with_ptxas(ptx)

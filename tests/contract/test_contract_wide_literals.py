"""Integer literals between 2**63 and 2**64 (the constants of 64-bit hashes and random
number generators, as in Numba and Warp code) are Python ints NumPy 2 takes as uint64:
they combine with u64 values, compare exactly with every integer type, and are an
OverflowError (a located CompileError) where the other operand cannot hold them."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source

import kdsl as kd

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


@kd.kernel
def fmix64(x: kd.Array[kd.u64], out: kd.Array[kd.u64]):
    for i in kd.prange(x.shape[0]):
        h = x[i]
        h ^= h >> 33
        h *= 0xFF51AFD7ED558CCD
        h ^= h >> 33
        h *= 0xC4CEB9FE1A85EC53
        h ^= h >> 33
        out[i] = h


@kd.kernel
def fnv1a(data: kd.Array[kd.u8, 2], out: kd.Array[kd.u64]):
    for i in kd.prange(data.shape[0]):
        h = np.uint64(FNV_OFFSET)
        for j in range(data.shape[1]):
            h ^= data[i, j]
            h *= FNV_PRIME
        out[i] = h


def fnv1a_reference(row: np.ndarray) -> int:
    h = FNV_OFFSET
    for byte in row:
        h = ((h ^ int(byte)) * FNV_PRIME) % 2**64
    return h


def test_64_bit_hashes_as_numpy(rng):
    x = rng.integers(0, 2**64, size=40, dtype=np.uint64)
    out = np.zeros_like(x)
    check(fmix64, x, out)
    assert len(np.unique(out)) == len(np.unique(x)) and out.dtype == np.uint64
    data = rng.integers(0, 256, size=(12, 9)).astype(np.uint8)
    hashes = np.zeros(12, dtype=np.uint64)
    check(fnv1a, data, hashes)
    assert [int(v) for v in hashes] == [fnv1a_reference(row) for row in data]


@kd.kernel
def compare_with_wide_literals(a: kd.Array[kd.i32], b: kd.Array[kd.u32], c: kd.Array[kd.u64]):
    return (a[0] < 2**63, 0xFFFFFFFFFFFFFFFF > a[0], a[0] == 2**63, 2**63 <= a[0],
            b[0] < 0xFF51AFD7ED558CCD, b[0] != 2**63, c[0] < 0xFF51AFD7ED558CCD,
            c[0] >= 2**63, c[0] == 0xFFFFFFFFFFFFFFFF)


@pytest.mark.parametrize("c", [0, 2**63 - 1, 2**63, 0xFF51AFD7ED558CCD, 2**64 - 1])
def test_comparisons_with_wide_literals_are_exact(c):
    a = np.array([-5], dtype=np.int32)
    b = np.array([7], dtype=np.uint32)
    result = check(compare_with_wide_literals, a, b, np.array([c], dtype=np.uint64))
    assert result[:6] == (True, True, False, False, True, True)
    assert result[6:] == (c < 0xFF51AFD7ED558CCD, c >= 2**63, c == 2**64 - 1)


@pytest.mark.parametrize("expression", ["x[0] + 0xFF51AFD7ED558CCD", "x[0] * 2**63"])
def test_a_wide_literal_with_a_signed_operand_is_an_overflow_error(expression):
    kernel = kernel_from_source(f"@kd.kernel\ndef k(x):\n    return {expression}\n")
    with pytest.raises(kd.CompileError, match="out of bounds for int64") as info:
        kernel(np.array([3]))
    assert expression in str(info.value)
    with pytest.raises(OverflowError):
        kernel.python(np.array([3]))


def test_a_literal_beyond_64_bits_is_a_located_error():
    kernel = kernel_from_source("@kd.kernel\ndef k(x):\n    return x[0] + -0xFF51AFD7ED558CCD\n")
    with pytest.raises(kd.CompileError, match="does not fit in 64 bits"):
        kernel(np.array([3], dtype=np.uint64))

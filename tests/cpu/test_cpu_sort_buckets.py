"""The sort by buckets sorted in cache (kd.sort of large arrays) against np.sort, on
inputs that take each way of sorting a bucket: counting sort of a narrow range, LSD radix,
a serial split of a bucket too large for the cache, insertion of a few keys. The kernel
is called directly, on arrays smaller than those kd.sort gives it."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd
from kdsl import types as T
from kdsl.primitives import bucket_sort_source as buckets
from kdsl.primitives import kernels

DTYPES = [np.int32, np.float32, np.int64, np.uint32]


def _same_sort(keys: np.ndarray) -> None:
    mine = keys.copy()
    kernels.bucket_sort_kernel(T.scalar_from_numpy(keys.dtype))(mine)
    expected = np.sort(keys)
    np.testing.assert_array_equal(mine, expected)
    if keys.dtype.kind == "f":
        # the same values, signed zeros included: -0.0 sorts before 0.0
        zeros = mine == 0
        signs = np.signbit(mine[zeros])
        assert np.array_equal(signs, np.sort(signs)[::-1])
        assert signs.sum() == np.signbit(keys[keys == 0]).sum()


def _values(rng: np.random.Generator, dtype: type, n: int, scale: float) -> np.ndarray:
    if np.dtype(dtype).kind == "u":
        return rng.integers(0, min(scale, np.iinfo(dtype).max), n).astype(dtype)
    values = rng.standard_normal(n) * scale
    if np.dtype(dtype).kind == "i":
        values = values.clip(np.iinfo(dtype).min, np.iinfo(dtype).max)
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_way_of_sorting_a_bucket(rng, dtype):
    n = 3 * buckets.TARGET + 17
    _same_sort(_values(rng, dtype, n, 1e3))  # narrow: counting sort
    _same_sort(_values(rng, dtype, n, 1e9))  # wide: LSD radix
    # most keys in one fine bin far from the rest: a bucket split serially
    keys = _values(rng, dtype, 2 * buckets.CACHE + 5, 1e6)
    keys[::97] = np.iinfo(dtype).max if np.dtype(dtype).kind in "iu" else 1e30
    _same_sort(keys)


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("n", [buckets.SMALL - 1, buckets.SMALL, buckets.SMALL + 1,
                               buckets.TARGET - 1, buckets.TARGET + 1, buckets.CACHE + 1])
def test_sizes_around_the_thresholds(rng, dtype, n):
    _same_sort(_values(rng, dtype, n, 1e6))
    _same_sort(np.sort(_values(rng, dtype, n, 1e6))[::-1].copy())


@pytest.mark.parametrize("dtype", [np.float32])
def test_nans_infinities_and_signed_zeros(rng, dtype):
    n = 2 * buckets.TARGET + 3
    keys = _values(rng, dtype, n, 1e2)
    keys[::5] = np.nan
    keys[1::7] = -np.nan
    keys[2::11] = -0.0
    keys[3::13] = 0.0
    keys[4::17] = np.inf
    keys[5::19] = -np.inf
    _same_sort(keys)
    nan_only = np.full(100, np.nan, dtype)
    nan_only[::2] = -np.nan
    mine = nan_only.copy()
    kernels.bucket_sort_kernel(T.f32)(mine)
    assert np.isnan(mine).all()


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_adversarial_orders(rng, dtype):
    n = 2 * buckets.TARGET + 3
    keys = _values(rng, dtype, n, 1e6)
    for case in (np.sort(keys), np.sort(keys)[::-1].copy(), np.full(n, keys[0]),
                 rng.integers(0, 3, n).astype(dtype), np.concatenate([np.sort(keys[:n // 2]),
                                                                       keys[n // 2:]])):
        _same_sort(case)


def test_extremes_of_the_integer_types(rng):
    for dtype in (np.int32, np.int64, np.uint32):
        info = np.iinfo(dtype)
        keys = rng.integers(info.min, info.max, 70_000, endpoint=True, dtype=dtype)
        keys[::3] = info.min
        keys[1::5] = info.max
        _same_sort(keys)


def test_kd_sort_takes_rows_of_at_least_min_bytes_by_buckets(rng, monkeypatch):
    monkeypatch.setattr(buckets, "MIN_BYTES", 4 * 1000)
    rows = rng.standard_normal((3, 1000)).astype(np.float32)
    rows[1, ::3] = np.nan
    expected = np.sort(rows, axis=-1)
    before = kernels.bucket_sort_kernel.cache_info().misses + \
        kernels.bucket_sort_kernel.cache_info().hits
    kd.sort(rows)
    after = kernels.bucket_sort_kernel.cache_info().misses + \
        kernels.bucket_sort_kernel.cache_info().hits
    np.testing.assert_array_equal(rows, expected)
    assert after == before + 1
    wide = rng.standard_normal((2, 4000)).astype(np.float32)
    view = wide[:, ::2]  # strided rows of 2000 keys
    expected_view, untouched = np.sort(view, axis=-1), wide[:, 1::2].copy()
    kd.sort(view)
    np.testing.assert_array_equal(wide[:, ::2], expected_view)
    np.testing.assert_array_equal(wide[:, 1::2], untouched)
    after = kernels.bucket_sort_kernel.cache_info().misses + \
        kernels.bucket_sort_kernel.cache_info().hits
    ints = rng.integers(-5, 5, 999).astype(np.int32)  # under the limit: LSD radix
    expected_ints = np.sort(ints)
    kd.sort(ints)
    np.testing.assert_array_equal(ints, expected_ints)
    assert kernels.bucket_sort_kernel.cache_info().misses + \
        kernels.bucket_sort_kernel.cache_info().hits == after


def test_2_to_the_23_float32_keys(rng):
    keys = (rng.standard_normal(1 << 23) * 1e6).astype(np.float32)
    keys[::1001] = np.nan
    expected = np.sort(keys)
    kd.sort(keys)
    np.testing.assert_array_equal(keys, expected)

"""kd.cumsum, kd.sort, kd.argsort, kd.sort_by_key, kd.searchsorted and kd.segment_sum
called from Python, against NumPy on random and adversarial inputs."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd

KEY_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.int16]


def _keys(rng: np.random.Generator, kind: str, n: int, dtype: type) -> np.ndarray:
    """Keys of one adversarial kind: random, all equal, sorted, reversed, with NaNs and
    signed zeros (floats) or the type's extremes (integers), few distinct values."""
    if np.issubdtype(dtype, np.floating):
        base = rng.standard_normal(n) * 1e3
    else:
        info = np.iinfo(dtype)
        base = rng.integers(info.min, info.max, n, endpoint=True)
    a = base.astype(dtype)
    if kind == "equal":
        a[:] = a[0] if n else 0
    elif kind == "sorted":
        a.sort()
    elif kind == "reversed":
        a = np.sort(a)[::-1].copy()
    elif kind == "special":
        if np.issubdtype(dtype, np.floating):
            specials = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]
            picks = rng.integers(0, len(specials), n)
            mask = rng.random(n) < 0.5
            a[mask] = np.array(specials, dtype)[picks[mask]]
        else:
            info = np.iinfo(dtype)
            a[::3] = info.min
            a[1::5] = info.max
            a[2::7] = 0
    elif kind == "few":
        a = rng.integers(0, 4, n).astype(dtype)
    return a


KINDS = ["random", "equal", "sorted", "reversed", "special", "few"]
SIZES = [0, 1, 2, 7, 1000, 200_003]


@pytest.mark.parametrize("dtype", KEY_DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_sort_and_argsort_match_numpy(rng, dtype, kind):
    for n in SIZES:
        keys = _keys(rng, kind, n, dtype)
        expected_order = np.argsort(keys, kind="stable")
        np.testing.assert_array_equal(kd.argsort(keys), expected_order)
        sorted_keys = keys.copy()
        assert kd.sort(sorted_keys) is None
        np.testing.assert_array_equal(sorted_keys, np.sort(keys))


@pytest.mark.parametrize("dtype", [np.int32, np.uint64, np.float32])
def test_sort_of_keys_in_a_narrow_range_far_from_zero(rng, dtype):
    """The passes sort the keys less the smallest: ranges at either end of the type, one
    across zero, and sizes about the insertion sort's limit."""
    if np.issubdtype(dtype, np.floating):
        starts = [-3e38, -1.0, 1e30]
    else:
        info = np.iinfo(dtype)
        starts = [info.min, info.max - 70_000, -35_000 if info.min < 0 else 1 << 20]
    for start in starts:
        for n in [2, 32, 33, 140_000]:
            if np.issubdtype(dtype, np.floating):
                keys = (start + np.abs(start) * 1e-3 * rng.random(n)).astype(dtype)
            else:
                keys = (np.array(start, dtype) + rng.integers(0, 70_000, n).astype(dtype))
            sorted_keys = keys.copy()
            kd.sort(sorted_keys)
            np.testing.assert_array_equal(sorted_keys, np.sort(keys))
            np.testing.assert_array_equal(kd.argsort(keys), np.argsort(keys, kind="stable"))
            values = np.arange(n, dtype=np.int64)
            by_key = keys.copy()
            kd.sort_by_key(by_key, values)
            np.testing.assert_array_equal(values, np.argsort(keys, kind="stable"))


def test_sort_with_constant_middle_digits(rng):
    """Passes whose digit every key shares are skipped, whatever buffer the keys are in."""
    for high_bits, shift in [(8, 16), (8, 24), (16, 16)]:
        keys = ((rng.integers(0, 1 << high_bits, 100_000) << shift)
                | rng.integers(0, 256, 100_000)).astype(np.int64)
        for dtype in (np.int32, np.int64):
            typed = keys.astype(dtype)
            sorted_keys = typed.copy()
            kd.sort(sorted_keys)
            np.testing.assert_array_equal(sorted_keys, np.sort(typed))
            np.testing.assert_array_equal(kd.argsort(typed), np.argsort(typed, kind="stable"))


def test_argsort_keeps_signed_zeros_in_order():
    keys = np.array([0.0, -0.0, 1.0, -0.0, 0.0], np.float32)
    np.testing.assert_array_equal(kd.argsort(keys), np.argsort(keys, kind="stable"))


def test_argsort_into_out_and_along_the_last_axis(rng):
    keys = rng.integers(-3, 3, (4, 50)).astype(np.int32)
    out = np.empty(keys.shape, np.int64)
    assert kd.argsort(keys, out=out) is out
    np.testing.assert_array_equal(out, np.argsort(keys, axis=-1, kind="stable"))
    rows = keys.astype(np.float64)
    kd.sort(rows)
    np.testing.assert_array_equal(rows, np.sort(keys.astype(np.float64), axis=-1))


def test_sort_of_a_strided_view_sorts_the_view(rng):
    base = rng.standard_normal(101)
    view = base[::2]
    expected = np.sort(view)
    untouched = base[1::2].copy()
    kd.sort(view)
    np.testing.assert_array_equal(base[::2], expected)
    np.testing.assert_array_equal(base[1::2], untouched)


@pytest.mark.parametrize("value_dtype", [np.float64, np.int32])
def test_sort_by_key_moves_values_with_keys(rng, value_dtype):
    for kind in KINDS:
        keys = _keys(rng, kind, 5000, np.float32)
        values = rng.standard_normal(5000).astype(value_dtype) * 100
        order = np.argsort(keys, kind="stable")
        expected_keys, expected_values = keys[order], values[order]
        kd.sort_by_key(keys, values)
        np.testing.assert_array_equal(keys, expected_keys)
        np.testing.assert_array_equal(values, expected_values)


def test_sort_by_key_with_rows_of_values(rng):
    keys = rng.integers(0, 20, 300)
    values = rng.standard_normal((300, 3))
    order = np.argsort(keys, kind="stable")
    expected = values[order]
    kd.sort_by_key(keys, values)
    np.testing.assert_array_equal(values, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8, np.uint16, np.bool_])
def test_cumsum_matches_numpy(rng, dtype):
    for n in [0, 1, 5, 1000, 300_001]:
        if dtype == np.bool_:
            a = rng.random(n) < 0.5
        elif np.issubdtype(dtype, np.floating):
            a = rng.standard_normal(n).astype(dtype)
        else:
            a = rng.integers(0, 100, n).astype(dtype)
        got = kd.cumsum(a)
        expected = np.cumsum(a)
        assert got.dtype == expected.dtype
        if np.issubdtype(dtype, np.floating):
            np.testing.assert_allclose(got, expected, rtol=1e-4 if dtype == np.float32 else 1e-10,
                                       atol=1e-3 if dtype == np.float32 else 1e-9)
        else:
            np.testing.assert_array_equal(got, expected)
        exclusive = kd.cumsum(a, exclusive=True)
        assert exclusive.shape == a.shape
        if n:
            np.testing.assert_allclose(exclusive[1:], expected[:-1], rtol=1e-4)
            assert exclusive[0] == 0


def test_cumsum_results_keep_their_memory_while_held(rng):
    # large results take memory an earlier, dropped result gave back: never a held one's
    a, b = rng.integers(-50, 50, 1 << 17), rng.integers(-50, 50, 1 << 17)
    first = kd.cumsum(a)
    second = kd.cumsum(b)
    kd.cumsum(a)  # dropped at once: its memory goes back
    third = kd.cumsum(b[::-1].copy())
    np.testing.assert_array_equal(first, np.cumsum(a))
    np.testing.assert_array_equal(second, np.cumsum(b))
    np.testing.assert_array_equal(third, np.cumsum(b[::-1]))


def test_cumsum_along_each_axis(rng):
    a = rng.integers(-9, 9, (3, 4, 5)).astype(np.int64)
    for axis in (None, 0, 1, 2, -1, -3):
        np.testing.assert_array_equal(kd.cumsum(a, axis=axis), np.cumsum(a, axis=axis))
    with pytest.raises(np.exceptions.AxisError):
        kd.cumsum(a, axis=3)


def test_cumsum_of_a_kd_array_is_a_kd_array(rng):
    a = kd.array(rng.standard_normal(100))
    got = kd.cumsum(a)
    assert isinstance(got, kd.DeviceArray)
    np.testing.assert_allclose(got.numpy(), np.cumsum(a.numpy()))


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_searchsorted_matches_numpy(rng, side, dtype):
    for kind in KINDS:
        a = np.sort(_keys(rng, kind, 1000, dtype))
        v = np.concatenate([_keys(rng, "special", 300, dtype), a[::7]])
        np.testing.assert_array_equal(kd.searchsorted(a, v, side=side),
                                      np.searchsorted(a, v, side=side))
    empty = np.zeros(0, dtype)
    np.testing.assert_array_equal(kd.searchsorted(empty, v, side), np.searchsorted(empty, v, side))
    assert kd.searchsorted(a, a[3], side) == np.searchsorted(a, a[3], side)


def test_searchsorted_converts_to_the_common_type():
    a = np.arange(10)
    assert kd.searchsorted(a, 3.5) == np.searchsorted(a, 3.5) == 4
    got = kd.searchsorted(a, np.array([[0.5, 9.5], [-1.0, 3.0]]), side="right")
    np.testing.assert_array_equal(got, np.searchsorted(a, np.array([[0.5, 9.5], [-1.0, 3.0]]),
                                                       side="right"))


def test_segment_sum_matches_unique_and_reduceat(rng):
    for keys in [np.sort(rng.integers(0, 30, 10_000)),
                 np.sort(_keys(rng, "special", 2000, np.float64)),
                 np.zeros(50, np.int32), np.arange(7)]:
        values = rng.integers(-100, 100, keys.size).astype(np.int32)
        unique, sums = kd.segment_sum(keys, values)
        expected_keys, starts = np.unique(keys, return_index=True)
        np.testing.assert_array_equal(unique, expected_keys)
        np.testing.assert_array_equal(sums, np.add.reduceat(values, starts))
        assert sums.dtype == np.int64
    unique, sums = kd.segment_sum(np.zeros(0), np.zeros(0))
    assert unique.size == sums.size == 0


def test_bad_arguments_are_errors_naming_them():
    with pytest.raises(ValueError, match="side"):
        kd.searchsorted(np.arange(3), 1, side="middle")
    with pytest.raises(ValueError, match="out"):
        kd.argsort(np.arange(3), out=np.empty(3, np.int32))
    with pytest.raises(ValueError, match="values"):
        kd.sort_by_key(np.arange(3), np.arange(4))
    with pytest.raises(TypeError, match="keys"):
        kd.argsort(np.array(["a", "b"]))


def test_2_to_the_24_keys():
    rng = np.random.default_rng(24)
    keys = rng.integers(0, 1 << 30, 1 << 24).astype(np.int32)
    order = kd.argsort(keys)
    assert np.all(keys[order[1:]] >= keys[order[:-1]])
    tied = keys[order[1:]] == keys[order[:-1]]
    assert np.all(order[1:][tied] > order[:-1][tied])
    np.testing.assert_array_equal(kd.cumsum(keys[:1 << 20]), np.cumsum(keys[:1 << 20]))

"""The parallel primitives inside kernels: compiled, as plain Python and on the CUDA
device (emulated where there is no GPU), against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source

import kdsl as kd


@kd.kernel
def scans_and_sorts(a, b, v):
    running = kd.cumsum(a)
    before = kd.cumsum(a, exclusive=True)
    order = kd.argsort(a)
    kd.sort(b)
    right = kd.searchsorted(b, v, side="right")
    first = kd.searchsorted(b, b[3])
    return running, before, order, right, first


@pytest.mark.parametrize("n", [1, 2, 300, 70_000])
def test_scans_and_sorts_in_a_kernel_match_numpy(rng, n):
    a = rng.integers(-20, 20, n).astype(np.int32)
    b = rng.standard_normal(max(n, 4)).astype(np.float32)
    b[::5] = np.nan
    v = np.concatenate([b[:7], np.array([np.nan, -np.inf], np.float32)])
    sorted_b = np.sort(b)
    running, before, order, right, first = check(scans_and_sorts, a, b.copy(), v)
    np.testing.assert_array_equal(running, np.cumsum(a))
    assert running.dtype == np.int64
    np.testing.assert_array_equal(before[1:], np.cumsum(a)[:-1])
    assert before[0] == 0
    np.testing.assert_array_equal(order, np.argsort(a, kind="stable"))
    np.testing.assert_array_equal(right, np.searchsorted(sorted_b, v, side="right"))
    assert first == np.searchsorted(sorted_b, sorted_b[3])


@kd.kernel
def group_sums(keys, values, order):
    kd.argsort(keys, out=order)
    kd.sort_by_key(keys, values)
    return kd.segment_sum(keys, values)


def test_sort_by_key_and_segment_sums_in_a_kernel(rng):
    keys = rng.integers(0, 40, 5000).astype(np.int64)
    values = rng.standard_normal(5000)
    order = np.empty(5000, np.int64)
    expected_order = np.argsort(keys, kind="stable")
    unique, sums = check(group_sums, keys.copy(), values.copy(), order, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(order, expected_order)
    expected_keys, starts = np.unique(keys[expected_order], return_index=True)
    np.testing.assert_array_equal(unique, expected_keys)
    np.testing.assert_allclose(sums, np.add.reduceat(values[expected_order], starts), rtol=1e-12)


@kd.kernel
def sort_each_row(rows):
    for r in kd.prange(rows.shape[0]):
        kd.sort(rows[r])


def test_a_sort_inside_a_parallel_loop_runs_per_iteration(rng):
    rows = rng.standard_normal((40, 33))
    expected = np.sort(rows, axis=1)
    check(sort_each_row, rows)
    np.testing.assert_array_equal(rows, expected)


@pytest.mark.parametrize("call, message", [
    ("kd.sort(m)", "1-D array"),
    ("kd.cumsum(x, exclusive=e)", "'exclusive' must be a constant"),
    ("kd.searchsorted(x, 1.0, side='middle')", "side must be 'left' or 'right'"),
    ("kd.argsort(x, out=x)", "int64"),
    ("kd.cumsum(x, axis=1)", "out of range"),
    ("kd.cumsum(x, reverse=True)", "unexpected keyword argument 'reverse'"),
])
def test_bad_calls_are_located_compile_errors(call, message):
    k = kernel_from_source(f"""
        @kd.kernel
        def k(x: kd.Array[kd.f64], m: kd.Array[kd.f64, 2], e: bool):
            {call}
    """)
    with pytest.raises(kd.CompileError, match=message):
        k(np.zeros(3), np.zeros((2, 2)), True)

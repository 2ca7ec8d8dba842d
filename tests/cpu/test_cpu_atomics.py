"""Shared writes in parallel loops: a[idx] += v with colliding indices (atomic),
kd.atomic_add/sub/min/max returning old values, and updates the compiler proves
non-conflicting (demoted to plain updates)."""

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats, nonzero_ints, with_threads

import kdsl as kd


@kd.kernel
def histogram(idx, w, counts, weights):
    for i in kd.prange(idx.shape[0]):
        b = idx[i]
        counts[b] += 1
        weights[b] += w[i]
        weights[b + 1] -= w[i] * 0.5


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("wdtype", [np.float32, np.float64, np.int64, np.int32])
def test_histogram_with_colliding_indices(wdtype, threads, rng):
    n, bins = 20_000, 7
    idx = rng.integers(0, bins, n)
    # integer-valued weights: sums are exact in any order
    w = rng.integers(1, 9, n).astype(wdtype) * (2 if np.dtype(wdtype).kind == "i" else 1)
    counts = np.zeros(bins, np.int64)
    weights = np.zeros(bins + 1, wdtype)
    with_threads(threads, check, histogram, idx, w, counts, weights)
    np.testing.assert_array_equal(counts, np.bincount(idx, minlength=bins))


@kd.kernel
def histogram_2d(x, y, h):
    for i in kd.prange(x.shape[0]):
        h[x[i], y[i]] += 1.0


def test_2d_histogram(rng):
    x, y = rng.integers(0, 4, 5000), rng.integers(0, 3, 5000)
    h = np.zeros((4, 3), np.float32)
    with_threads(2, check, histogram_2d, x, y, h)
    assert h.sum() == 5000


@kd.kernel
def take_tickets(counter, tickets):
    for i in kd.prange(tickets.shape[0]):
        tickets[i] = kd.atomic_add(counter, 0, 1)


@pytest.mark.parametrize("threads", [1, 2])
def test_atomic_add_returns_distinct_old_values(threads):
    n = 50_000
    counter = np.zeros(1, np.int64)
    tickets = np.zeros(n, np.int64)
    with_threads(threads, take_tickets, counter, tickets)
    assert counter[0] == n
    np.testing.assert_array_equal(np.sort(tickets), np.arange(n))
    if threads == 1:  # serial: the same order as plain Python
        with cuda_testing.cpu_only():
            with_threads(1, check, take_tickets, np.zeros(1, np.int64), np.zeros(100, np.int64))


def test_atomic_add_returns_distinct_old_values_on_cuda():
    if not cuda_testing.enabled():
        pytest.skip("CUDA tests are off")
    n = 20_000
    with cuda_testing.on_device():
        counter = kd.zeros(1, kd.i64, device="cuda")
        tickets = kd.zeros(n, kd.i64, device="cuda")
        take_tickets(counter, tickets)
        assert counter.numpy()[0] == n
        np.testing.assert_array_equal(np.sort(tickets.numpy()), np.arange(n))


@kd.kernel
def atomics_old_values(a, idx, v, old_add, old_sub, old_min, old_max):
    for i in kd.prange(idx.shape[0]):
        k = idx[i]
        old_add[i] = kd.atomic_add(a, (k, 0), v[i])
        old_sub[i] = kd.atomic_sub(a, (k, 1), v[i])
        old_min[i] = kd.atomic_min(a, (k, 2), v[i])
        old_max[i] = kd.atomic_max(a, (k, 3), v[i])


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64, np.float32])
def test_atomic_functions_serial_order_matches_python(dtype, rng):
    """With one thread the loop runs in order: old values equal plain Python's."""
    n = 300
    idx = rng.integers(0, 5, n)
    v = nonzero_ints(rng, n, np.int64, -20, 20).astype(dtype)
    a = nonzero_ints(rng, (5, 4), np.int64, -5, 5).astype(dtype)
    outs = [np.zeros(n, dtype) for _ in range(4)]
    with cuda_testing.cpu_only():
        with_threads(1, check, atomics_old_values, a, idx, v, *outs)


@pytest.mark.parametrize("dtype", [np.int64, np.float64, np.float32])
def test_atomic_functions_in_parallel(dtype, rng):
    n = 40_000
    idx = rng.integers(0, 3, n)
    v = nonzero_ints(rng, n, np.int64, -20, 20).astype(dtype)
    a0 = nonzero_ints(rng, (3, 4), np.int64, -5, 5).astype(dtype)
    a = a0.copy()
    outs = [np.zeros(n, dtype) for _ in range(4)]
    with_threads(2, atomics_old_values, a, idx, v, *outs)
    for k in range(3):
        sel = idx == k
        assert a[k, 0] == a0[k, 0] + v[sel].sum()
        assert a[k, 1] == a0[k, 1] - v[sel].sum()
        assert a[k, 2] == min(a0[k, 2], v[sel].min())
        assert a[k, 3] == max(a0[k, 3], v[sel].max())
        # the old values of the adds are the partial sums in some order: all distinct
        # cumulative values between the initial and the final one
        if np.all(v[sel] > 0):
            assert len(np.unique(outs[0][sel])) == sel.sum()
        # a min's old values never go below the final minimum, nor above the start
        assert outs[2][sel].min() >= a[k, 2] and outs[2][sel].max() <= a0[k, 2]
        assert outs[3][sel].max() <= a[k, 3] and outs[3][sel].min() >= a0[k, 3]


@kd.kernel
def atomic_vec(acc: kd.Array[kd.vec3], idx: kd.Array[kd.i64], f: kd.Array[kd.vec3]):
    for i in kd.prange(idx.shape[0]):
        acc[idx[i]] += f[i]


def test_atomic_vector_accumulation(rng):
    n = 6000
    idx = rng.integers(0, 10, n)
    f = rng.integers(-8, 8, (n, 3)).astype(np.float32)  # exact sums
    acc = np.zeros((10, 3), np.float32)
    with_threads(2, check, atomic_vec, acc, idx, f)


@kd.kernel
def scatter_pairs(pairs, f, out):
    for p in kd.prange(pairs.shape[0]):
        i = pairs[p, 0]
        j = pairs[p, 1]
        out[i] += f[p]
        out[j] -= f[p]


def test_pairwise_force_scatter(rng):
    pairs = rng.integers(0, 50, (5000, 2))
    f = rng.integers(-100, 100, 5000).astype(np.float64)
    out = np.zeros(50)
    with_threads(2, check, scatter_pairs, pairs, f, out)
    assert out.sum() == 0.0


# --- updates proven not to conflict ------------------------------------------------


@kd.kernel
def own_element(a, b):
    for i in kd.prange(a.shape[0]):
        a[i] += b[i]
        a[i] -= 0.5 * b[i]
        a[i] *= 2.0


@kd.kernel
def own_element_2d(a, b):
    for i, j in kd.ndrange(a.shape[0], a.shape[1]):
        a[i, j] += b[i, j]
        for k in range(3):
            a[i, j] += k


@kd.kernel
def own_row(a, b):
    for i in kd.prange(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] += b[i, j] * j


def test_demoted_updates_are_correct(rng):
    a, b = nonzero_floats(rng, 3000, np.float64), nonzero_floats(rng, 3000, np.float64)
    with_threads(2, check, own_element, a, b)
    a2, b2 = nonzero_floats(rng, (40, 30)), nonzero_floats(rng, (40, 30))
    with_threads(2, check, own_element_2d, a2, b2)
    with_threads(2, check, own_row, a2, b2, rtol=1e-6, atol=1e-5)
    with_threads(2, check, own_element, a[::-3], b[::3])


def test_demotion_is_visible_in_the_ir(rng):
    a, b = nonzero_floats(rng, 10, np.float64), nonzero_floats(rng, 10, np.float64)
    idx = np.zeros(10, np.int64)
    assert "atomic" not in own_element.ir(a, b)
    assert "atomic" in histogram.ir(idx, b, np.zeros(3, np.int64), np.zeros(4))


@kd.kernel
def serial_update(a, idx, v):
    for i in range(idx.shape[0]):
        a[idx[i]] += v[i]
        a[idx[i]] *= 0.5


def test_updates_outside_parallel_loops(rng):
    idx = rng.integers(0, 5, 100)
    v = nonzero_floats(rng, 100, np.float64)
    a = np.ones(5)
    check(serial_update, a, idx, v)

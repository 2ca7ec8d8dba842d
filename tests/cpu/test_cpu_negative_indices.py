"""Negative run-time indices count from the end, as in Python and NumPy: loads, stores,
``+=`` and atomics, in serial and parallel loops, on every axis and for arrays of vectors.
Each kernel is compared with its own Python (``check`` also runs it on the CUDA device,
emulated where there is no GPU). Out of range after wrapping is the debug-mode
``IndexError``, reporting the index as the user wrote it."""

from __future__ import annotations

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest
from kdsl_cpu_util import check, with_threads

import kdsl as kd


@kd.kernel
def fill_from_minus_two(n):
    A = np.zeros(n)
    for i in kd.prange(-2, 2):
        A[i] = 7.0
    return A


def test_parallel_store_from_a_negative_start():
    """The reported program: it wrote outside the array and corrupted the heap."""
    np.testing.assert_array_equal(fill_from_minus_two(4), [7.0, 7.0, 7.0, 7.0])
    np.testing.assert_array_equal(fill_from_minus_two(4), fill_from_minus_two.python(4))
    check(fill_from_minus_two, 3)


@kd.kernel
def reverse_and_shift(x, out, shift: kd.i64):
    n = x.shape[0]
    for i in kd.prange(n):
        out[i, 0] = x[-1 - i]
        out[i, 1] = x[i - shift]
    for i in range(-n, 0):
        out[i, 2] = x[i] * 2.0


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_loads_and_stores_at_negative_indices(dtype, rng):
    x = rng.integers(-50, 50, size=9).astype(dtype)
    for shift in (0, 3, 9):
        check(reverse_and_shift, x, np.zeros((9, 3), dtype), shift)


@kd.kernel
def two_axes(a, rows: kd.Array[kd.i32], cols: kd.Array[kd.i64], out):
    for i in kd.prange(rows.shape[0]):
        out[-1 - i, -3] = a[rows[i], cols[i]]
        out[i, rows[i] % 2 - 2] = a[-1, cols[i]] + 1.0  # column 1 or 2: no iteration shares one


@kd.kernel
def vectors_from_the_end(p: kd.Array[kd.vec3], k: kd.Array[kd.i64], out: kd.Array[kd.vec3]):
    for i in kd.prange(k.shape[0]):
        out[-1 - i] = p[k[i]] * 2.0


def test_every_axis_and_arrays_of_vectors(rng):
    a = rng.normal(size=(5, 7))
    rows = rng.integers(-5, 5, size=30).astype(np.int32)
    cols = rng.integers(-7, 7, size=30)
    check(two_axes, a, rows, cols, np.zeros((30, 3)))
    p = rng.normal(size=(6, 3)).astype(np.float32)
    k = rng.integers(-6, 6, size=6)
    check(vectors_from_the_end, p, k, np.zeros((6, 3), np.float32))


@kd.kernel
def grid_updates(a, b, c):
    nx = a.shape[0]
    ny = a.shape[1]
    for i, j in kd.ndrange(nx, ny):
        b[i - nx, -1 - j] += a[-1 - i, j]
        kd.atomic_max(c, (-1, j - ny), a[i, j])


def test_two_axes_of_a_parallel_grid(rng):
    a = rng.integers(-50, 50, size=(5, 6))
    with_threads(2, check, grid_updates, a, rng.integers(-5, 5, size=(5, 6)),
                 np.full((2, 6), -100))


@kd.kernel
def histogram(idx, w, h):
    for p in kd.prange(idx.shape[0]):
        h[idx[p]] += w[p]


@kd.kernel
def serial_updates(idx, w, h):
    for p in range(idx.shape[0]):
        h[idx[p]] += w[p]
        h[idx[p] % h.shape[0] - h.shape[0]] -= 1


@pytest.mark.parametrize("n", [40, 5000])  # few iterations: atomics; many: private copies
@pytest.mark.parametrize("threads", [1, 2])
def test_updates_at_negative_indices(n, threads, rng):
    idx = rng.integers(-8, 8, size=n)
    w = rng.integers(-9, 10, size=n).astype(np.int32)
    h = rng.integers(0, 100, size=8).astype(np.int32)
    with_threads(threads, check, histogram, idx, w, h.copy())
    check(serial_updates, idx, w, h.copy())
    expected = h.copy()
    np.add.at(expected, idx, w)
    histogram(idx, w, h)
    np.testing.assert_array_equal(h, expected)


@kd.kernel
def explicit_atomics(idx, h, lo, hi, old):
    for p in kd.prange(idx.shape[0]):
        kd.atomic_add(h, idx[p], 1)
        kd.atomic_min(lo, idx[p], p)
        kd.atomic_max(hi, idx[p] % 3 - 3, p)
    for p in range(idx.shape[0]):
        old[p] = kd.atomic_sub(h, idx[p], 1)


def test_explicit_atomics_at_negative_indices(rng):
    idx = rng.integers(-3, 3, size=200)
    check(explicit_atomics, idx, np.zeros(3, np.int64), np.full(3, 1000), np.full(3, -1),
          np.zeros(200, np.int64))


@kd.kernel
def crossing(a, n: kd.i64):
    for i in kd.prange(n):
        a[i] += 1.0
        a[i - n] += 10.0  # the same element as a[i]
        a[-1 - i] += 100.0  # the element of iteration n - 1 - i


@kd.kernel
def across_axes(a, n: kd.i64):
    for i in kd.prange(n):
        a[i, 2] += 1.0
        a[5, i] += 1.0  # meets a[i, 2] of iteration 5 at a[5, 2] (iteration 2)


def test_updates_that_meet_across_iterations_stay_atomic():
    a = np.zeros(8)
    optimized = crossing.ir(a, 8)
    assert optimized.count("atomic_rmw") == 3, optimized
    with_threads(2, check, crossing, a, 8)
    b = np.zeros((8, 8))
    assert across_axes.ir(b, 8).count("atomic_rmw") == 2
    with_threads(2, check, across_axes, b, 8)


@kd.kernel(debug=True)
def checked_gather(x, idx, out):
    for i in kd.prange(idx.shape[0]):
        out[i] = x[idx[i]]


@kd.kernel(debug=True)
def checked_store(a, i: kd.i64, j: kd.i64):
    a[i, j] = 1.0


def test_debug_mode_checks_the_wrapped_index_and_reports_the_written_one():
    x = np.arange(10.0)
    out = np.zeros(4)
    checked_gather(x, np.array([-10, -1, 0, 9]), out)
    np.testing.assert_array_equal(out, [0.0, 9.0, 0.0, 9.0])
    with pytest.raises(IndexError, match=r"index -11 is out of bounds for axis 0 of 'x' with size 10"):
        checked_gather(x, np.array([0, -11, 0, 0]), out)
    with pytest.raises(IndexError, match=r"index 10 is out of bounds for axis 0 of 'x' with size 10"):
        checked_gather(x, np.array([0, 10, 0, 0]), out)
    a = np.zeros((2, 3))
    checked_store(a, -2, -3)
    assert a[0, 0] == 1.0
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for axis 1 of 'a' with size 3"):
        checked_store(a, 1, -4)


@kd.kernel(debug=True)
def checked_new_array(n: kd.i64, k: kd.i64):
    tmp = kd.zeros(n, kd.f64)
    tmp[k] = 2.0
    return tmp


def test_debug_mode_on_an_array_made_in_the_kernel():
    np.testing.assert_array_equal(checked_new_array(3, -1), [0.0, 0.0, 2.0])
    with pytest.raises(IndexError, match=r"index -4 is out of bounds"):
        checked_new_array(3, -4)


@kd.kernel
def components_from_the_end(p: kd.Array[kd.vec3], k: kd.Array[kd.i64], out: kd.Array[kd.f32],
                            q: kd.Array[kd.vec3]):
    for i in kd.prange(k.shape[0]):
        v = p[i]
        out[i] = v[k[i]]
        v[-1 - k[i]] = 10.0
        q[i] = v


def test_run_time_vector_components_count_from_the_end(rng):
    p = rng.normal(size=(6, 3)).astype(np.float32)
    k = np.array([-1, -2, -3, 0, 1, 2])
    check(components_from_the_end, p, k, np.zeros(6, np.float32), np.zeros((6, 3), np.float32))


@pytest.mark.skipif(not cuda_testing.enabled(), reason="CUDA tests are off")
def test_debug_mode_on_the_cuda_device():
    with cuda_testing.on_device():
        x = kd.array(np.arange(10.0), device="cuda")
        out = kd.zeros(4, kd.f64, device="cuda")
        checked_gather(x, kd.array(np.array([-10, -1, 0, 9]), device="cuda"), out)
        np.testing.assert_array_equal(out.numpy(), [0.0, 9.0, 0.0, 9.0])
        with pytest.raises(IndexError, match=r"index -11 is out of bounds .* size 10"):
            checked_gather(x, kd.array(np.array([0, -11, 0, 0]), device="cuda"), out)

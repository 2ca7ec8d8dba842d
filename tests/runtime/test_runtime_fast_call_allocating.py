"""Kernels that make or return arrays on the compiled call path (kdsl/runtime/fast_call.py
with native_allocation.py): after the warm-up calls they take the compiled path, their
results equal the kernel's Python function, the arrays they return are exactly the ones
they made (no leaked or stolen references), and their large temporaries and dropped
results go back to the pool."""

from __future__ import annotations

import sys
import weakref

import numpy as np
import pytest

import kdsl as kd
from kdsl.runtime.native_allocation import RECORD_CAPACITY
from kdsl.runtime.symbols import TEMPORARIES

RNG = np.random.default_rng(11)


def data(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.uniform(-2.0, 2.0, shape).astype(dtype)


@kd.kernel
def product(a, b):
    return a @ b


@kd.kernel
def scaled_copy(x: kd.Array[kd.f32, 2], s: float):
    return x * s + 1.0


@kd.kernel
def view_of_new(x: kd.Array[kd.f32]):
    t = x * 2.0
    return t[1:]


@kd.kernel
def array_and_total(x: kd.Array[kd.f64]):
    y = x * x
    return y, kd.sum(y)


@kd.kernel
def the_argument(x: kd.Array[kd.f64]):
    return x


@kd.kernel(debug=True)
def fails_after_allocating(x: kd.Array[kd.f32], k: int):
    t = kd.zeros(x.shape[0], dtype=kd.f32)
    assert k < x.shape[0], "k is past the end"
    t[k] = 1.0
    return t


@kd.kernel
def filled(n: int, value: float):
    return kd.full(n, value, dtype=kd.f64) + kd.ones(n, dtype=kd.f64)


@kd.kernel
def many_temporaries(x: kd.Array[kd.f64], steps: int):
    total = kd.zeros(x.shape[0], dtype=kd.f64)
    for s in range(steps):
        t = kd.zeros(x.shape[0], dtype=kd.f64)
        for i in range(x.shape[0]):
            t[i] = x[i] * s
        total[:] = total + t
    return total


def on_compiled_path(kernel, *args):
    """The kernel's results over three calls, checked to come from the compiled path."""
    results = [kernel(*args) for _ in range(3)]
    assert kernel._fast is not None
    return results[-1]


@pytest.mark.parametrize("n", [1, 16, 64, 200])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_returned_products_match_numpy(n, dtype):
    a, b = data(n, n, dtype=dtype), data(n, n, dtype=dtype)
    got = on_compiled_path(product, a, b)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=tol, atol=tol * n)
    assert got.dtype == dtype and got.flags.c_contiguous and got.flags.writeable


@pytest.mark.parametrize("shape", [(3, 5), (300, 300)])  # small: NumPy's C API; large: the pool
def test_returned_arrays_are_owned_by_the_caller_alone(shape):
    x = data(*shape)
    got = on_compiled_path(scaled_copy, x, 2.5)
    np.testing.assert_allclose(got, scaled_copy.python(x, 2.5), rtol=1e-6)
    assert sys.getrefcount(got) == 2  # the name and getrefcount's argument
    ref = weakref.ref(got)
    del got
    assert ref() is None


def test_a_dropped_large_result_goes_back_to_the_pool():
    x = data(300, 300)
    on_compiled_path(scaled_copy, x, 1.0)
    TEMPORARIES.clear()
    first = scaled_copy(x, 1.0)
    address, nbytes = first.ctypes.data, first.nbytes
    np.testing.assert_allclose(first, scaled_copy.python(x, 1.0), rtol=1e-12)
    del first
    assert TEMPORARIES.bytes == nbytes
    second = scaled_copy(x, 3.0)  # the memory of the first
    assert second.ctypes.data == address and TEMPORARIES.bytes == 0
    np.testing.assert_allclose(second, scaled_copy.python(x, 3.0), rtol=1e-12)
    third = scaled_copy(x, -1.0)  # the second is still held: fresh memory
    assert third.ctypes.data != address
    np.testing.assert_allclose(second, scaled_copy.python(x, 3.0), rtol=1e-12)
    TEMPORARIES.clear()


def test_views_tuples_and_arguments_are_returned_as_on_the_first_call():
    x = data(40)
    got = on_compiled_path(view_of_new, x)
    np.testing.assert_allclose(got, view_of_new.python(x), rtol=1e-6)
    y = data(50, dtype=np.float64)
    array, total = on_compiled_path(array_and_total, y)
    np.testing.assert_allclose(array, y * y)
    assert total == pytest.approx(float((y * y).sum()))
    assert on_compiled_path(the_argument, y) is y


def test_errors_after_an_allocation_are_raised_and_nothing_is_kept():
    x = data(8)
    np.testing.assert_array_equal(on_compiled_path(fails_after_allocating, x, 3), np.eye(8)[3])
    with pytest.raises(AssertionError, match="k is past the end"):
        fails_after_allocating(x, 8)
    assert fails_after_allocating._fast is not None


def test_filled_arrays_from_the_compiled_path():
    got = on_compiled_path(filled, 5, 2.5)
    np.testing.assert_array_equal(got, np.full(5, 3.5))


@pytest.mark.parametrize("steps", [3, RECORD_CAPACITY + 4])  # more arrays than the record holds
def test_more_temporaries_than_the_record_holds(steps):
    x = data(10, dtype=np.float64)
    got = on_compiled_path(many_temporaries, x, steps)
    np.testing.assert_allclose(got, x * sum(range(steps)), rtol=1e-12)
    assert sys.getrefcount(got) == 2


@kd.kernel
def histogram(x: kd.Array[kd.i32], bins: int):
    counts = kd.zeros(bins, dtype=kd.i64)
    for i in kd.prange(x.shape[0]):
        counts[x[i]] += 1
    return counts


def test_arrays_made_around_parallel_loops():
    x = RNG.integers(0, 7, 50_000).astype(np.int32)
    got = on_compiled_path(histogram, x, 7)
    np.testing.assert_array_equal(got, np.bincount(x, minlength=7))


def test_calls_from_several_threads_at_once():
    from concurrent.futures import ThreadPoolExecutor

    pairs = [(data(24, 24), data(24, 24)) for _ in range(4)]
    on_compiled_path(product, *pairs[0])

    def run(pair):
        return [product(*pair) for _ in range(50)]

    with ThreadPoolExecutor(4) as pool:
        for pair, results in zip(pairs, pool.map(run, pairs)):
            want = pair[0].astype(np.float64) @ pair[1]
            for got in results:
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@kd.kernel
def with_temporary(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    t = x * 2.0 + 1.0  # used twice: materialised
    out[:] = t * t + kd.sum(t)


@pytest.mark.parametrize("n", [10, 70_000])  # NumPy's C API; pooled memory
def test_temporaries_of_a_kernel_returning_nothing(n):
    x, out = data(n), np.zeros(n, np.float32)
    assert on_compiled_path(with_temporary, x, out) is None
    want = np.empty_like(out)
    with_temporary.python(x, want)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    if n > 1000:
        TEMPORARIES.clear()
        with_temporary(x, out)
        assert TEMPORARIES.bytes == x.nbytes  # the temporary went back
        TEMPORARIES.clear()


class _Subclass(np.ndarray):
    pass


def test_the_python_path_still_allocates_once_the_compiled_path_exists():
    x = data(6, 7)
    on_compiled_path(scaled_copy, x, 2.0)
    wrapped = x.view(_Subclass)  # not exactly an ndarray: the Python path, same machine code
    for _ in range(3):
        got = scaled_copy(wrapped, 2.0)
        np.testing.assert_allclose(got, scaled_copy.python(x, 2.0), rtol=1e-12)
        assert sys.getrefcount(got) == 2

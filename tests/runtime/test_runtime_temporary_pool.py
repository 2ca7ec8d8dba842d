"""The pool of temporaries (kdsl/runtime/symbols.py): a call's large temporaries that
nothing returned holds are reused by the next calls (no fresh pages); returned arrays and
views of them never are; kd.zeros from the pool is zeroed; the pool stays under its
limit."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd
from kdsl.runtime.symbols import TEMPORARIES

N = 64 * 1024  # 256 KiB of float32: above the pool's smallest size


@kd.kernel
def uses_temporary(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    t = x * 2.0 + 1.0  # used twice: materialised
    out[:] = t * t + kd.sum(t)


@kd.kernel
def returns_view(x: kd.Array[kd.f32]):
    t = x * 2.0 + 1.0
    u = t * t + kd.sum(t)
    return u[1:]


@kd.kernel
def accumulates_zeros(x: kd.Array[kd.f32], out: kd.Array[kd.f32], steps: kd.i32):
    for _ in range(steps):
        acc = kd.zeros(x.shape[0], dtype=kd.f32)  # freed at the end of each step
        for i in kd.prange(x.shape[0]):
            acc[i] += x[i]
        out[:] = out + acc


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.fixture
def empty_pool():
    TEMPORARIES.clear()
    yield TEMPORARIES
    TEMPORARIES.clear()


def _expected(x):
    t = x.astype(np.float64) * 2 + 1
    return t * t + t.sum()


def test_temporaries_are_reused(empty_pool, rng):
    x = rng.uniform(-1, 1, N).astype(np.float32)
    out = np.empty_like(x)
    uses_temporary(x, out)
    assert empty_pool.bytes == 4 * N
    ((address, nbytes),) = empty_pool.entries()
    assert nbytes == 4 * N
    y = rng.uniform(-1, 1, N).astype(np.float32)
    uses_temporary(y, out)  # takes the pooled buffer and gives it back
    assert empty_pool.entries() == [(address, nbytes)]
    np.testing.assert_allclose(out, _expected(y), rtol=1e-5)


def test_returned_arrays_and_views_are_never_reused(empty_pool, rng):
    xs = [rng.uniform(-1, 1, N).astype(np.float32) for _ in range(3)]
    results = [returns_view(x) for x in xs]
    for x, r in zip(xs, results):
        np.testing.assert_allclose(r, _expected(x)[1:], rtol=1e-5)
    assert len({r.ctypes.data for r in results}) == 3


def test_zeros_from_the_pool_are_zeroed(empty_pool, rng):
    x = rng.uniform(-1, 1, N).astype(np.float32)
    for _ in range(2):
        out = np.zeros_like(x)
        accumulates_zeros(x, out, 3)
        np.testing.assert_allclose(out, 3 * x, rtol=1e-6)
    assert empty_pool.bytes > 0


def test_pool_stays_under_its_limit(empty_pool, rng):
    limit = empty_pool.limit
    empty_pool.limit = 4 * (N + 32)
    try:
        for n in (N, N + 16, N + 32):
            x = rng.uniform(-1, 1, n).astype(np.float32)
            uses_temporary(x, np.empty_like(x))
            assert empty_pool.bytes <= 4 * (N + 32)
        assert [size for _, size in empty_pool.entries()] == [4 * (N + 32)]  # oldest first
    finally:
        empty_pool.limit = limit


@kd.kernel
def filled_with(x: kd.Array[kd.f32], value: kd.f32):
    return x * 0.0 + value


@kd.kernel
def zeros_with_one(n: int, k: int):
    z = kd.zeros(n, dtype=kd.f32)
    z[k] = 1.0
    return z


def _on_compiled_path(kernel, *args):
    for _ in range(2):
        kernel(*args)
    assert kernel._fast is not None
    return kernel(*args)


def test_compiled_calls_take_and_give_back_pool_memory_without_python(empty_pool, rng):
    import sys

    x = rng.uniform(-1, 1, N).astype(np.float32)
    _on_compiled_path(filled_with, x, 2.0)
    called = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.endswith("symbols.py"):
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        first = filled_with(x, 3.0)
        address = first.ctypes.data
        del first  # its memory goes back to the pool
        second = filled_with(x, 4.0)
    finally:
        sys.setprofile(None)
    assert called == []
    assert second.ctypes.data == address and address % 64 == 0
    np.testing.assert_array_equal(second, np.full(N, 4.0, np.float32))
    assert empty_pool.bytes == 0
    del second
    assert empty_pool.entries() == [(address, 4 * N)]


def test_zeros_returned_from_reused_pool_memory_are_zeroed(empty_pool, rng):
    x = rng.uniform(-1, 1, N).astype(np.float32)
    _on_compiled_path(zeros_with_one, N, 3)
    for k in (5, 9):
        del_me = filled_with(x, 7.0)  # dirty memory of the same size, back in the pool
        del del_me
        got = zeros_with_one(N, k)
        want = np.zeros(N, np.float32)
        want[k] = 1.0
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, zeros_with_one.python(N, k))

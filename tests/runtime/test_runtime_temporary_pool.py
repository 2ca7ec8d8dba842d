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
    (buffer,) = empty_pool.order
    address = buffer.ctypes.data
    y = rng.uniform(-1, 1, N).astype(np.float32)
    uses_temporary(y, out)  # takes the pooled buffer and gives it back
    assert [b.ctypes.data for b in empty_pool.order] == [address]
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


def test_pool_stays_under_its_limit(empty_pool, rng, monkeypatch):
    monkeypatch.setattr(type(empty_pool), "limit", 4 * (N + 32))
    for n in (N, N + 16, N + 32):
        x = rng.uniform(-1, 1, n).astype(np.float32)
        uses_temporary(x, np.empty_like(x))
        assert empty_pool.bytes <= 4 * (N + 32)
    assert [b.nbytes for b in empty_pool.order] == [4 * (N + 32)]  # the oldest went first

"""NumPy spellings Numba users write in kernels (API.md sections 3 and 7): ``a.shape ==
b.shape`` (tuples compare as in Python), ``np.transpose(a)`` (the view ``a.T``),
``a.fill(v)``, ``a.cumsum(axis)``, ``np.full_like(a, v, dtype)``, and a fill value an
integer type cannot hold raising NumPy's OverflowError. Each is compared with the
kernel's own plain-Python run and with NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def same_shapes(a, b):
    return a.shape == b.shape, a.shape != b.shape, b.shape == (a.shape[0], 4), a.shape == (3,)


@kd.kernel
def guarded_dot(a, b):
    if a.shape != b.shape:
        return -1.0
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


def test_shapes_compare_as_python_tuples():
    assert check(same_shapes, np.zeros(3), np.zeros(3)) == (True, False, False, True)
    assert check(same_shapes, np.zeros(3), np.zeros((3, 4))) == (False, True, True, True)
    assert check(guarded_dot, np.ones(3), np.ones(4)) == -1.0
    assert check(guarded_dot, np.full(3, 2.0), np.ones(3)) == 6.0


@kd.kernel
def transposes(m, out):
    t = np.transpose(m)
    for i in kd.prange(t.shape[0]):
        for j in range(t.shape[1]):
            out[i, j] = t[i, j] * 2.0
    return np.transpose(m).sum(axis=1)


def test_np_transpose_of_an_array_is_its_view(rng):
    m = rng.standard_normal((3, 5))
    out = np.zeros((5, 3))
    sums = check(transposes, m, out, rtol=1e-12)
    np.testing.assert_array_equal(out, 2.0 * m.T)
    np.testing.assert_allclose(sums, m.sum(axis=0), rtol=1e-12)


@kd.kernel
def fills(a, b: kd.Array[kd.i32, 2], rows: kd.Array[kd.f32, 2]):
    a.fill(3.5)
    b[1:].fill(-1)
    b[0, :].fill(7)
    for i in kd.prange(rows.shape[0]):
        rows[i].fill(i)


def test_fill_writes_every_element_of_the_view():
    a, b, rows = np.zeros(4), np.zeros((3, 2), np.int32), np.zeros((5, 3), np.float32)
    check(fills, a, b, rows)
    assert a.tolist() == [3.5] * 4 and b.tolist() == [[7, 7], [-1, -1], [-1, -1]]
    np.testing.assert_array_equal(rows, np.repeat(np.arange(5, dtype=np.float32)[:, None], 3, 1))


@kd.kernel
def cumulative(a, m):
    return a.cumsum(), m.cumsum(axis=0), m.cumsum(1)


def test_cumsum_method_as_numpy(rng):
    a, m = rng.standard_normal(10), rng.integers(-9, 9, (3, 4)).astype(np.int32)
    flat, down, across = check(cumulative, a, m, rtol=1e-12)
    np.testing.assert_allclose(flat, a.cumsum(), rtol=1e-12)
    np.testing.assert_array_equal(down, m.cumsum(axis=0))
    np.testing.assert_array_equal(across, m.cumsum(1))


@kd.kernel
def filled_like(a):
    return np.full_like(a, 2.5), np.full_like(a, 7, np.int32), np.full_like(a, fill_value=-1,
                                                                            dtype=np.float32)


def test_full_like_as_numpy(rng):
    a = rng.standard_normal((2, 3))
    results = check(filled_like, a)
    expected = (np.full_like(a, 2.5), np.full_like(a, 7, np.int32),
                np.full_like(a, fill_value=-1, dtype=np.float32))
    for r, e in zip(results, expected):
        assert r.dtype == e.dtype
        np.testing.assert_array_equal(r, e)


@kd.kernel
def full_of_300(n: kd.i64):
    return kd.full(n, 300, kd.u8)


def test_a_fill_value_the_integer_type_cannot_hold_is_an_overflow_error():
    with pytest.raises(OverflowError, match="300 out of bounds for uint8") as caught:
        full_of_300(3)
    assert isinstance(caught.value, kd.CompileError)
    assert caught.value.lineno == full_of_300.py_function.__code__.co_firstlineno + 2


@kd.kernel
def rounded(x, a, v: kd.vec3, out):
    for i in kd.prange(a.shape[0]):
        out[i] = np.round(a[i], 2) + np.round(a[i], -1)
    return np.round(x, 2), np.around(x, decimals=-1), np.round(a, 1), np.round(v, 2)


def test_round_to_decimals_as_numpy(rng):
    a = (rng.standard_normal(500) * 1000).astype(np.float32)
    v = np.array([0.125, 2.675, -1.005], np.float32)
    out = np.zeros_like(a)
    x2, x_tens, a1, v2 = check(rounded, 1234.56789, a, v, out)
    assert (x2, x_tens) == (np.round(1234.56789, 2), np.round(1234.56789, -1))
    np.testing.assert_array_equal(a1, np.round(a, 1))
    np.testing.assert_array_equal(v2, np.round(v, 2))
    np.testing.assert_array_equal(out, np.round(a, 2) + np.round(a, -1))
    b = rng.standard_normal(500) * 1000
    out = np.zeros_like(b)
    rounded(0.5, b, v, out)
    np.testing.assert_array_equal(out, np.round(b, 2) + np.round(b, -1))

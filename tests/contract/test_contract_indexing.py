"""NumPy's basic indexing in kernels: negative indices, slices with steps, ``None`` and
``np.newaxis``, ``...``; and the located errors of indices NumPy would take but kdsl
does not."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def picks(a: kd.Array[kd.f64, 2]):
    return (a[-1, -1], a[-1][0], a[1:, ::2][0, 1], a[::-1, :][0, 0], a[-2:, -2:][1, 1],
            a[1:-1].shape[0], a[5:, :].shape[0], a[:, 1:2].shape[1], a[-1:0:-2, 0].shape[0])


def test_negative_indices_and_slices_as_numpy(rng):
    a = rng.normal(size=(4, 5))
    got = check(picks, a)
    assert got == (a[-1, -1], a[-1][0], a[1:, ::2][0, 1], a[::-1, :][0, 0], a[-2:, -2:][1, 1],
                   2, 0, 1, 2)


@kd.kernel
def ellipses_and_new_axes(a: kd.Array[kd.f64, 3], b: kd.Array[kd.f64]):
    a[...] = a * 2.0
    a[..., 0] = 1.0
    a[0, ...] += 0.5
    outer = b[:, np.newaxis] * b[np.newaxis, :]
    return a[..., 1], a[1, ..., 2], outer, b[None, ...].shape[0]


def test_ellipsis_and_newaxis_as_numpy(rng):
    a = rng.normal(size=(2, 3, 4))
    b = rng.normal(size=5)
    expected = a * 2.0
    expected[..., 0] = 1.0
    expected[0, ...] += 0.5
    last, middle, outer, rows = check(ellipses_and_new_axes, a, b)
    assert np.array_equal(a, expected)
    assert np.array_equal(last, expected[..., 1]) and np.array_equal(middle, expected[1, ..., 2])
    assert np.array_equal(outer, np.outer(b, b)) and rows == 1


def test_two_ellipses_are_a_located_error():
    @kd.kernel
    def bad(a: kd.Array[kd.f64, 3]):
        a[..., 0, ...] = 1.0

    with pytest.raises(kd.CompileError, match="single ellipsis") as info:
        bad(np.zeros((2, 2, 2)))
    assert "a[..., 0, ...] = 1.0" in str(info.value)


def test_an_integer_array_index_is_a_located_error():
    @kd.kernel
    def gather(a: kd.Array[kd.f64], idx: kd.Array[kd.i64]):
        return a[idx]

    with pytest.raises(kd.CompileError, match="must be an integer") as info:
        gather(np.arange(5.0), np.array([1, 3]))
    assert "return a[idx]" in str(info.value)

"""``@f.grad``: a func's gradient written by hand replaces its derived one."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.func
def safe_norm(x: kd.f64, y: kd.f64) -> kd.f64:
    return kd.sqrt(x * x + y * y)


@safe_norm.grad
def safe_norm_grad(x: kd.f64, y: kd.f64, g: kd.f64):
    r = kd.sqrt(x * x + y * y)
    if r == 0.0:
        return 0.0, 0.0
    return g * x / r, g * y / r


@kd.kernel
def total_norm(p: kd.Array[kd.f64, 2]) -> kd.f64:
    s = 0.0
    for i in range(p.shape[0]):
        s += safe_norm(p[i, 0], p[i, 1])
    return s


def test_hand_written_gradient_is_used() -> None:
    p = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 1.0]])
    g = kd.grad(total_norm)(p)
    expected = np.array([[0.6, 0.8], [0.0, 0.0], [2**-0.5, 2**-0.5]])
    np.testing.assert_allclose(g, expected)  # the derived gradient would be NaN at 0
    assert total_norm(p) == pytest.approx(5.0 + 2**0.5)
    kd.check_grad(total_norm, p[[0, 2]].copy())


@kd.func
def clipped(x: kd.f64) -> kd.f64:
    return kd.clamp(x, -1.0, 1.0)


@clipped.grad
def clipped_grad(x: kd.f64, g: kd.f64) -> kd.f64:
    return g  # a straight-through estimator


@kd.kernel
def straight_through(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += 2.0 * clipped(x[i])
    return s


def test_straight_through_estimator_in_a_parallel_loop() -> None:
    x = np.array([-3.0, 0.5, 2.0])
    np.testing.assert_allclose(kd.grad(straight_through)(x), [2.0, 2.0, 2.0])
    assert straight_through(x) == pytest.approx(2.0 * (-1.0 + 0.5 + 1.0))

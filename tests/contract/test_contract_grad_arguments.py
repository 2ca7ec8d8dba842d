"""``argnums`` as JAX users write it: negative positions count from the end, a repeated
position gives its gradient again, any order; what is not a position is a TypeError and
a position the kernel lacks a ValueError naming it."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def weighted(x: kd.Array[kd.f64], y: kd.Array[kd.f64, 2], a: kd.f64, b: kd.f64) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += a * kd.sin(x[i]) * x[i] + b * b * y[i, 0] * y[i, 1] + a * b
    return s


def _expected(x: np.ndarray, y: np.ndarray, a: float, b: float) -> tuple:
    d_y = np.zeros_like(y)
    d_y[:, 0], d_y[:, 1] = b * b * y[:, 1], b * b * y[:, 0]
    d_x = a * (np.cos(x) * x + np.sin(x))
    d_a = float(np.sum(np.sin(x) * x) + b * x.size)
    d_b = float(np.sum(2 * b * y[:, 0] * y[:, 1]) + a * x.size)
    return d_x, d_y, d_a, d_b


def test_negative_repeated_and_unordered_argnums(rng) -> None:
    x, y = rng.random(5), rng.random((5, 2))
    d_x, d_y, d_a, d_b = _expected(x, y, 0.7, 1.3)
    assert np.isclose(kd.grad(weighted, -1)(x, y, 0.7, 1.3), d_b, rtol=1e-12)
    np.testing.assert_allclose(kd.grad(weighted, -4)(x, y, 0.7, 1.3), d_x, rtol=1e-12)
    got = kd.grad(weighted, (-3, 0, -2, 1, 0))(x, y, 0.7, 1.3)
    for computed, expected in zip(got, (d_y, d_x, d_a, d_y, d_x)):
        np.testing.assert_allclose(computed, expected, rtol=1e-12)
    assert got[1] is not got[4]  # a repeated position gets an array of its own
    value, (g_a, g_b) = kd.value_and_grad(weighted, [-2, -1])(x, y, 0.7, 1.3)
    assert np.isclose(value, weighted.python(x, y, 0.7, 1.3), rtol=1e-12)
    assert np.isclose(g_a, d_a, rtol=1e-12) and np.isclose(g_b, d_b, rtol=1e-12)
    assert kd.check_grad(weighted, x, y, 0.7, 1.3, argnums=(-4, -3, -1, 0)) < 1.0


@pytest.mark.parametrize(("argnums", "error", "text"), [
    (4, ValueError, "argnums 4 is out of range for a kernel of 4 arguments"),
    (-5, ValueError, "argnums -5 is out of range"),
    ((0, 7), ValueError, "argnums 7 is out of range"),
    ((), TypeError, "argnums must be an int or a tuple of ints"),
    (1.0, TypeError, "argnums must be an int or a tuple of ints, got 1.0"),
    (True, TypeError, "argnums must be an int or a tuple of ints"),
    ("x", TypeError, "argnums must be an int or a tuple of ints"),
])
def test_argnums_that_name_no_argument(argnums, error, text) -> None:
    with pytest.raises(error, match=text):
        kd.grad(weighted, argnums)(np.ones(3), np.ones((3, 2)), 1.0, 1.0)


@kd.kernel
def shifted_total(a: kd.Array[kd.f64, 2], c: kd.Array[kd.f64, 2], w: kd.f64) -> kd.f64:
    return kd.sum(w + (c - a)) + kd.mean(w * kd.sin(c - a))


def test_a_column_of_size_one_at_run_time_broadcasts_under_a_gradient(rng) -> None:
    # the size of (c - a) along its last axis is a's, not c's 1: the gradient of w counts
    # 12 elements (it counted 3, and the mean divided by 3)
    a, c = rng.random((3, 4)), rng.random((3, 1))
    expected = a.size + np.mean(np.sin(c - a))
    assert np.isclose(kd.grad(shifted_total, 2)(a, c, 0.5), expected, rtol=1e-12)
    assert kd.check_grad(shifted_total, a, c, 0.5, argnums=(0, 2)) < 1.0
    # the column itself, as JAX and PyTorch: the adjoint summed along the broadcast axis
    d_c = kd.grad(shifted_total, 1)(a, c, 0.5)
    expected = a.shape[1] + 0.5 * np.mean(np.cos(c - a), axis=1, keepdims=True) / a.shape[0]
    np.testing.assert_allclose(d_c, expected, rtol=1e-12)
    assert kd.check_grad(shifted_total, a, c, 0.5, argnums=(0, 1, 2)) < 1.0
    row = rng.random((1, 4))
    assert kd.check_grad(shifted_total, a, row, 0.5, argnums=(0, 1)) < 1.0
    assert kd.check_grad(shifted_total, row, a, 0.5, argnums=(0, 1)) < 1.0


@kd.kernel
def with_defaults(x: kd.Array[kd.f64], w: kd.f64 = 2.0, p: kd.f64 = 3.0) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += w * x[i] ** 2 + p
    return s


def test_parameters_left_to_their_defaults(rng) -> None:
    x, direction = rng.random(4), rng.standard_normal(4)
    value, tangent = kd.jvp(with_defaults, (x,), (direction,))  # was: the tangent taken as w
    assert np.isclose(value, with_defaults.python(x), rtol=1e-12)
    assert np.isclose(tangent, 4.0 * x @ direction, rtol=1e-12)
    _, along_w = kd.jvp(with_defaults, (x, 1.5), (None, 1.0))
    assert np.isclose(along_w, np.sum(x * x), rtol=1e-12)
    assert np.isclose(kd.grad(with_defaults, -1)(x, w=1.5), 4.0)


def test_calls_with_wrong_arguments_are_type_errors() -> None:
    x = np.ones(4)
    for call in (with_defaults, with_defaults.python, kd.grad(with_defaults)):
        with pytest.raises(TypeError, match=r"missing 1 required argument: 'x'$"):
            call()
    with pytest.raises(TypeError, match=r"with_defaults\(\) takes 3 arguments, got 4"):
        kd.grad(with_defaults)(x, 1.0, 2.0, 3.0)  # was an AttributeError
    with pytest.raises(TypeError, match="kd.check_grad needs a @kd.kernel"):
        kd.check_grad(with_defaults.python, x)

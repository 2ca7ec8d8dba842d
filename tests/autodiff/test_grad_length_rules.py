"""Adjoint rules that see how an operand was made: ``sqrt(dot(d, d) + c)`` gives d its
adjoint ``(g / length) d`` in one update (not through the sum, the square root and the
dot product one by one), and ``d / splat(length)`` gives the length ``-dot(g, q) /
length`` at once (not component by component through the splat). Gradients against
central finite differences of the kernels' own Python functions in float64, with a
component of d zero, lengths near zero, and the cases where the rules must not apply (a
varying addend, a routed adjoint, the squared length used elsewhere too)."""

from __future__ import annotations

import numpy as np
import pytest
from finite_differences import central_differences

import kdsl as kd
from kdsl.runtime.vjp_kernel import vjp_kernel


@kd.kernel
def directions(x: kd.Array[kd.vec2d], w: kd.Array[kd.vec2d], eps: kd.f64) -> kd.f64:
    """Unit vectors between neighbours weighted by w, and the springs' stretches."""
    total = 0.0
    n = x.shape[0]
    for i in kd.prange(n):
        d = x[(i + 1) % n] - x[i]
        length = kd.sqrt(kd.dot(d, d) + eps)
        direction = d / length
        total += kd.dot(w[i], direction) * (length - 0.25) + 3.0 * length * length
    return total


@kd.kernel
def plain_lengths(x: kd.Array[kd.vec3d], y: kd.Array[kd.f64]) -> kd.f64:
    """Without an addend; with a varying one (y); the squared length also used alone."""
    total = 0.0
    for i in kd.prange(x.shape[0]):
        d = x[i] - x[0] * 0.5
        r2 = kd.dot(d, d)
        total += kd.sqrt(r2) * y[i] + kd.sqrt(r2 + y[i] * y[i]) + r2 * y[i]
    return total


@kd.kernel
def routed_lengths(x: kd.Array[kd.vec2d], cap: kd.f64) -> kd.f64:
    """A length and a direction whose adjoints a min may zero."""
    total = 0.0
    for i in kd.prange(x.shape[0]):
        d = x[i]
        length = kd.sqrt(kd.dot(d, d) + 1e-9)
        q = d / length
        total += kd.min(length, cap) + kd.min(q.x, 0.5)
    return total


def _positions(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, 2))
    x[3, 0] = x[2, 0]  # d with a zero component
    x[6] = x[5] + np.array([2e-3, -1e-3])  # a short spring
    x[8] = x[7] + np.array([0.0, 3e-3])  # short, and a zero component
    return x


@pytest.mark.parametrize("eps", [1e-12, 1e-4])
def test_length_and_direction_against_finite_differences(eps: float) -> None:
    x = _positions(11, 5)
    w = np.random.default_rng(6).normal(size=(11, 2))
    gx, gw = kd.grad(directions, (0, 1))(x, w, eps)
    expected_x = central_differences(lambda p: directions.python(p, w, eps), x, eps=1e-7)
    expected_w = central_differences(lambda p: directions.python(x, p, eps), w)
    np.testing.assert_allclose(gx, expected_x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gw, expected_w, rtol=1e-6, atol=1e-7)
    assert np.abs(expected_x).max() > 1.0


def test_length_and_direction_through_a_tape() -> None:
    x, w = _positions(11, 7), np.random.default_rng(8).normal(size=(11, 2))
    xs, ws = kd.array(x, requires_grad=True), kd.array(w, requires_grad=True)
    with kd.Tape() as tape:
        loss = directions(xs, ws, 1e-4)
    tape.backward(loss)
    assert float(loss) == pytest.approx(directions.python(x, w, 1e-4), rel=1e-12)
    expected = central_differences(lambda p: directions.python(p, w, 1e-4), x, eps=1e-7)
    np.testing.assert_allclose(xs.grad.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_lengths_the_rule_leaves_alone() -> None:
    rng = np.random.default_rng(9)
    x = rng.normal(size=(9, 3))
    x[4, 1] = 0.5 * x[0, 1]  # a zero component of d
    y = rng.uniform(0.5, 2.0, 9)
    gx, gy = kd.grad(plain_lengths, (0, 1))(x, y)
    np.testing.assert_allclose(gx, central_differences(lambda p: plain_lengths.python(p, y), x),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gy, central_differences(lambda p: plain_lengths.python(x, p), y),
                               rtol=1e-6, atol=1e-6)


def test_routed_adjoints_stay_guarded() -> None:
    x = _positions(10, 11)
    x[9] = 0.0  # length sqrt(1e-9): a direction of 0 / tiny, its adjoint routed to zero
    grad = kd.grad(routed_lengths)(x, 1.0)
    assert np.isfinite(grad).all()
    moved = [k for k in range(10) if k != 9]
    expected = central_differences(lambda p: routed_lengths.python(p, 1.0), x[moved], eps=1e-7)
    np.testing.assert_allclose(grad[moved], expected, rtol=1e-5, atol=1e-5)


def test_rules_leave_no_halves_and_doubles() -> None:
    """The product's code has the rules' forms: no 0.5 (the square root's derivative)
    and no 2.0 (dot(d, d)'s) in the adjoint of the length."""
    x, w = _positions(11, 5), np.zeros((11, 2))
    text = vjp_kernel(directions, (0,)).ir(x, w, 1e-4, np.zeros_like(x), 1.0)
    assert "0.5 " not in text and "2.0 " not in text


@kd.kernel
def inverse_powers(x: kd.Array[kd.vec3d], c: kd.f64) -> kd.f64:
    """Lennard-Jones-like: the reciprocal of a squared distance, its powers, and a
    reciprocal of a scalar argument (whose adjoint is -g r r, without a division)."""
    total = 0.0
    n = x.shape[0]
    for i in kd.prange(n):
        d = x[(i + 2) % n] - x[i]
        inv = 1.0 / (kd.dot(d, d) + 0.1)
        total += inv * inv * inv - inv + 1.0 / (c + x[i].z * x[i].z)
    return total


def test_reciprocals_against_finite_differences() -> None:
    x = np.random.default_rng(12).normal(size=(13, 3))
    x[4, 2] = x[2, 2]  # a zero component of d
    gx, gc = kd.grad(inverse_powers, (0, 1))(x, 0.7)
    expected_x = central_differences(lambda p: inverse_powers.python(p, 0.7), x)
    expected_c = central_differences(lambda p: inverse_powers.python(x, float(p[0])),
                                     np.array([0.7]))
    np.testing.assert_allclose(gx, expected_x, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gc, expected_c[0], rtol=1e-6)


def test_reciprocal_of_whole_arrays() -> None:
    a = np.random.default_rng(13).uniform(0.5, 2.0, 17)

    def loss(v: kd.Array[kd.f64]) -> kd.f64:
        return kd.sum(1.0 / v * v[0])

    np.testing.assert_allclose(kd.grad(kd.kernel(loss))(a),
                               central_differences(lambda p: float(np.sum(1.0 / p * p[0])), a),
                               rtol=1e-6)

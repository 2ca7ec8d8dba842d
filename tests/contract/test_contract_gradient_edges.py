"""API.md section 8 at the edges JAX and PyTorch users meet: derivatives at points where
a naive rule gives NaN (a power whose exponent is 0 at a base of 0)."""

from __future__ import annotations

import numpy as np

import kdsl as kd


@kd.kernel
def powers_by_position(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] ** i + x[i] ** 0.0  # x ** 0 is 1 everywhere: its derivative is 0
    return s


@kd.kernel
def whole_array_powers(x: kd.Array[kd.f64], p: kd.f64) -> kd.f64:
    return kd.sum(x ** 0.0 + x ** p)


def test_a_zero_exponent_at_a_zero_base_has_a_zero_derivative(rng) -> None:
    # was NaN: 0 * 0 ** -1 (jax.grad and torch give 0 here, and x ** 1 at 0 gives 1)
    x = np.array([0.0, 0.0, 0.0, rng.random() + 1.0])
    expected = np.array([0.0, 1.0, 0.0, 3.0 * x[3] ** 2])
    np.testing.assert_allclose(kd.grad(powers_by_position)(x), expected, rtol=1e-12)
    _, tangent = kd.jvp(powers_by_position, (x,), (np.ones(4),))
    assert np.isclose(tangent, expected.sum(), rtol=1e-12)
    np.testing.assert_array_equal(kd.grad(whole_array_powers)(x, 0.0), np.zeros(4))
    _, tangent = kd.jvp(whole_array_powers, (x, 0.0), (np.ones(4), None))
    assert tangent == 0.0
    y = rng.random(4) + 0.5  # away from 0, the derivative in the exponent still flows
    assert kd.check_grad(whole_array_powers, y, 0.0, argnums=(0, 1)) < 1.0

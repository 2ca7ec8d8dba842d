"""Kernels that update arrays in place get exact gradients; the arguments they update are
left as the gradient call found them."""

from __future__ import annotations

import numpy as np

import kdsl as kd

RNG = np.random.default_rng(11)


@kd.kernel
def doubled_sum(x: kd.Array[kd.f64]) -> kd.f64:
    for i in range(x.shape[0]):
        x[i] = x[i] * x[i] + 1.0
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[(i + 1) % x.shape[0]]
    return s


def test_overwritten_values_are_restored() -> None:
    x = RNG.random(5)
    before = x.copy()
    kd.check_grad(doubled_sum, x)
    g = kd.grad(doubled_sum)(x)
    np.testing.assert_array_equal(x, before)
    y = before * before + 1.0
    expected = 2 * before * (np.roll(y, -1) + np.roll(y, 1))
    np.testing.assert_allclose(g, expected, rtol=1e-12)


@kd.kernel
def leapfrog(x: kd.Array[kd.f64], v: kd.Array[kd.f64], k: kd.f64, steps: kd.i32) -> kd.f64:
    n = x.shape[0]
    for _step in range(steps):
        for i in kd.prange(n):
            left = x[(i + n - 1) % n]
            right = x[(i + 1) % n]
            v[i] += 0.1 * (k * (left + right - 2.0 * x[i]) - kd.sin(x[i]))
        for i in kd.prange(n):
            x[i] += 0.1 * v[i]
    e = 0.0
    for i in kd.prange(n):
        e += x[i] * x[i] + 0.5 * v[i] * v[i]
    return e


def test_time_stepping_in_place_in_one_kernel() -> None:
    x = RNG.random(6)
    v = RNG.random(6) - 0.5
    x0, v0 = x.copy(), v.copy()
    kd.check_grad(leapfrog, x, v, 0.7, 8, argnums=(0, 1, 2))
    kd.grad(leapfrog, (0, 1, 2))(x, v, 0.7, 8)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(v, v0)


@kd.kernel
def through_temporary(x: kd.Array[kd.f64]) -> kd.f64:
    n = x.shape[0]
    tmp = kd.zeros(n, dtype=kd.f64)
    for i in kd.prange(n):
        tmp[i] = kd.exp(x[i]) * x[i]
    s = 0.0
    for i in range(n):
        tmp[i] = tmp[i] * tmp[(i + 1) % n]
        s += tmp[i]
    return s


def test_temporary_array_written_and_read() -> None:
    kd.check_grad(through_temporary, RNG.random(7))


@kd.kernel
def output_and_state(x: kd.Array[kd.f64], out: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    s = 0.0
    for i in range(x.shape[0]):
        out[i] = x[i] * w
        s += out[i] * out[i]
    return s


def test_a_written_argument_that_is_read_back() -> None:
    x = RNG.random(4)
    kd.check_grad(output_and_state, x, np.zeros(4), 1.5, argnums=(0, 2))


@kd.kernel
def while_updating(x: kd.Array[kd.f64]) -> kd.f64:
    k = 0
    while x[0] < 5.0 and k < 30:
        for i in range(x.shape[0]):
            x[i] = x[i] * 1.3 + 0.1 * x[(i + 1) % x.shape[0]]
        k += 1
    return x[0] + x[1]


def test_while_loop_updating_an_array() -> None:
    kd.check_grad(while_updating, RNG.random(3) + 0.5)

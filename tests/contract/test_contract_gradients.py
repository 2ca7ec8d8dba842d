"""API.md section 8 as JAX and PyTorch users write it: the gradient of every
differentiable math function, in a loop and as a whole-array expression, in reverse and
forward mode, against float64 central differences; kernels reading global arrays and
drawing random numbers."""

from __future__ import annotations

import math

import numpy as np

import kdsl as kd

WEIGHTS = np.linspace(0.5, 2.0, 9)


@kd.kernel
def every_function_in_a_loop(x: kd.Array[kd.f64], y: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        a = x[i]
        b = y[i]
        w = WEIGHTS[i]  # a global array: a constant of the gradient
        s += w * (kd.sqrt(a) + kd.sin(a) + kd.cos(a) + kd.tan(a) + kd.asin(a) + 2.0 * kd.acos(a))
        s += 3.0 * kd.atan(a) + 5.0 * kd.atan2(a, b) + kd.sinh(a) + 0.5 * kd.cosh(a) + 7.0 * kd.tanh(a)
        s += 1.5 * kd.exp(a) + 0.25 * kd.exp2(a) + 2.5 * kd.expm1(a) + 1.25 * kd.log(a)
        s += 0.75 * kd.log2(a) + 1.75 * kd.log10(a) + 0.6 * kd.log1p(a) + 0.4 * kd.pow(a, b)
        s += 1.1 * kd.erf(a) + 0.3 * kd.erfc(a) + 0.9 * kd.hypot(a, b) + 0.8 * kd.fma(a, b, a)
        s += 0.7 * kd.copysign(a, b - 0.5) + 0.2 * kd.abs(a - 0.5) + 0.33 * kd.min(a, b)
        s += 0.66 * kd.max(a, b) + 1.3 * kd.clamp(a, 0.3, 0.6) + a ** b + a ** 3
        s += 0.1 * math.sqrt(a) + 0.2 * math.exp(b) + abs(b - 0.4) + a / b + a % 0.3
    return s


@kd.kernel
def every_function_on_arrays(a: kd.Array[kd.f64], b: kd.Array[kd.f64]) -> kd.f64:
    w = WEIGHTS
    s = kd.sum(w * (kd.sqrt(a) + kd.sin(a) + kd.cos(a) + kd.tan(a) + kd.asin(a) + 2.0 * kd.acos(a)))
    s += kd.sum(3.0 * kd.atan(a) + 5.0 * kd.atan2(a, b) + kd.sinh(a) + 0.5 * kd.cosh(a))
    s += kd.sum(7.0 * kd.tanh(a) + 1.5 * kd.exp(a) + 0.25 * kd.exp2(a) + 2.5 * kd.expm1(a))
    s += kd.sum(1.25 * kd.log(a) + 0.75 * kd.log2(a) + 1.75 * kd.log10(a) + 0.6 * kd.log1p(a))
    s += kd.sum(0.4 * kd.pow(a, b) + 1.1 * kd.erf(a) + 0.3 * kd.erfc(a) + 0.9 * kd.hypot(a, b))
    s += kd.sum(0.8 * kd.fma(a, b, a) + 0.7 * kd.copysign(a, b - 0.5) + 0.2 * kd.abs(a - 0.5))
    s += kd.sum(0.33 * kd.min(a, b) + 0.66 * kd.max(a, b) + 1.3 * kd.clamp(a, 0.3, 0.6))
    s += kd.sum(a ** b + a ** 3 + 0.1 * np.sqrt(a) + 0.2 * np.exp(b) + abs(b - 0.4) + a / b)
    return s


def test_every_math_function_against_finite_differences(rng) -> None:
    x = rng.random(9) * 0.8 + 0.1
    y = rng.random(9) * 0.8 + 0.1
    tx, ty = rng.standard_normal(9), rng.standard_normal(9)
    for kernel in (every_function_in_a_loop, every_function_on_arrays):
        assert np.isclose(kernel(x, y), kernel.python(x, y), rtol=1e-12)
        kd.check_grad(kernel, x, y, argnums=(0, 1))
        d_x, d_y = kd.grad(kernel, (0, 1))(x, y)
        value, tangent = kd.jvp(kernel, (x, y), (tx, ty))
        assert np.isclose(value, kernel(x, y), rtol=1e-12)
        assert np.isclose(tangent, d_x @ tx + d_y @ ty, rtol=1e-10)


@kd.kernel
def noisy_energy(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] * kd.random() + kd.sin(x[i]) * kd.random()
    return s


def test_gradient_of_a_kernel_drawing_random_numbers_sees_the_calls_draws(rng) -> None:
    x = rng.random(6)
    kd.seed(11)
    value = noisy_energy(x)
    kd.seed(11)
    same_value, d_x = kd.value_and_grad(noisy_energy)(x)
    kd.seed(11)
    jvp_value, along_ones = kd.jvp(noisy_energy, (x,), (np.ones(6),))
    assert value == same_value == jvp_value
    assert np.isclose(d_x.sum(), along_ones, rtol=1e-12)
    assert np.all(d_x > 0.0)  # uniform draws in [0, 1) times positive derivatives

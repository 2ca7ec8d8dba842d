"""API.md section 8 as JAX and PyTorch users write it: the gradient of every
differentiable math function, in a loop and as a whole-array expression, in reverse and
forward mode, against float64 central differences; kernels reading global arrays and
drawing random numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kdsl as kd

WEIGHTS = np.linspace(0.5, 2.0, 9)


@kd.kernel
def every_function_in_a_loop(x: kd.Array[kd.f64], y: kd.Array[kd.f64]) -> kd.f64:
    # with tests/autodiff/test_grad_constructs.py (tanh, exp, cos, tan, abs, min, max,
    # clamp, floor, **, /, %), every differentiable math function
    s = 0.0
    for i in kd.prange(x.shape[0]):
        a = x[i]
        b = y[i]
        w = WEIGHTS[i]  # a global array: a constant of the gradient
        s += w * (kd.sqrt(a) + kd.sin(a) + kd.asin(a) + 2.0 * kd.acos(a) + 3.0 * kd.atan(a))
        s += 5.0 * kd.atan2(a, b) + kd.sinh(a) + 0.5 * kd.cosh(a) + 0.25 * kd.exp2(a)
        s += 2.5 * kd.expm1(a) + 1.25 * kd.log(a) + 0.75 * kd.log2(a) + 1.75 * kd.log10(a)
        s += 0.6 * kd.log1p(a) + 0.4 * kd.pow(a, b) + 1.1 * kd.erf(a) + 0.3 * kd.erfc(a)
        s += 0.9 * kd.hypot(a, b) + 0.8 * kd.fma(a, b, a) + 0.7 * kd.copysign(a, b - 0.5)
        s += 0.1 * math.sqrt(a) + 0.2 * math.exp(b) + a ** b
    return s


@kd.kernel
def several_operand_functions_on_arrays(a: kd.Array[kd.f64, 2], b: kd.Array[kd.f64]) -> kd.f64:
    # elementwise adjoints come from the scalar rules: those of several operands, or
    # routing the adjoint to one of them, are the ones broadcasting changes
    w = WEIGHTS[None, :]
    s = kd.sum(w * (5.0 * kd.atan2(a, b[:, None]) + 0.4 * kd.pow(a, b[:, None])))
    s += kd.sum(0.9 * kd.hypot(a, b[:, None]) + 0.8 * kd.fma(a, b[:, None], a))
    s += kd.sum(0.7 * kd.copysign(a, b[:, None] - 0.5) + 0.33 * kd.min(a, b[:, None]))
    s += kd.sum(0.66 * kd.max(a, b[:, None]) + 1.3 * kd.clamp(a, 0.3, 0.6) + a ** b[:, None])
    s += kd.sum(kd.where(a > b[:, None], a * a, kd.sqrt(a)) + a % 0.3 + np.exp(b)[:, None] / a)
    return s


def test_every_math_function_against_finite_differences(rng) -> None:
    x = rng.random(9) * 0.8 + 0.1
    y = rng.random(9) * 0.8 + 0.1
    tx, ty = rng.standard_normal(9), rng.standard_normal(9)
    assert np.isclose(every_function_in_a_loop(x, y), every_function_in_a_loop.python(x, y),
                      rtol=1e-12)
    kd.check_grad(every_function_in_a_loop, x, y, argnums=(0, 1))
    a = rng.random((3, 9)) * 0.8 + 0.1
    b = rng.random(3) * 0.8 + 0.1
    assert np.isclose(several_operand_functions_on_arrays(a, b),
                      several_operand_functions_on_arrays.python(a, b), rtol=1e-12)
    kd.check_grad(several_operand_functions_on_arrays, a, b, argnums=(0, 1))
    # forward mode differentiates whole-array expressions as the loops they lower to
    d_x, d_y = kd.grad(every_function_in_a_loop, (0, 1))(x, y)
    value, tangent = kd.jvp(every_function_in_a_loop, (x, y), (tx, ty))
    assert np.isclose(value, every_function_in_a_loop(x, y), rtol=1e-12)
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


@kd.kernel
def springs(x: kd.Array[kd.f64], v: kd.Array[kd.f64], k: kd.f64, steps: kd.i32) -> kd.f64:
    for _ in range(steps):  # whole-array time-stepping, as in NumPy or PyTorch
        v -= 0.1 * k * x
        x += 0.1 * v
        if k > 1.0:
            v *= 0.99
    return kd.sum(x * x)


@kd.kernel
def leapfrog(x: kd.Array[kd.f64], v: kd.Array[kd.f64], dt: kd.f64) -> kd.f64:
    v -= dt * x  # x is read where its adjoint needs no values of x: it may be updated
    x += dt * v
    return kd.sum(x * x) + 0.5 * kd.sum(v * v)


def test_whole_array_time_stepping_in_loops_and_branches(rng) -> None:
    x, v = rng.random(5), rng.random(5)
    for k in (1.5, 0.5):
        kd.check_grad(springs, x, v, k, 30, argnums=(0, 1, 2))
    d_x, _, d_k = kd.grad(springs, (0, 1, 2))(x, v, 1.5, 30)
    direction = rng.standard_normal(x.shape)
    _, tangent = kd.jvp(springs, (x, v, 1.5, 30), (direction, None, 1.0, None))
    assert np.isclose(tangent, d_x @ direction + d_k, rtol=1e-10)
    kd.check_grad(leapfrog, x, v, 0.1, argnums=(0, 1))


def test_in_place_whole_array_steps_recorded_by_a_tape(rng) -> None:
    x0, v0 = rng.random(6), rng.random(6)
    x = kd.array(x0, requires_grad=True)
    v = kd.array(v0, requires_grad=True)
    with kd.Tape() as tape:
        for _ in range(3):
            leapfrog(x, v, 0.1)
        loss = leapfrog(x, v, 0.1)
    tape.backward(loss)

    def final_loss(start: np.ndarray) -> float:
        xs, vs = start.copy(), v0.copy()
        for _ in range(3):
            leapfrog(xs, vs, 0.1)
        return leapfrog(xs, vs, 0.1)

    eps = 1e-6
    numeric = [(final_loss(x0 + eps * e) - final_loss(x0 - eps * e)) / (2 * eps) for e in np.eye(6)]
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6)


@kd.kernel
def fixed_target_loss(x: kd.Array[kd.f64], w: kd.Array[kd.f64, 2]) -> kd.f64:
    target = kd.stop_gradient(x * 2.0)  # as jax.lax.stop_gradient or torch's detach()
    return kd.sum((w @ x - target) ** 2) + kd.sum(x * kd.stop_gradient(x))


def test_stop_gradient_of_arrays(rng) -> None:
    x, w = rng.random(3), rng.random((3, 3))
    assert np.isclose(fixed_target_loss(x, w), fixed_target_loss.python(x, w), rtol=1e-12)
    d_x, d_w = kd.grad(fixed_target_loss, (0, 1))(x, w)
    residual = w @ x - 2.0 * x
    np.testing.assert_allclose(d_x, 2.0 * w.T @ residual + x, rtol=1e-12)
    np.testing.assert_allclose(d_w, 2.0 * np.outer(residual, x), rtol=1e-12)
    _, tangent = kd.jvp(fixed_target_loss, (x, w), (np.ones(3), None))
    assert np.isclose(tangent, d_x.sum(), rtol=1e-12)


@kd.kernel
def diffuse(u: kd.Array[kd.f64, 2], k: kd.f64, steps: kd.i32) -> kd.f64:
    for _ in range(steps):  # slice assignments into the array itself, in a time loop
        u[1:-1, 1:] = u[1:-1, 1:] + k * (u[2:, 1:] - 2.0 * u[1:-1, 1:] + u[:-2, 1:])
        u.T[0, ::-1] = kd.cos(u[::-1, 1])
    row = u[1, 1:]
    for j in range(row.shape[0]):
        row[j] = kd.sin(row[j])
    return kd.sum(u * kd.sin(u))


def test_updates_through_views_of_the_differentiated_array(rng) -> None:
    u = rng.random((5, 4))
    kd.check_grad(diffuse, u, 0.1, 8, argnums=(0, 1))


@kd.func
def clipped(x: kd.f64) -> kd.f64:
    return kd.min(x, 1.0)


@clipped.grad
def clipped_grad(x: kd.f64, g: kd.f64) -> kd.f64:
    return g  # a straight-through estimator: not the derivative of the body


@kd.func
def soft_length(v: kd.vec3d) -> kd.f64:
    return kd.sqrt(kd.dot(v, v) + 1e-3) * WEIGHTS[0]


@soft_length.grad
def soft_length_grad(v: kd.vec3d, g: kd.f64):
    return 0.5 * g * WEIGHTS[0] * v / kd.sqrt(kd.dot(v, v) + 1e-3)  # half, on purpose


@kd.kernel
def hand_written(x: kd.Array[kd.f64], p: kd.Array[kd.vec3d], n: kd.i32) -> kd.f64:
    s = 0.0
    for i in kd.prange(p.shape[0]):
        j = 0
        while j < n:
            s += soft_length(p[i] * (j + 1.0)) + 2.0 * clipped(x[i] * (j + 1.0))
            j += 1
    return s


def test_forward_mode_follows_hand_written_gradients(rng) -> None:
    x, p = rng.random(4) + 0.3, rng.random((4, 3))
    d_x, d_p = kd.grad(hand_written, (0, 1))(x, p, 3)
    np.testing.assert_allclose(d_x, np.full(4, 12.0))  # 2 * (1 + 2 + 3), clipped or not
    tx, tp = rng.standard_normal(4), rng.standard_normal((4, 3))
    _, tangent = kd.jvp(hand_written, (x, p, 3), (tx, tp, None))
    assert np.isclose(tangent, d_x @ tx + np.sum(d_p * tp), rtol=1e-12)


@kd.kernel
def recurrent(h0: kd.Array[kd.f64], w: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2],
              steps: kd.i32) -> kd.f64:
    h = kd.zeros_like(h0)
    h[:] = h0
    for _ in range(steps):
        h[:] = kd.tanh(w @ h)  # a matrix product assigned in a loop
        out[...] = w * h[None, :]
    return kd.sum(h * h) + kd.sum(out)


@kd.kernel
def rebound(h0: kd.Array[kd.f64], w: kd.Array[kd.f64, 2], steps: kd.i32) -> kd.f64:
    h = h0
    for _ in range(steps):
        h = kd.tanh(w @ h)
    return kd.sum(h * h)


def test_matrix_products_in_loops_and_arrays_bound_again(rng) -> None:
    h0, w = rng.random(3), rng.random((3, 3))
    kd.check_grad(recurrent, h0, w, np.zeros((3, 3)), 4, argnums=(0, 1))
    line = rebound.py_function.__code__.co_firstlineno + 4
    for derivative in (lambda: kd.grad(rebound, (0, 1))(h0, w, 4),
                       lambda: kd.jvp(rebound, (h0, w, 4), (h0, None, None))):
        with pytest.raises(kd.CompileError, match="bound again inside a loop") as caught:
            derivative()  # was a zero gradient
        assert caught.value.lineno == line


SCALE = np.array([0.5, 2.0, -1.5])


@kd.kernel
def weighted_copy_loss(src: kd.Array[kd.f64], dst: kd.Array[kd.f64]) -> kd.f64:
    dst[:] = src * SCALE  # a global array read by a kernel whose arguments share memory
    return kd.sum(dst * dst)


def test_gradient_of_a_kernel_reading_a_global_array_with_aliased_arguments() -> None:
    x = np.array([0.3, -1.2, 0.8])
    expected = 2.0 * x * SCALE * SCALE
    assert np.allclose(kd.grad(weighted_copy_loss)(x.copy(), np.zeros(3)), expected)
    shared = x.copy()  # the same array as input and output
    assert np.allclose(kd.grad(weighted_copy_loss)(shared, shared), expected)

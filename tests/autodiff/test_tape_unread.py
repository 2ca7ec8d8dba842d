"""kd.Tape copies an array a call writes only where its value before the call is read on
the way back: by the call's vector-Jacobian product (which for an update
``x[i] += dt * v[i]`` with a constant step reads adjoints only), or by a call recorded
since the array was last written. Gradients against float64 central differences of the
same program, and the bytes the tape keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from finite_differences import central_differences

import kdsl as kd

RNG = np.random.default_rng(37)
N = 6


@kd.kernel
def forces(x: kd.Array[kd.f64], f: kd.Array[kd.f64]):
    n = x.shape[0]
    for i in kd.prange(n):
        f[i] = kd.sin(x[(i + 1) % n]) - x[i] * x[i]


@kd.kernel
def integrate(x: kd.Array[kd.f64], v: kd.Array[kd.f64], f: kd.Array[kd.f64], dt: kd.f64):
    """Linear in x, v and f: its product with a constant dt reads none of them."""
    for i in kd.prange(x.shape[0]):
        v[i] += dt * f[i]
        x[i] += dt * v[i]


@kd.kernel
def mean_square(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] * x[i]
    return s / x.shape[0]


@kd.kernel
def fill(y: kd.Array[kd.f64], value: kd.f64):
    for i in kd.prange(y.shape[0]):
        y[i] = value + 0.1 * i


@kd.kernel
def pull(x: kd.Array[kd.f64], y: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        x[i] += 0.1 * kd.cos(x[i] * y[i])


def gradient_and_tape(program: Callable[[Any], Any], x0: np.ndarray) -> kd.Tape:
    x = kd.array(x0, requires_grad=True)
    with kd.Tape() as tape:
        loss = program(x)
    final = x.numpy().copy()
    tape.backward(loss)
    np.testing.assert_array_equal(x.numpy(), final)
    expected = central_differences(lambda y: float(program(y.copy())), x0)
    assert np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)
    return tape


def test_an_update_with_a_constant_step_copies_only_what_the_force_kernel_reads() -> None:
    steps = 10

    def program(x: Any) -> Any:
        v, f = np.zeros(N), np.zeros(N)
        for _ in range(steps):
            forces(x, f)
            integrate(x, v, f, 0.05)
        return mean_square(x)

    tape = gradient_and_tape(program, RNG.random(N))
    # x before each update (forces' product reads it); v and f never (integrate's
    # product reads neither): one scratch array each; the loss's gradient
    assert tape.memory_bytes == steps * N * 8 + 2 * N * 8 + N * 8


def test_a_differentiated_step_makes_the_product_read_the_velocities() -> None:
    steps = 6

    def through_step(x: Any) -> Any:
        v, f = np.zeros(N), np.zeros(N)
        dt = mean_square(x)  # a kd.Tape.Scalar: the step is differentiated
        for _ in range(steps):
            forces(x, f)
            integrate(x, v, f, dt)
        return mean_square(x)

    tape = gradient_and_tape(through_step, RNG.random(N) * 0.5)
    # the product of integrate reads x, v and f (d dt = d v . f + d x . v): a copy of
    # each per step; the two gradients of mean_square kept
    assert tape.memory_bytes == steps * 3 * N * 8 + 2 * N * 8


def test_a_constant_array_refilled_each_step_is_copied_for_the_call_that_read_it() -> None:
    y = np.zeros(N)

    def program(x: Any) -> Any:
        for k in range(5):
            fill(y, 0.5 + k)  # not differentiated; pull read the value it overwrites
            pull(x, y)
        return mean_square(x)

    gradient_and_tape(program, RNG.random(N))

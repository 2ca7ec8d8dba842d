"""kd.Tape records a call like the one before it (same kernel, same arrays, plain
scalars) without deciding again what to copy (kdsl/runtime/tape_repeat.py): gradients
of time loops against float64 central differences of the same program, and the cases
where a call that looks alike must not be recorded as the one before was (an array
given requires_grad=True on the way, a global the kernel reads changed, the same array
passed twice, a TapeScalar argument, a call that fails)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from finite_differences import central_differences

import kdsl as kd

RNG = np.random.default_rng(31)
SCALE = 1.0


@kd.kernel
def total_square(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] * x[i]
    return s


@kd.kernel
def step(x: kd.Array[kd.f64], v: kd.Array[kd.f64], f: kd.Array[kd.f64],
         c: kd.Array[kd.f64], dt: kd.f64):
    """``f`` overwritten before it is read (passed as a scratch array, not copied)."""
    n = x.shape[0]
    for i in kd.prange(n):
        f[i] = kd.sin(x[(i + 1) % n]) * c[i] - x[i] * v[i]
    for i in kd.prange(n):
        v[i] += dt * f[i]
        x[i] += dt * v[i]


@kd.kernel
def scaled_step(x: kd.Array[kd.f64], v: kd.Array[kd.f64], dt: kd.f64):
    """Reads the global SCALE: a new value recompiles it."""
    for i in kd.prange(x.shape[0]):
        v[i] -= dt * SCALE * kd.sin(x[i])
        x[i] += dt * v[i]


@kd.kernel
def pair_step(a: kd.Array[kd.f64], b: kd.Array[kd.f64], dt: kd.f64):
    for i in kd.prange(a.shape[0]):
        a[i] += dt * kd.cos(b[i])
        b[i] *= 1.0 + dt * a[i]


@kd.kernel
def grow(x: kd.Array[kd.f64], s: kd.f64):
    for i in kd.prange(x.shape[0]):
        x[i] = x[i] * (1.0 + 0.1 * kd.sin(s)) + 0.01 * s


@kd.kernel(debug=True)
def bounded_step(x: kd.Array[kd.f64], limit: kd.f64):
    for i in kd.prange(x.shape[0]):
        x[i] = x[i] * 1.5
        assert x[i] < limit, "too large"


def check_tape(program: Callable[[Any], Any], x0: np.ndarray) -> kd.Tape:
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


def repeated_calls(tape: kd.Tape) -> int:
    return sum(call.repeat is not None for call in tape._calls)


@pytest.mark.parametrize("wrap", [kd.array, np.asarray], ids=["kdsl", "numpy"])
def test_a_time_loop_of_one_kernel_with_a_new_step_each_call(wrap: Callable) -> None:
    n = 7
    c = wrap(RNG.random(n) + 0.5)
    dts = [0.05 + 0.01 * k for k in range(12)]

    def program(x: Any) -> Any:
        v = wrap(np.zeros(n))
        f = wrap(np.zeros(n))
        for dt in dts:
            step(x, v, f, c, dt)
        return total_square(x)

    tape = check_tape(program, RNG.random(n))
    assert repeated_calls(tape) == len(dts) - 2


def test_two_kernels_in_turn_then_each_repeated() -> None:
    n = 6
    c = RNG.random(n) + 0.5

    def program(x: Any) -> Any:
        v, f = np.zeros(n), np.zeros(n)
        for _ in range(3):
            step(x, v, f, c, 0.1)
            scaled_step(x, v, 0.05)
        for _ in range(4):
            scaled_step(x, v, 0.05)
        for _ in range(4):
            step(x, v, f, c, 0.1)
        return total_square(x)

    tape = check_tape(program, RNG.random(n))
    # the last scaled_step of the first loop and the first of the second are alike
    assert repeated_calls(tape) == 3 + 2


def test_an_array_given_requires_grad_on_the_way_is_differentiated_from_then() -> None:
    n = 5
    x0, c0 = RNG.random(n), RNG.random(n) + 0.5

    def program(x: Any, early: Any, late: Any) -> Any:
        v, f = np.zeros(n), np.zeros(n)
        for _ in range(4):
            step(x, v, f, early, 0.1)
        if isinstance(late, kd.DeviceArray):
            late.requires_grad = True
        for _ in range(4):
            step(x, v, f, late, 0.1)
        return total_square(x)

    x = kd.array(x0)
    c = kd.array(c0)
    with kd.Tape() as tape:
        loss = program(x, c, c)
    tape.backward(loss)
    expected = central_differences(
        lambda y: float(program(x0.copy(), c0.copy(), y.copy())), c0)
    np.testing.assert_allclose(c.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("restored", [True, False])
def test_a_global_changed_between_recorded_calls_is_refused_by_backward(restored: bool) -> None:
    """The calls after the change run the kernel compiled again; backward would run the
    product of the kernel as it reads the global then, for every call."""
    global SCALE
    x = kd.array(RNG.random(6), requires_grad=True)
    v = np.full(6, 0.3)
    expected = x.numpy().copy()
    w = v.copy()
    try:
        with kd.Tape() as tape:
            for k in range(8):
                SCALE = 1.0 if k < 4 else 2.5
                scaled_step(x, v, 0.1)
                w -= 0.1 * SCALE * np.sin(expected)
                expected += 0.1 * w
            loss = total_square(x)
        np.testing.assert_allclose(x.numpy(), expected, rtol=1e-12)
        if restored:
            SCALE = 1.0
        with pytest.raises(ValueError, match="scaled_step changed after a call of it"):
            tape.backward(loss)
    finally:
        SCALE = 1.0


def test_the_same_array_twice() -> None:
    def program(x: Any) -> Any:
        for _ in range(6):
            pair_step(x, x, 0.1)
        return total_square(x)

    check_tape(program, RNG.random(5) * 0.5)


def test_a_scalar_a_recorded_call_returned_passes_its_gradient_back() -> None:
    def program(x: Any) -> Any:
        s = total_square(x)
        for _ in range(5):
            grow(x, s)
        return total_square(x)

    tape = check_tape(program, RNG.random(4))
    assert repeated_calls(tape) == 0


def test_a_failing_call_is_not_recorded() -> None:
    x = kd.array(np.full(4, 1.0), requires_grad=True)
    with kd.Tape() as tape:
        for _ in range(5):  # 1.5 ** 5 < 10
            bounded_step(x, 10.0)
        with pytest.raises(AssertionError, match="too large"):
            bounded_step(x, 10.0)
    assert len(tape._calls) == 5


def test_a_global_changed_between_tapes_gives_each_tape_its_gradient() -> None:
    global SCALE

    def program(x: Any) -> Any:
        v = np.full(x.shape, 0.3)
        for _ in range(6):
            scaled_step(x, v, 0.1)
        return total_square(x)

    try:
        for scale in (1.0, 2.5):
            SCALE = scale
            check_tape(program, RNG.random(6))
    finally:
        SCALE = 1.0


@kd.kernel
def whole_array_drift(u: kd.Array[kd.f64, 2], velocity: kd.Array[kd.f64, 2], dt: kd.f64):
    u += dt * kd.sin(velocity) * u  # its product makes temporary arrays


@kd.kernel
def total_square_2d(u: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.sum(u * u)


def test_a_whole_array_update_repeated_runs_each_product_once() -> None:
    """The compiled call path of a product that makes arrays returns more than its status
    bytes: the way back took that for a call that had not run and ran the product again,
    adding its adjoints twice from the fourth step on (a silently wrong gradient)."""
    velocity = RNG.standard_normal((5, 4))

    def program(u: Any) -> Any:
        for _ in range(8):
            whole_array_drift(u, velocity, 0.05)
        return total_square_2d(u)

    tape = check_tape(program, RNG.standard_normal((5, 4)))
    assert repeated_calls(tape) == 6

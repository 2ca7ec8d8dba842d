"""kd.Tape: gradients across kernel calls (in-place updates included) against float64
central differences of the same Python program; accumulation, zeroing, bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from finite_differences import central_differences

import kdsl as kd

RNG = np.random.default_rng(13)


@kd.kernel
def spring_step(x: kd.Array[kd.f64], v: kd.Array[kd.f64], k: kd.Array[kd.f64], dt: kd.f64):
    n = x.shape[0]
    for i in kd.prange(n):
        f = k[i] * (x[(i + 1) % n] + x[(i + n - 1) % n] - 2.0 * x[i]) - 0.1 * kd.sin(x[i])
        v[i] += dt * f
    for i in kd.prange(n):
        x[i] += dt * v[i]


@kd.kernel
def squared_distance(x: kd.Array[kd.f64], target: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        d = x[i] - target[i]
        s += d * d
    return s


@kd.kernel
def scale_into(out: kd.Array[kd.f64], x: kd.Array[kd.f64], a: kd.f64):
    for i in kd.prange(x.shape[0]):
        out[i] = a * x[i] * x[i]


@kd.kernel
def clip_in_place(x: kd.Array[kd.f64], limit: kd.f64):
    for i in range(x.shape[0]):
        if x[i] > limit:
            x[i] = limit
        elif x[i] < -limit:
            x[i] = -limit


@kd.kernel
def mean_of(x: kd.Array[kd.f64], loss: kd.Array[kd.f64]):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i]
    loss[0] = s / x.shape[0]


@kd.kernel
def cubic(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i] * x[i]
    return s


@kd.kernel
def times_scalar(out: kd.Array[kd.f64], x: kd.Array[kd.f64], s: kd.f64):
    for i in kd.prange(x.shape[0]):
        out[i] = kd.exp(s * 0.1) * x[i]


@kd.kernel
def fill_constant(x: kd.Array[kd.f64], value: kd.f64):
    for i in kd.prange(x.shape[0]):
        x[i] = value


@kd.kernel
def gather_add(x: kd.Array[kd.f64], index: kd.Array[kd.i32], out: kd.Array[kd.f64]):
    for i in range(index.shape[0]):
        out[index[i]] += x[i] * x[i]


def value_of(loss: Any) -> float:
    return float(np.asarray(loss).reshape(-1)[0]) if hasattr(loss, "shape") else float(loss)


def check_tape(program: Callable[[Any], Any], x0: np.ndarray, rtol: float = 1e-6,
               checkpoint_every: int | None = None) -> Any:
    """``program(x)`` calls kernels on ``x`` and returns the loss; compares the tape's
    gradient with central differences, and checks that x keeps its final values."""
    x = kd.array(x0, requires_grad=True)
    with kd.Tape(checkpoint_every) as tape:
        loss = program(x)
    final = x.numpy().copy()
    tape.backward(loss)
    np.testing.assert_array_equal(x.numpy(), final)
    expected = central_differences(lambda y: value_of(program(y.copy())), x0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=rtol, atol=1e-7)
    return tape


@pytest.mark.parametrize("checkpoint_every", [None, 10, 7])
def test_time_stepping_in_place_over_many_calls(checkpoint_every: int | None) -> None:
    k = 0.5 + RNG.random(12)
    target = RNG.random(12)

    def program(x: Any) -> Any:
        v = np.zeros(12)
        for _ in range(100):
            spring_step(x, v, k, 0.05)
        return squared_distance(x, target)

    tape = check_tape(program, RNG.random(12), checkpoint_every=checkpoint_every)
    segments = 1 if checkpoint_every is None else -(-100 // checkpoint_every)
    copies = 100 if checkpoint_every is None else segments
    if checkpoint_every is None:
        # x before each step (v, which the step's product does not read, in one scratch
        # array), and the loss's gradient taken as it was recorded
        assert tape.memory_bytes == copies * 12 * 8 + 12 * 8 + 12 * 8
    else:  # x and v before each segment
        assert tape.memory_bytes == copies * 2 * 12 * 8


def test_gradient_of_a_parameter_the_steps_only_read() -> None:
    x0, target = RNG.random(10), RNG.random(10)

    def loss_of_k(k: Any) -> Any:
        x = x0.copy()
        v = np.zeros(10)
        for _ in range(30):
            spring_step(x, v, k, 0.05)
        return squared_distance(x, target)

    check_tape(loss_of_k, 0.5 + RNG.random(10))


@pytest.mark.parametrize("checkpoint_every", [None, 2])
def test_branches_overwrites_and_a_loss_array(checkpoint_every: int | None) -> None:
    def program(x: Any) -> Any:
        tmp = np.empty(x.shape[0])
        scale_into(tmp, x, 1.5)
        clip_in_place(tmp, 0.6)
        loss = kd.zeros(1, kd.f64)
        mean_of(tmp, loss)
        return loss

    x0 = RNG.random(16) * 0.9
    x0[x0 > 0.6] += 0.05  # away from the kink
    check_tape(program, x0, checkpoint_every=checkpoint_every)


@pytest.mark.parametrize("checkpoint_every", [None, 2])
def test_a_scalar_returned_under_the_tape_feeds_a_later_call(checkpoint_every: int | None) -> None:
    def program(x: Any) -> Any:
        s = cubic(x)
        out = np.empty(x.shape[0])
        times_scalar(out, x, s)
        return squared_distance(out, np.zeros(x.shape[0]))

    check_tape(program, RNG.random(6), checkpoint_every=checkpoint_every)


def test_overwriting_with_constants_stops_the_gradient() -> None:
    x = kd.array(RNG.random(5), requires_grad=True)
    with kd.Tape() as tape:
        out = np.zeros(5)
        scale_into(out, x, 2.0)
        fill_constant(out, 0.25)
        times_scalar(out, out, 1.0)
        loss = squared_distance(out, x)
    tape.backward(loss)
    expected = central_differences(lambda y: _constant_program(y), x.numpy().copy())
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-7)


def _constant_program(x: np.ndarray) -> float:
    out = np.zeros(5)
    scale_into(out, x, 2.0)
    fill_constant(out, 0.25)
    times_scalar(out, out, 1.0)
    return float(squared_distance(out, x))


def test_colliding_updates_through_an_index_array() -> None:
    index = np.array([0, 2, 0, 1, 2, 2], dtype=np.int32)

    def program(x: Any) -> Any:
        out = np.zeros(3)
        gather_add(x, index, out)
        gather_add(x, index, out)
        return cubic(out)

    check_tape(program, RNG.random(6))


def test_float32_arrays() -> None:
    @kd.kernel
    def damp(x: kd.Array[kd.f32]):
        for i in kd.prange(x.shape[0]):
            x[i] = x[i] * 0.5 + kd.sin(x[i])

    @kd.kernel
    def total(x: kd.Array[kd.f32]) -> kd.f32:
        s = 0.0
        for i in kd.prange(x.shape[0]):
            s += x[i] * x[i]
        return s

    x0 = RNG.random(7).astype(np.float32)
    x = kd.array(x0, requires_grad=True)
    with kd.Tape() as tape:
        damp(x)
        damp(x)
        loss = total(x)
    tape.backward(loss)
    assert x.grad.dtype == np.float32
    y = x0.astype(np.float64)
    d = np.ones_like(y)
    for _ in range(2):
        d = d * (0.5 + np.cos(y))
        y = y * 0.5 + np.sin(y)
    np.testing.assert_allclose(x.grad.numpy(), 2 * y * d, rtol=1e-4)


def test_grad_accumulates_and_zero_clears() -> None:
    x0 = RNG.random(5)
    x = kd.array(x0, requires_grad=True)
    assert x.grad is None
    with kd.Tape() as tape:
        loss = cubic(x)
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), 3 * x0 ** 2)
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), 6 * x0 ** 2)
    with kd.Tape() as second:
        other = cubic(x)
    second.backward(other)  # another tape adds into the same .grad
    np.testing.assert_allclose(x.grad.numpy(), 9 * x0 ** 2)
    grad = x.grad
    tape.zero()
    assert x.grad is grad and not np.any(grad.numpy())
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), 3 * x0 ** 2)


def test_calls_outside_the_tape_are_not_recorded() -> None:
    x = kd.array(RNG.random(4), requires_grad=True)
    with kd.Tape() as tape:
        loss = cubic(x)
    after = cubic(x)
    assert not isinstance(after, kd.Tape.Scalar)
    tape.backward(loss)
    assert repr(tape).startswith("<kd.Tape of 1 calls")
    tape.reset()
    assert tape.memory_bytes == 0


def test_kd_zeros_and_ones_take_requires_grad() -> None:
    assert kd.zeros(3, kd.f64, requires_grad=True).requires_grad
    assert kd.ones((2, 2), requires_grad=True).requires_grad
    assert not kd.full(2, 1.0).requires_grad
    y = kd.zeros_like(np.ones(3), requires_grad=True)
    assert y.requires_grad and y.grad is None


def test_backward_without_requires_grad_arrays_is_an_error() -> None:
    x = kd.array(RNG.random(4))
    with kd.Tape() as tape:
        loss = cubic(x)
    with pytest.raises(ValueError, match="requires_grad=True"):
        tape.backward(loss)


def test_a_loss_that_is_not_a_scalar_is_an_error() -> None:
    x = kd.array(RNG.random(4), requires_grad=True)
    out = np.zeros(4)
    with kd.Tape() as tape:
        scale_into(out, x, 1.0)
    with pytest.raises(ValueError, match="one-element array, got an array of shape"):
        tape.backward(out)
    with pytest.raises(ValueError, match="not a scalar a kernel returned"):
        tape.backward(1.5)
    with pytest.raises(TypeError, match="got str"):
        tape.backward("loss")


@kd.kernel
def squared(x: kd.Array[kd.f64]):
    return x * x


@kd.kernel
def weighted_sum(h: kd.Array[kd.f64], x: kd.Array[kd.f64]) -> kd.f64:
    return kd.sum(h * x)


def test_an_array_a_recorded_kernel_returned_carries_its_gradient() -> None:
    x0 = RNG.random(4) + 0.5
    x = kd.array(x0, requires_grad=True)
    with kd.Tape() as tape:
        h = squared(x)
        np.testing.assert_allclose(h, x0 ** 2)
        loss = weighted_sum(h, x)  # sum(x**3)
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), 3 * x0 ** 2)
    with kd.Tape() as tape:  # arrays returned from constants only are constants
        h = squared(np.ones(4))
        loss = weighted_sum(h, x)
    tape.zero()
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), np.ones(4))


def test_integer_arrays_cannot_require_gradients() -> None:
    with pytest.raises(TypeError, match="floating-point array, got int32"):
        kd.array(np.arange(3, dtype=np.int32), requires_grad=True)
    with pytest.raises(TypeError, match="floating-point"):
        kd.zeros(3, kd.i64, requires_grad=True)


@kd.kernel
def double_and_shift(x: kd.Array[kd.f64], out: kd.Array[kd.f64], index: kd.Array[kd.i32]):
    n = x.shape[0]
    for i in kd.prange(n):
        out[i] = 2.0 * x[i] * x[i]
        index[i] = (i + 3) % n


@pytest.mark.parametrize("checkpoint_every", [None, 2])
def test_an_index_array_read_before_a_later_call_overwrites_it(checkpoint_every: int | None) -> None:
    def program(x: Any) -> Any:
        index = np.random.default_rng(5).permutation(x.shape[0]).astype(np.int32)
        out, doubled = np.zeros(x.shape[0]), np.zeros(x.shape[0])
        gather_add(x, index, out)             # reads index
        double_and_shift(x, doubled, index)   # then overwrites it
        return squared_distance(out, doubled)

    check_tape(program, RNG.random(7), checkpoint_every=checkpoint_every)


@pytest.mark.parametrize("checkpoint_every", [None, 2])
def test_an_array_read_before_a_later_call_overwrites_it(checkpoint_every: int | None) -> None:
    def program(x: Any) -> Any:
        out = np.empty(x.shape[0])
        tmp = np.empty(x.shape[0])
        scale_into(out, x, 1.5)
        scale_into(tmp, out, 2.0)   # reads out as the next call finds it
        scale_into(out, x, 0.5)     # overwrites out without reading it
        return squared_distance(tmp, out)

    check_tape(program, RNG.random(9), checkpoint_every=checkpoint_every)


SHIFT = np.linspace(0.0, 1.0, 4)


@kd.kernel
def shifted(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * SHIFT[i]
    return s


def test_kernels_reading_global_arrays_are_refused_with_gradients() -> None:
    x = kd.array(RNG.random(4), requires_grad=True)
    with kd.Tape(), pytest.raises(TypeError, match="reads arrays from globals"):
        shifted(x)
    assert shifted(np.ones(4)) == pytest.approx(SHIFT.sum())  # outside a tape: as ever


def test_an_error_inside_the_tape_stops_the_recording() -> None:
    x = kd.array(RNG.random(4), requires_grad=True)
    with pytest.raises(RuntimeError, match="stop"), kd.Tape() as tape:
        cubic(x)
        raise RuntimeError("stop")
    loss = cubic(x)
    assert not isinstance(loss, kd.Tape.Scalar)
    assert repr(tape).startswith("<kd.Tape of 1 calls")


def test_kd_grad_and_kd_jvp_inside_a_tape_are_not_recorded() -> None:
    x = kd.array(RNG.random(4), requires_grad=True)
    with kd.Tape() as tape:
        g = kd.grad(cubic)(x.numpy())
        _, t = kd.jvp(cubic, (x,), (np.ones(4),))
        loss = cubic(x)
    np.testing.assert_allclose(g, 3 * x.numpy() ** 2)
    assert t == pytest.approx(g.sum())
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), g)
    assert repr(tape).startswith("<kd.Tape of 1 calls")


def test_checkpoint_every_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match="checkpoint_every must be a positive int"):
        kd.Tape(0)

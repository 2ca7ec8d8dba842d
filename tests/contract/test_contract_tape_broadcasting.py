"""kd.Tape with arguments whose axes have size 1 at run time (a (1, m) bias, an (n, 1)
column), broadcast in whole-array expressions as in NumPy, PyTorch and Warp: the gradient
reaching such an argument is its adjoint summed over the broadcast axes, as under
kd.grad (API.md sections 7 and 8)."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def dense(x: kd.Array[kd.f64, 2], w: kd.Array[kd.f64, 2], b: kd.Array[kd.f64, 2],
          out: kd.Array[kd.f64, 2]):
    out[:] = kd.tanh(x @ w + b)


@kd.kernel
def scaled_error(h: kd.Array[kd.f64, 2], scale: kd.Array[kd.f64, 2],
                 y: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.mean((h * scale - y) ** 2)


def model_loss(x, w, b, scale, y) -> float:
    return float(np.mean((np.tanh(x @ w + b) * scale - y) ** 2))


def central_differences(f, arrays: list[np.ndarray], k: int, eps: float = 1e-6) -> np.ndarray:
    """The gradient of ``f(*arrays)`` with respect to ``arrays[k]``, in float64."""
    grad = np.zeros_like(arrays[k])
    for index in np.ndindex(arrays[k].shape):
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        plus[k][index] += eps
        minus[k][index] -= eps
        grad[index] = (f(*plus) - f(*minus)) / (2 * eps)
    return grad


def test_a_bias_row_and_a_column_through_a_written_output(rng) -> None:
    # the product of dense (an array written) and the gradient of scaled_error (a scalar
    # returned) each sum the adjoint of the size-1 axes
    x, w, y = rng.standard_normal((7, 3)), rng.standard_normal((3, 4)), rng.standard_normal((7, 4))
    b0, scale0 = rng.standard_normal((1, 4)), rng.standard_normal((7, 1))
    w_, b, scale = (kd.array(a, requires_grad=True) for a in (w, b0, scale0))
    h = kd.zeros((7, 4), kd.f64)
    with kd.Tape() as tape:
        dense(x, w_, b, h)
        loss = scaled_error(h, scale, y)
    tape.backward(loss)
    assert np.isclose(loss, model_loss(x, w, b0, scale0, y), rtol=1e-12)
    assert b.grad.shape == (1, 4) and scale.grad.shape == (7, 1)
    arrays = [x, w, b0, scale0, y]
    for k, got in ((1, w_.grad), (2, b.grad), (3, scale.grad)):
        np.testing.assert_allclose(got.numpy(), central_differences(model_loss, arrays, k),
                                   rtol=1e-6, atol=1e-9)


@kd.kernel
def affine(x: kd.Array[kd.f64, 2], w: kd.Array[kd.f64, 2], b: kd.Array[kd.f64, 2]):
    return x @ w + b  # a new array


@kd.kernel
def mean_square(h: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.mean(h * h)


def test_a_training_loop_with_a_bias_row_and_a_returned_array(rng) -> None:
    # PyTorch's loop: forward, backward, step, zero the gradients; the bias is (1, m)
    x = rng.standard_normal((16, 3))
    w = kd.array(rng.standard_normal((3, 2)), requires_grad=True)
    b = kd.array(rng.standard_normal((1, 2)), requires_grad=True)
    losses = []
    for _ in range(3):
        expected_b = 2.0 * np.mean(x @ w.numpy() + b.numpy(), axis=0, keepdims=True) / 2
        with kd.Tape() as tape:
            loss = mean_square(affine(x, w, b))
        tape.backward(loss)
        np.testing.assert_allclose(b.grad.numpy(), expected_b, rtol=1e-12)
        losses.append(float(loss))
        w.numpy()[...] -= 0.1 * w.grad.numpy()
        b.numpy()[...] -= 0.1 * b.grad.numpy()
        tape.zero()
    assert losses[2] < losses[1] < losses[0]


@kd.kernel
def drift(u: kd.Array[kd.f64, 2], velocity: kd.Array[kd.f64, 2], dt: kd.f64):
    u += dt * kd.sin(velocity) * u  # velocity: (1, m), the same drift for every row


@kd.kernel
def energy(u: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.sum(u * u)


def drifted_energy(u: np.ndarray, velocity: np.ndarray, steps: int, dt: float) -> float:
    u = u.copy()
    for _ in range(steps):
        u += dt * np.sin(velocity) * u
    return float(np.sum(u * u))


@pytest.mark.parametrize("checkpoint_every", [None, 3])
def test_a_time_loop_updating_in_place_with_a_broadcast_row(rng, checkpoint_every) -> None:
    # the calls alike are recorded as the one before (and run again from checkpoints)
    u0, velocity0 = rng.standard_normal((5, 4)), rng.standard_normal((1, 4))
    u, velocity = (kd.array(a, requires_grad=True) for a in (u0, velocity0))
    with kd.Tape(checkpoint_every=checkpoint_every) as tape:
        for _ in range(8):
            drift(u, velocity, 0.05)
        loss = energy(u)
    tape.backward(loss)
    assert np.isclose(loss, drifted_energy(u0, velocity0, 8, 0.05), rtol=1e-12)
    for k, got in ((0, u.grad), (1, velocity.grad)):
        expected = central_differences(lambda a, v: drifted_energy(a, v, 8, 0.05),
                                       [u0, velocity0], k)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-9)


def test_the_same_kernel_with_and_without_size_one_axes(rng) -> None:
    # one specialisation serves both calls; each gets the product for its own shapes
    x, y = rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
    full, row = rng.standard_normal((6, 4)), rng.standard_normal((1, 4))
    for scale0 in (full, row, full):
        scale = kd.array(scale0, requires_grad=True)
        with kd.Tape() as tape:
            loss = scaled_error(x, scale, y)
        tape.backward(loss)
        expected = 2.0 * x * (x * scale0 - y) / x.size
        np.testing.assert_allclose(scale.grad.numpy(),
                                   np.sum(expected, axis=0, keepdims=True) if scale0.shape[0] == 1
                                   else expected, rtol=1e-12)

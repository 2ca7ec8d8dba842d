"""Gradients with respect to arguments a whole-array assignment overwrites (``out[:] =
...``, ``out[1:, :] = ...``), as PyTorch and Warp users write layers into output
arrays: the overwritten elements' values before the call contribute nothing, so their
gradient is zero, and under kd.Tape an output written again by a later call passes
back only what its earlier value fed; a view of an array that carries gradients,
passed under a tape, is an error rather than a constant (API.md section 8)."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def layer_then_loss(y: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2]) -> kd.f64:
    out[1:, :] = kd.tanh(y[1:, :])  # row 0 keeps its value
    return kd.sum(out * out)


def test_the_gradient_of_an_overwritten_argument_is_zero_where_it_was_overwritten(rng) -> None:
    y, out = rng.uniform(-1.0, 1.0, (3, 4)), rng.uniform(-1.0, 1.0, (3, 4))
    d_y, d_out = kd.grad(layer_then_loss, (0, 1))(y, out.copy())
    np.testing.assert_allclose(d_out[0], 2.0 * out[0], rtol=1e-12)
    np.testing.assert_array_equal(d_out[1:], 0.0)  # was the adjoint of the new values
    t = np.tanh(y[1:])
    np.testing.assert_allclose(d_y[1:], 2.0 * t * (1.0 - t * t), rtol=1e-12)
    np.testing.assert_array_equal(d_y[0], 0.0)
    assert kd.check_grad(layer_then_loss, y, out, argnums=(0, 1)) < 1.0


@kd.kernel
def dense(x: kd.Array[kd.f64, 2], w: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2]):
    out[:] = kd.tanh(x @ w)


@kd.kernel
def sum_of_squares(h: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.sum(h * h)


def test_scratch_outputs_written_again_by_later_layers_of_a_tape(rng) -> None:
    # two scratch arrays hold the layers' outputs in turn: the way back gave a layer the
    # adjoint of a later layer's output too (the output's adjoint was not cleared)
    x0 = rng.standard_normal((5, 4))
    ws0 = [rng.standard_normal((4, 4)) * 0.5 for _ in range(4)]
    ws = [kd.array(w, requires_grad=True) for w in ws0]
    scratch = [kd.zeros((5, 4), kd.f64), kd.zeros((5, 4), kd.f64)]
    h = kd.array(x0)
    with kd.Tape() as tape:
        for k, w in enumerate(ws):
            dense(h, w, scratch[k % 2])
            h = scratch[k % 2]
        loss = sum_of_squares(h)
    tape.backward(loss)

    def forward(*weights: np.ndarray) -> float:
        a = x0
        for w in weights:
            a = np.tanh(a @ w)
        return float(np.sum(a * a))

    eps = 1e-6
    for k, w in enumerate(ws):
        expected = np.zeros((4, 4))
        for index in np.ndindex(4, 4):
            hi, lo = [v.copy() for v in ws0], [v.copy() for v in ws0]
            hi[k][index] += eps
            lo[k][index] -= eps
            expected[index] = (forward(*hi) - forward(*lo)) / (2 * eps)
        np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


@kd.kernel
def rows_and_column(x: kd.Array[kd.f64, 2], column: kd.Array[kd.f64]) -> kd.f64:
    return kd.sum(x * x) + kd.sum(column * column)


def test_a_view_of_an_array_with_gradients_is_refused_by_the_tape(rng) -> None:
    # PyTorch users pass x[:, 1] and expect its gradient in x.grad: the tape took the view
    # for a constant array and the gradient through it was lost
    x = kd.array(rng.random((4, 3)), requires_grad=True)
    for column in (x[:, 1], x.numpy()[:, 0]):
        with kd.Tape(), pytest.raises(ValueError, match="argument 'column' of rows_and_column "
                                                         "shares memory with an array that "
                                                         "carries gradients"):
            rows_and_column(x, column)
    with kd.Tape() as tape:
        loss = rows_and_column(x, x.numpy()[:, 1].copy())  # a copy: a constant
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * x.numpy(), rtol=1e-12)


@kd.kernel
def dense_loss(x: kd.Array[kd.f64, 2], w: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2]) -> kd.f64:
    out[:] = kd.tanh(x @ w)
    return kd.sum(out * out)


def test_the_same_array_as_input_and_output_of_a_whole_array_layer(rng) -> None:
    # dense(h, w, h): the whole-array adjoints read h after the layer overwrote it (the
    # gradient of w was wrong); the gradient is then taken of the loops, as of
    # hand-written ones
    a, w0 = rng.uniform(-1.0, 1.0, (4, 4)), rng.uniform(-1.0, 1.0, (4, 4))
    z = np.tanh(a @ w0)
    g = 2.0 * z * (1.0 - z * z)
    h = a.copy()
    d_x, d_w, d_out = kd.grad(dense_loss, (0, 1, 2))(h, w0, h)
    np.testing.assert_array_equal(h, a)  # the gradient leaves its arguments as they were
    np.testing.assert_allclose(d_w, a.T @ g, rtol=1e-12)
    np.testing.assert_allclose(d_x + d_out, g @ w0.T, rtol=1e-12)
    d_x, d_w, d_out = kd.grad(dense_loss, (0, 1, 2))(a, w0, np.zeros((4, 4)))  # apart
    np.testing.assert_allclose(d_w, a.T @ g, rtol=1e-12)
    np.testing.assert_array_equal(d_out, 0.0)
    x, w = kd.array(a.copy(), requires_grad=True), kd.array(w0, requires_grad=True)
    with kd.Tape() as tape:
        dense(x, w, x)
        loss = sum_of_squares(x)
    tape.backward(loss)
    np.testing.assert_allclose(w.grad.numpy(), a.T @ g, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g @ w0.T, rtol=1e-12)


@kd.kernel
def doubled(x: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2]):
    out[:] = 2.0 * x


def test_views_of_one_buffer_apart_from_the_array_with_gradients(rng) -> None:
    # the first columns of a buffer carry gradients once a recorded call writes them; a
    # later column of the same buffer, read as a constant, lies within their bounds in
    # memory but shares no element with them
    x = kd.array(rng.random((4, 3)), requires_grad=True)
    buffer = rng.random((4, 6))
    out, column = buffer[:, :3], buffer[:, 4]
    assert np.may_share_memory(out, column) and not np.shares_memory(out, column)
    with kd.Tape() as tape:
        doubled(x, out)
        loss = rows_and_column(out, column)
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), 8.0 * x.numpy(), rtol=1e-12)

"""The adjoint of ``kd.dot(d, d)`` (a squared length: every distance of a physics kernel)
is one update of d's adjoint by 2 g d: gradients against closed forms in NumPy, next to
``kd.dot(a, b)`` of two values, through kd.grad and through a tape."""

from __future__ import annotations

import numpy as np

import kdsl as kd

RNG = np.random.default_rng(23)


@kd.kernel
def lengths(x: kd.Array[kd.vec3d], w: kd.Array[kd.vec3d]) -> kd.f64:
    total = 0.0
    for i in kd.prange(x.shape[0]):
        d = x[i] - w[i]
        total += kd.sqrt(kd.dot(d, d) + 0.5) + kd.dot(x[i], w[i]) * kd.dot(w[i], w[i])
    return total


def _closed_form(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = x - w
    r = np.sqrt((d * d).sum(axis=1, keepdims=True) + 0.5)
    xw = (x * w).sum(axis=1, keepdims=True)
    ww = (w * w).sum(axis=1, keepdims=True)
    gx = d / r + w * ww
    gw = -d / r + x * ww + xw * 2 * w
    return gx, gw


def test_squared_lengths_against_closed_form() -> None:
    x, w = RNG.normal(size=(37, 3)), RNG.normal(size=(37, 3))
    gx, gw = kd.grad(lengths, (0, 1))(x, w)
    ref_x, ref_w = _closed_form(x, w)
    np.testing.assert_allclose(gx, ref_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw, ref_w, rtol=1e-12, atol=1e-12)


def test_squared_lengths_through_a_tape() -> None:
    x, w = RNG.normal(size=(29, 3)), RNG.normal(size=(29, 3))
    xs, ws = kd.array(x, requires_grad=True), kd.array(w, requires_grad=True)
    with kd.Tape() as tape:
        loss = lengths(xs, ws)
    tape.backward(loss)
    ref_x, ref_w = _closed_form(x, w)
    np.testing.assert_allclose(xs.grad.numpy(), ref_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ws.grad.numpy(), ref_w, rtol=1e-12, atol=1e-12)

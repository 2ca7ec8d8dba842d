"""Gradients through whole-array expressions on kdsl's emulated CUDA device, compared
with the CPU backend, and their PTX through ptxas."""

from __future__ import annotations

import numpy as np

import kdsl as kd


@kd.kernel
def network_loss(x: kd.Array[kd.f32, 2], w: kd.Array[kd.f32, 2], b: kd.Array[kd.f32],
                 y: kd.Array[kd.f32, 2]) -> kd.f32:
    h = kd.tanh(x @ w + b)
    return kd.mean((h[:, 1:] - y) ** 2) + kd.sum(kd.max(h, axis=1))


def arrays() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(3)
    f32 = np.float32
    return (rng.standard_normal((33, 6)).astype(f32), rng.standard_normal((6, 5)).astype(f32),
            rng.standard_normal(5).astype(f32), rng.standard_normal((33, 4)).astype(f32))


def test_tensor_gradient_on_the_device(emulated_device) -> None:
    x, w, b, y = arrays()
    expected = kd.grad(network_loss, (1, 2))(x, w, b, y)
    on_device = [kd.array(a, device="cuda") for a in (x, w, b, y)]
    value, (gw, gb) = kd.value_and_grad(network_loss, (1, 2))(*on_device)
    assert gw.device == "cuda"
    assert np.isclose(value, network_loss(x, w, b, y), rtol=1e-5)
    np.testing.assert_allclose(gw.numpy(), expected[0], rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(gb.numpy(), expected[1], rtol=2e-4, atol=1e-6)


def test_tensor_gradient_ptx() -> None:
    x, w, b, y = arrays()
    ptx = kd.grad(network_loss, (1, 2)).ptx(x, w, b, y)
    assert ".entry" in ptx or ".visible" in ptx

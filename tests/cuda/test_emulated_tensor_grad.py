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


@kd.kernel
def stepped(u: kd.Array[kd.f64, 2], k: kd.f64, steps: kd.i32) -> kd.f64:
    for _ in range(steps):  # whole-array updates in a loop, through views of u
        u[1:-1] = u[1:-1] + k * (u[2:] - 2.0 * u[1:-1] + u[:-2])
        u.T[0] = kd.cos(u[:, 1]) * kd.stop_gradient(u[:, 0])
    return kd.sum(u * u)


def test_gradient_of_whole_array_steps_through_views_on_the_device(emulated_device) -> None:
    u = np.random.default_rng(4).random((5, 3))
    expected = kd.grad(stepped, (0, 1))(u, 0.2, 4)
    d_u, d_k = kd.grad(stepped, (0, 1))(kd.array(u, device="cuda"), 0.2, 4)
    assert d_u.device == "cuda"
    np.testing.assert_allclose(d_u.numpy(), expected[0], rtol=1e-10)
    assert np.isclose(d_k, expected[1], rtol=1e-10)


@kd.kernel
def biased_layer(x: kd.Array[kd.f64, 2], w: kd.Array[kd.f64, 2], b: kd.Array[kd.f64, 2]) -> kd.f64:
    h = kd.tanh(x @ w + b)  # b is (1, m): broadcast along an axis of size 1 at run time
    u = h.T[::-1]  # a view of a view of a result, whose elements a loop reads
    s = 0.0
    for i in range(u.shape[0]):
        s += u[i, 0] * u[i, 1]
    return kd.mean(h ** 2) + s


def test_size_one_axes_and_views_of_results_on_the_device(emulated_device) -> None:
    rng = np.random.default_rng(5)
    x, w, b = rng.random((5, 3)), rng.random((3, 2)), rng.random((1, 2))
    expected = kd.grad(biased_layer, (1, 2))(x, w, b)
    assert expected[1].shape == (1, 2)
    kd.check_grad(biased_layer, x, w, b, argnums=(1, 2))
    d_w, d_b = kd.grad(biased_layer, (1, 2))(*(kd.array(a, device="cuda") for a in (x, w, b)))
    assert d_b.device == "cuda"
    np.testing.assert_allclose(d_w.numpy(), expected[0], rtol=1e-10)
    np.testing.assert_allclose(d_b.numpy(), expected[1], rtol=1e-10)


@kd.kernel
def overwritten_then_read(y: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2]) -> kd.f64:
    out[1:, :] = kd.tanh(y[1:, :])  # out's gradient is zero where it was overwritten
    return kd.sum(out * out)


def test_gradient_of_an_overwritten_argument_on_the_device(emulated_device) -> None:
    rng = np.random.default_rng(6)
    y, out = rng.uniform(-1.0, 1.0, (5, 3)), rng.uniform(-1.0, 1.0, (5, 3))
    expected = kd.grad(overwritten_then_read, (0, 1))(y, out.copy())
    np.testing.assert_array_equal(expected[1][1:], 0.0)
    got = kd.grad(overwritten_then_read, (0, 1))(*(kd.array(a, device="cuda") for a in (y, out)))
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-12)


@kd.kernel
def layer_in_place(x: kd.Array[kd.f64, 2], w: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2]) -> kd.f64:
    out[:] = kd.tanh(x @ w)
    return kd.sum(out * out)


def test_gradient_with_the_same_array_as_input_and_output_on_the_device(emulated_device) -> None:
    rng = np.random.default_rng(7)
    a, w = rng.uniform(-1.0, 1.0, (5, 5)), rng.uniform(-1.0, 1.0, (5, 5))
    z = np.tanh(a @ w)
    h = kd.array(a, device="cuda")
    d_w = kd.grad(layer_in_place, 1)(h, kd.array(w, device="cuda"), h)
    np.testing.assert_allclose(d_w.numpy(), a.T @ (2.0 * z * (1.0 - z * z)), rtol=1e-12)

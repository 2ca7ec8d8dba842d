"""Gradient kernels on kdsl's emulated CUDA device, compared with the CPU backend."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def pair_energy(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    s = 0.0
    n = x.shape[0]
    for i in kd.prange(n):
        e = 0.0
        for j in range(n):
            if j != i:
                d = x[i] - x[j]
                e += w / (d * d + 0.5)
        s += e
    return s


@kd.kernel
def lowest_and_loop(x: kd.Array[kd.f32]) -> kd.f32:
    lo = 1e30
    for i in kd.prange(x.shape[0]):
        lo = min(lo, x[i] * x[i])
    y = lo
    k = 0
    while y < 4.0 and k < 20:
        y = y * 1.5 + x[k % x.shape[0]]
        k += 1
    return y


@pytest.mark.parametrize("n", [3, 300])
def test_parallel_gradient_on_the_device(emulated_device, n: int) -> None:
    x = np.random.default_rng(n).random(n)
    expected_x, expected_w = kd.grad(pair_energy, (0, 1))(x, 0.7)
    gx, gw = kd.grad(pair_energy, (0, 1))(kd.array(x, device="cuda"), 0.7)
    assert gx.device == "cuda"
    np.testing.assert_allclose(gx.numpy(), expected_x, rtol=1e-10)
    assert gw == pytest.approx(expected_w, rel=1e-10)


def test_min_reduction_and_while_loop_gradient_on_the_device(emulated_device) -> None:
    x = np.random.default_rng(1).random(50).astype(np.float32) + 0.1
    expected = kd.grad(lowest_and_loop)(x)
    value, g = kd.value_and_grad(lowest_and_loop)(kd.array(x, device="cuda"))
    assert value == pytest.approx(lowest_and_loop(x), rel=1e-5)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-5)


def test_gradient_ptx() -> None:
    ptx = kd.grad(pair_energy).ptx(np.ones(4), 0.7)
    assert ".entry" in ptx or ".visible" in ptx


@kd.kernel
def relax(x: kd.Array[kd.f64], steps: kd.i32) -> kd.f64:
    n = x.shape[0]
    for _step in range(steps):
        for i in kd.prange(n):
            x[i] = x[i] * 0.9 + 0.1 * kd.sin(x[i] * float(i))
    e = 0.0
    for i in kd.prange(n):
        e += x[i] * x[i]
    return e


def test_in_place_time_loop_gradient_on_the_device(emulated_device) -> None:
    x = np.random.default_rng(3).random(40)
    expected = kd.grad(relax)(x.copy(), 4)
    on_device = kd.array(x, device="cuda")
    g = kd.grad(relax)(on_device, 4)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-10)
    np.testing.assert_array_equal(on_device.numpy(), x)


@kd.kernel
def products(x: kd.Array[kd.f64], m: kd.i32) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        p = 1.0
        for j in range(m):
            p = p * kd.cos(x[i] + 0.1 * float(j))  # p is stored per iteration of j
        s += p
    return s


def test_storage_inside_a_parallel_loop_on_the_device(emulated_device) -> None:
    x = np.random.default_rng(5).random(300)
    expected = kd.grad(products)(x, 6)
    g = kd.grad(products)(kd.array(x, device="cuda"), 6)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)
    kd.check_grad(products, x[:5].copy(), 6)

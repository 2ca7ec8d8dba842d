"""kd.Tape through kernels whose sums the gradient computes on its way back (parallel sums
given by the adjoint loop, a read-only vector array's adjoint kept component-wise): the
recorded call's vector-Jacobian product is built as kd.grad's kernel is, with the seed of
a later call; against kd.grad, central differences and NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import kdsl as kd
from kdsl.runtime.vjp_kernel import vjp_kernel


@kd.kernel
def pair_energy(p: kd.Array[kd.vec3d], k: kd.f64) -> kd.f64:
    n = p.shape[0]
    total = 0.0
    for i in kd.prange(n):
        e = 0.0
        for j in range(n):
            d = p[i] - p[j]
            e += k / kd.sqrt(kd.dot(d, d) + 0.5)
        total += e
    return total


@kd.kernel
def cube(s: kd.f64) -> kd.f64:
    return s * s * s


def numpy_energy(p: np.ndarray, k: float) -> float:
    d = p[:, None, :] - p[None, :, :]
    return float((k / np.sqrt((d * d).sum(-1) + 0.5)).sum())


def test_tape_gradient_of_a_parallel_sum_with_a_later_seed() -> None:
    p0 = np.random.default_rng(21).random((9, 3))
    p = kd.array(p0, requires_grad=True)
    with kd.Tape() as tape:
        energy = pair_energy(p, 0.7)
        loss = cube(energy)
    tape.backward(loss)
    value = numpy_energy(p0, 0.7)
    assert np.isclose(float(energy), value, rtol=1e-12)
    expected = 3.0 * value**2 * kd.grad(pair_energy)(p0, 0.7)
    np.testing.assert_allclose(p.grad.numpy(), expected, rtol=1e-12)
    eps = 1e-6
    for index in [(0, 0), (4, 1), (8, 2)]:
        up, down = p0.copy(), p0.copy()
        up[index] += eps
        down[index] -= eps
        slope = (numpy_energy(up, 0.7) ** 3 - numpy_energy(down, 0.7) ** 3) / (2 * eps)
        assert np.isclose(p.grad.numpy()[index], slope, rtol=1e-6)


def test_the_product_adds_into_the_adjoint_it_is_given() -> None:
    p0 = np.random.default_rng(22).random((6, 3))
    start = np.random.default_rng(23).random((6, 3))
    adjoint = start.copy()
    vjp = vjp_kernel(pair_energy, (0, 1))
    g_k, _ = vjp(p0, 1.1, adjoint, -2.5)
    g_p, expected_k = kd.grad(pair_energy, (0, 1))(p0, 1.1)
    np.testing.assert_allclose(adjoint, start - 2.5 * g_p, rtol=1e-12)
    assert np.isclose(g_k, -2.5 * expected_k, rtol=1e-12)


def test_the_product_is_built_as_the_gradient_is() -> None:
    """The same loops as kd.grad's (no forward pass of their own, the adjoint loop in the
    loop's order) and the same component-wise adjoint of the read-only vector array."""
    p0 = np.random.default_rng(24).random((5, 3))
    vjp_text: Any = vjp_kernel(pair_energy, (0,)).ir(p0, 1.0, np.zeros((5, 3)), 1.0)
    grad_text: Any = kd.grad(pair_energy).ir(p0, 1.0)
    for op in ("parallel_for", " for ", "atomic_rmw", "array_new"):
        assert vjp_text.count(op) == grad_text.count(op), op


@kd.kernel
def sorted_weighted(x: kd.Array[kd.f64], w: kd.Array[kd.f64]) -> kd.f64:
    y = kd.zeros(x.shape[0], kd.f64)
    for i in range(x.shape[0]):
        y[i] = x[i]
    kd.sort(y)
    s = 0.0
    for i in range(y.shape[0]):
        s += y[i] * w[i]
    return s


def test_a_value_off_the_loss_path_that_has_no_gradient() -> None:
    """A recorded call whose gradient cannot be taken is an error only where its value
    reaches the loss."""
    x0, w = np.random.default_rng(25).random(6), np.random.default_rng(26).random(6)
    x = kd.array(x0, requires_grad=True)
    with kd.Tape() as tape:
        logged = sorted_weighted(x, w)
        energy = weighted(x, w)
    assert np.isclose(float(logged), float(np.sort(x0) @ w), rtol=1e-12)
    tape.backward(energy)
    np.testing.assert_allclose(x.grad.numpy(), w, rtol=1e-12)
    with pytest.raises(kd.CompileError, match="kd.sort of a differentiated array"):
        tape.backward(logged)


@kd.kernel
def weighted(x: kd.Array[kd.f64], w: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * w[i]
    return s


def test_the_gradient_of_the_values_the_call_found() -> None:
    """A call's gradient is of the arrays as it found them, whatever later calls write."""
    x0, w = np.random.default_rng(27).random(5), np.random.default_rng(28).random(5)
    x = kd.array(x0, requires_grad=True)
    with kd.Tape() as tape:
        s = weighted(x, w)
        square_in_place(x)
        loss = weighted(x, w)
    # the copy of x before square_in_place overwrote it, and the two gradients kept
    assert tape.memory_bytes == 3 * x0.nbytes
    tape.backward(s)
    np.testing.assert_allclose(x.grad.numpy(), w, rtol=1e-12)
    tape.zero()
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * x0 * w, rtol=1e-12)


@kd.kernel
def square_in_place(x: kd.Array[kd.f64]):
    for i in range(x.shape[0]):
        x[i] = x[i] * x[i]

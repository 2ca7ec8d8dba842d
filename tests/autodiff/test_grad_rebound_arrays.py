"""A name bound to an argument and then to a new array (``t = a`` ... ``t = t + s``) gives
the argument the type of the name's values, a cast of the argument's array; gradients
flow through that cast as through a view (they were silently zero for a two-axis array,
whose argument type knows its last axis' size)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import kdsl as kd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu"))
import kdsl_cuda_testing as cuda_testing  # noqa: E402


@kd.kernel
def rebound(a: kd.Array[kd.f64, 2], w: kd.f64) -> kd.f64:
    t = a
    s = 0.0
    for i in range(t.shape[0]):
        s += t[i, (i + 1) % 4] * t[i, 0]
    t = t * w + s
    return kd.sum(t * t)


def _expected(a: np.ndarray, w: float) -> np.ndarray:
    s = sum(a[i, (i + 1) % 4] * a[i, 0] for i in range(a.shape[0]))
    t = a * w + s
    d_t = 2.0 * t
    d_a = w * d_t
    d_s = d_t.sum()
    for i in range(a.shape[0]):
        d_a[i, (i + 1) % 4] += d_s * a[i, 0]
        d_a[i, 0] += d_s * a[i, (i + 1) % 4]
    return d_a


def test_gradient_through_an_argument_bound_to_a_name_bound_again() -> None:
    a = np.random.default_rng(7).uniform(-1.0, 1.0, (3, 4))
    assert np.isclose(rebound(a, 0.7), rebound.python(a, 0.7), rtol=1e-12)
    np.testing.assert_allclose(kd.grad(rebound)(a, 0.7), _expected(a, 0.7), rtol=1e-12)
    assert kd.check_grad(rebound, a, 0.7, argnums=(0, 1)) < 1.0
    direction = np.random.default_rng(8).standard_normal(a.shape)
    _, tangent = kd.jvp(rebound, (a, 0.7), (direction, None))
    assert np.isclose(tangent, np.sum(_expected(a, 0.7) * direction), rtol=1e-10)
    x = kd.array(a, requires_grad=True)
    with kd.Tape() as tape:
        loss = rebound(x, 0.7)
    tape.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), _expected(a, 0.7), rtol=1e-12)


@pytest.mark.skipif(not cuda_testing.enabled(), reason="CUDA tests are off")
def test_on_the_cuda_device() -> None:
    a = np.random.default_rng(9).uniform(-1.0, 1.0, (3, 4))
    with cuda_testing.on_device():
        d_a, d_w = kd.grad(rebound, (0, 1))(kd.array(a, device="cuda"), 0.7)
        np.testing.assert_allclose(d_a.numpy(), _expected(a, 0.7), rtol=1e-12)
    assert np.isclose(d_w, kd.grad(rebound, 1)(a, 0.7), rtol=1e-12)

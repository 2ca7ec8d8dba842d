"""Long loops keep their values every ~sqrt(n) iterations and run each segment again on
the way back: the gradients are the same as when every iteration is kept."""

from __future__ import annotations

import numpy as np
from kdsl_grad_kernels import long_product, long_relaxation

import kdsl as kd
from kdsl.ir.autodiff import emitter

RNG = np.random.default_rng(5)


@kd.kernel
def long_while(x: kd.Array[kd.f64]) -> kd.f64:
    y = x[0]
    k = 0
    while y < 50.0 and k < 1000:
        y = y * 1.01 + 0.05 * kd.sin(x[k % 3] * y)
        k += 1
    return y


def test_long_loops_past_the_checkpoint_threshold() -> None:
    assert emitter.CHECKPOINT_AFTER < 300
    x = RNG.random(7)
    for n in (emitter.CHECKPOINT_AFTER, emitter.CHECKPOINT_AFTER + 1, 300):
        kd.check_grad(long_product, x, n)
    kd.check_grad(long_relaxation, RNG.random(5), 150)
    kd.check_grad(long_while, np.array([1.2, 0.7, 0.4]))


def test_segment_boundaries_do_not_change_the_gradient() -> None:
    x = RNG.random(4)
    reference = [kd.grad(long_product)(x, n) for n in (10, 65, 82, 100)]
    expected = []
    for n in (10, 65, 82, 100):  # the gradient as the derivative of the exact recurrence
        expected.append(numeric(lambda v, n=n: long_product.python(v, n), x))
    for got, want in zip(reference, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def numeric(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(x)
    for i in range(x.size):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        out[i] = (f(hi) - f(lo)) / (2 * eps)
    return out

"""A loop-carried value that only reaches the reverse sweep through a product or quotient
by a constant (``c = b * 0.75; b = c * c``): the reverse sweep computes ``c`` again from
each iteration's ``b``, so ``b`` must be kept per iteration (the first iteration's value
was read for every one, a silently wrong gradient)."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def squares(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    b = x[1]
    for j in range(3):
        c = b * 0.75
        b = c * c + w * x[j]
    return b


@kd.kernel
def squashed(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    b = x[1]
    for j in range(2):
        c = (b - x[j]) * 0.75
        b = c / (1.0 + c * c)
    return b * w


@kd.kernel
def halved_until_small(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    b = x[0] + 2.0
    k = 0
    while k < 4:
        c = b / 2.0
        b = c * c + w
        k += 1
    return b


@pytest.mark.parametrize("kernel", [squares, squashed, halved_until_small])
def test_gradient_matches_central_differences(kernel):
    x = np.array([0.18953806, 0.99859929, 0.01314114, 0.41299493, 0.85341155])
    kd.check_grad(kernel, x, 0.6135, argnums=(0, 1))
    gx, _ = kd.grad(kernel, (0, 1))(x, 0.6135)
    assert np.abs(gx).max() > 1e-3

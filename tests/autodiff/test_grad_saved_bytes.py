"""The memory a gradient's last call kept for its reverse sweep, counted at run time: it
grows linearly with a loop's trip count up to the checkpoint threshold, as ~sqrt beyond."""

from __future__ import annotations

import math

import numpy as np
from kdsl_grad_kernels import long_product, long_relaxation

import kdsl as kd
from kdsl.ir.autodiff import emitter

RNG = np.random.default_rng(11)


@kd.kernel
def plain_sum(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    return s


def test_nothing_is_kept_when_nothing_is_needed() -> None:
    g = kd.grad(plain_sum)
    assert g.saved_bytes is None
    x = RNG.random(100)
    np.testing.assert_allclose(g(x), 2 * x)
    assert g.saved_bytes == 0


def test_linear_below_the_threshold_then_about_sqrt() -> None:
    limit = emitter.CHECKPOINT_AFTER
    g = kd.grad(long_product)
    x = RNG.random(5)

    def kept(n: int) -> int:
        g(x, n)
        assert g.saved_bytes is not None
        return g.saved_bytes

    below = {n: kept(n) for n in (8, 16, 32, limit)}
    per_iteration = (below[16] - below[8]) / 8
    assert per_iteration == 8.0  # one f64 per iteration: the running product
    for n, size in below.items():
        assert size == below[8] + per_iteration * (n - 8)
    beyond = {n: kept(n) for n in (4 * limit, 16 * limit, 64 * limit)}
    for n, size in beyond.items():  # checkpoints plus one segment: about 2 sqrt(n) values
        assert size < per_iteration * n / 4
        assert 1.5 * math.sqrt(n) * 8 <= size <= 3 * math.sqrt(n) * 8 + 64
    assert beyond[64 * limit] < 5 * beyond[4 * limit]  # 16x the iterations, ~4x the memory
    np.testing.assert_allclose(g(x, 300), kd.grad(long_product)(x, 300))


def test_copies_of_arrays_updated_in_place_are_counted() -> None:
    g = kd.grad(long_relaxation)
    x = RNG.random(50)
    sizes = {}
    for steps in (10, 20, 40):
        g(x.copy(), steps)
        assert g.saved_bytes is not None
        sizes[steps] = g.saved_bytes
    # one copy of x (50 f64) per step, plus the copy of x made at entry
    assert sizes[20] - sizes[10] == 10 * 50 * 8
    assert sizes[40] - sizes[20] == 20 * 50 * 8
    g(x.copy(), 40 * 40)
    assert g.saved_bytes is not None and g.saved_bytes < 4 * sizes[40]

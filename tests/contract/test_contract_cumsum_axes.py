"""``kd.cumsum(a, axis=None)`` in kernels as NumPy (API section 10), for arrays of
several axes too: along an axis, or flattened in C order."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def running_sums(x: kd.Array[kd.f32, 2], y: kd.Array[kd.i32, 3]):
    return (kd.cumsum(x * 2.0, axis=0), np.cumsum(x), kd.cumsum(x, axis=-1),
            kd.cumsum(y, axis=1), kd.cumsum(y), kd.cumsum(y, axis=2, exclusive=True),
            kd.cumsum(x.T, axis=1))


def test_cumsum_of_several_axes_as_numpy(rng):
    x = rng.uniform(-1, 1, size=(5, 7)).astype(np.float32)
    y = rng.integers(-5, 5, size=(3, 4, 5)).astype(np.int32)
    got = check(running_sums, x, y, rtol=1e-5, atol=1e-6)
    expected = (np.cumsum(x * 2, axis=0), np.cumsum(x), np.cumsum(x, axis=-1),
                np.cumsum(y, axis=1), np.cumsum(y), np.cumsum(y, axis=2) - y,
                np.cumsum(x.T, axis=1))
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert np.allclose(g, e, rtol=1e-5, atol=1e-6)


@kd.kernel
def cumulative_energy(x: kd.Array[kd.f64, 2]):
    c = kd.cumsum(x, axis=1)
    return kd.sum(c * c) + kd.sum(kd.cumsum(x))


def test_gradients_flow_through_cumsum_of_several_axes(rng):
    kd.check_grad(cumulative_energy, rng.normal(size=(3, 4)))

"""Simplification: a component of a vector built from scalars (``kd.vec2d(a, b).y``, a
splat) is that scalar: no vector is built for it, and the kernel computes what its
Python function does."""

from __future__ import annotations

import numpy as np

import kdsl as kd


@kd.kernel
def components(x: kd.Array[kd.f64], out: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        v = kd.vec2d(x[i] * 2.0, x[i] + 1.0)
        s = v / kd.sqrt(x[i] + 2.0)  # a vector divided by a splat of the scalar
        out[i] = v.y * v.x - s.x + s.y


def test_components_of_vectors_made_of_scalars() -> None:
    x = np.random.default_rng(3).random(37)
    got, expected = np.zeros(37), np.zeros(37)
    components(x, got)
    components.python(x, expected)
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    before = components.ir(x, got, stage="lower-tensors")
    after = components.ir(x, got, stage="simplify")
    # v.y and v.x are the scalars v was made of; s.x and s.y stay extracts of s
    assert before.count(" extract ") == 4 and after.count(" extract ") == 2, after

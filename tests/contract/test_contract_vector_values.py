"""Vectors and matrices are values in both modes: ``w = v`` then ``w.x = 5.0`` or
``w += 1.0`` leaves ``v`` as it was, and a func that updates its vector parameter does
not change the caller's vector. ``kernel.python`` (where they are NumPy arrays) changed
both, so it disagreed with compiled code."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.func
def reflected(v, n):
    v -= 2.0 * kd.dot(v, n) * n  # updates the func's own copy
    v.y = kd.abs(v.y)
    return v


@kd.kernel
def bounce(p: kd.Array[kd.vec3], out: kd.Array[kd.vec3], rows: kd.Array[kd.mat22]):
    n = kd.vec3(0.0, 1.0, 0.0)
    for i in kd.prange(p.shape[0]):
        v = p[i]
        w = v
        w += 1.0
        w.x = 5.0
        w[2] *= 2.0
        r = reflected(v, n)
        out[i] = v + w + r
        m = rows[i]
        m2 = m
        m2[0, 1] = 9.0
        m2[1] += 1.0
        rows[i] = m + m2


def test_vectors_and_matrices_are_values_in_both_modes(rng):
    p = rng.uniform(-1.0, 1.0, size=(6, 3)).astype(np.float32)
    out = np.zeros_like(p)
    rows = rng.random((6, 2, 2)).astype(np.float32)
    original_rows = rows.copy()
    check(bounce, p, out, rows, rtol=1e-6)
    reflected_rows = p * np.array([1, -1, 1], dtype=np.float32)
    reflected_rows[:, 1] = np.abs(reflected_rows[:, 1])
    expected = p + np.stack([np.full(6, 5.0), p[:, 1] + 1, (p[:, 2] + 1) * 2], axis=1) + reflected_rows
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    changed = original_rows.copy()
    changed[:, 0, 1] = 9.0
    changed[:, 1] += 1.0
    np.testing.assert_allclose(rows, original_rows + changed, rtol=1e-6)

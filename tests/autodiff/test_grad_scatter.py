"""Adjoints of vector arrays read at scattered indices, summed component by component."""

from __future__ import annotations

import numpy as np

import kdsl as kd


@kd.kernel
def gathered(p: kd.Array[kd.vec2d, 2], idx: kd.Array[kd.i64]) -> kd.f64:
    total = 0.0
    for i in kd.prange(idx.shape[0]):
        for j in range(p.shape[1]):
            q = p[idx[i], j]
            total += kd.dot(q, q) * q.x + kd.sin(q.y)
    return total


def test_two_axis_vector_array_read_at_colliding_indices() -> None:
    rng = np.random.default_rng(5)
    p = rng.random((4, 3, 2))
    idx = np.array([0, 2, 2, 3, 0, 0], dtype=np.int64)
    kd.check_grad(gathered, p, idx)
    value, g = kd.value_and_grad(gathered)(p, idx)
    assert np.isclose(value, gathered.python(p, idx), rtol=1e-12)
    assert np.all(g[1] == 0.0) and np.any(g[0] != 0.0)
    text = kd.grad(gathered).ir(p, idx, stage="autodiff")
    assert "array<f64, 3, C>" in text  # the components' adjoints, component axis first


@kd.kernel
def relax(p: kd.Array[kd.vec3d], w: kd.f64) -> kd.f64:
    n = p.shape[0]
    for i in kd.prange(n):
        p[i] = p[i] * w
    e = 0.0
    for i in range(n):
        e += kd.dot(p[i], p[(i + 1) % n])
    return e


def test_vector_array_written_in_place_keeps_its_own_adjoint() -> None:
    p = np.random.default_rng(6).random((5, 3))
    kd.check_grad(relax, p, 0.7, argnums=(0, 1))
    text = kd.grad(relax).ir(p, 0.7, stage="autodiff")
    assert "array<f64, 2, C>" not in text.split("parallel_for")[0]

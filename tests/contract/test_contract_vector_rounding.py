"""With ``fastmath=False`` a kernel's vector and matrix arithmetic is bit for bit its
plain-Python run (API.md sections 1 and 3): ``kd.dot``, ``kd.length``, ``kd.normalize``
and ``@`` add their products first to last in the element type, in both modes (NumPy's
``dot`` and ``matmul`` may call a BLAS that adds in another order or fuses them)."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel(fastmath=False)
def vector_products(x: kd.Array[kd.vec3], m: kd.Array[kd.mat33], out: kd.Array[kd.f32, 2]):
    for i in kd.prange(x.shape[0]):
        d = x[i] - x[0] * 0.5
        out[i, 0] = kd.dot(d, x[i])
        out[i, 1] = kd.length(d)
        out[i, 2] = kd.normalize(d).y
        out[i, 3] = d.norm()
        out[i, 4] = d @ x[i]
        out[i, 5] = (m[i] @ d).z
        out[i, 6] = (d @ m[i]).x
        out[i, 7] = (m[i] @ m[0])[1, 2]
        out[i, 8] = kd.vec4(d, 1.0).dot(kd.vec4(x[i], 2.0))
        out[i, 9] = kd.dot(kd.vec2d(d.x, d.y), kd.vec2d(x[i].y, x[i].x))


def test_vector_products_round_as_compiled(rng):
    n = 500  # BLAS's sdot differs from an in-order sum on about a fifth of such rows
    x = rng.random((n, 3)).astype(np.float32)
    m = rng.normal(size=(n, 3, 3)).astype(np.float32)
    out = np.zeros((n, 10), np.float32)
    check(vector_products, x, m, out)
    np.testing.assert_allclose(out[:, 0], np.einsum("ij,ij->i", x - x[0] * 0.5, x), rtol=1e-6)
    assert np.all(out != 0.0)


def test_products_of_vectors_in_plain_python():
    v = kd.vec3(0.1, 0.2, 0.3)
    w = kd.vec3(3.0, 2.0, 1.0)
    in_order = np.float32(np.float32(0.1) * np.float32(3.0) + np.float32(0.2) * np.float32(2.0)
                          ) + np.float32(0.3) * np.float32(1.0)
    assert kd.dot(v, w) == in_order and (v @ w) == in_order
    assert isinstance(kd.dot(v, w), np.float32)
    m = kd.mat22(1.0, 2.0, 3.0, 4.0)
    assert np.array_equal(m @ kd.vec2(1.0, -1.0), [-1.0, -1.0])
    assert np.array_equal(m @ m, [[7.0, 10.0], [15.0, 22.0]])
    assert (m @ m).dtype == np.float32 and (m @ m)[0].x == 7.0  # still a matrix of vectors
    assert kd.dot(kd.ivec2(2, 3), kd.ivec2(4, 5)) == 23


@kd.kernel(fastmath=False)
def small_powers(x: kd.Array[kd.f32], y: kd.Array[kd.f64], out: kd.Array[kd.f64, 2]):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = x[i] ** 3  # by squaring, rounded after each product, in both modes
        out[i, 1] = (1.0 / x[i]) ** 7
        out[i, 2] = y[i] ** 5 - y[i] ** 2
        out[i, 3] = (kd.vec2(x[i], 1.5) ** 3).x
        out[i, 4] = x[i] ** 0.5  # not a small integer: the C library's pow in both


def test_small_integer_powers_round_as_compiled(rng):
    n = 400  # NumPy's power of a float32 differs from x * x * x on about a fifth of these
    x = (rng.random(n) * 3 + 0.1).astype(np.float32)
    y = rng.random(n) * 3
    out = np.zeros((n, 5))
    check(small_powers, x, y, out)
    np.testing.assert_allclose(out[:, 0], x.astype(np.float64) ** 3, rtol=1e-6)

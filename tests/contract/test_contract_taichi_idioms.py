"""Taichi programs ported as Taichi users write them (API.md section 3): vectors and
matrices unpacked into their components or rows (``u, v = p``), a semi-Lagrangian
advection with bilinear sampling (Taichi's stable fluids), each run compiled, as plain
Python and on the emulated CUDA device by ``check``."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel(fastmath=False)
def unpack_components(a: kd.Array[kd.vec3], m: kd.Array[kd.mat22], out: kd.Array[kd.f32, 2]):
    for i in kd.prange(a.shape[0]):
        x, y, z = a[i]
        top, bottom = m[i]  # a matrix unpacks into its rows
        (p, q), (s, t) = m[i]
        out[i, 0] = x - 2 * y + z
        out[i, 1] = kd.dot(top, bottom) + p * t - q * s
        out[i, 2] = bottom.x - top.y


@kd.kernel
def unpack_too_few_names(a: kd.Array[kd.vec3]):
    x, y = a[0]
    return x + y


def test_vectors_and_matrices_unpack_into_components_and_rows(rng):
    n = 37
    a = rng.normal(size=(n, 3)).astype(np.float32)
    m = rng.normal(size=(n, 2, 2)).astype(np.float32)
    out = np.zeros((n, 3), np.float32)
    check(unpack_components, a, m, out)
    np.testing.assert_allclose(out[:, 0], a[:, 0] - 2 * a[:, 1] + a[:, 2], rtol=1e-6)
    determinant = m[:, 0, 0] * m[:, 1, 1] - m[:, 0, 1] * m[:, 1, 0]
    np.testing.assert_allclose(out[:, 1], (m[:, 0] * m[:, 1]).sum(1) + determinant,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[:, 2], m[:, 1, 0] - m[:, 0, 1])


def test_unpacking_into_the_wrong_number_of_names_is_located():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(kd.CompileError, match="cannot unpack 3 values into 2 names") as caught:
        unpack_too_few_names(a)
    assert caught.value.lineno == unpack_too_few_names.py_function.__code__.co_firstlineno + 2
    with pytest.raises(ValueError, match="too many values to unpack"):
        unpack_too_few_names.python(a)


# --- Taichi's stable fluids: semi-Lagrangian advection (RK3) with bilinear sampling ---


@kd.func
def sample(field, u, v):
    index = kd.ivec2(int(u), int(v))
    index = kd.max(kd.ivec2(0), kd.min(kd.ivec2(field.shape[0] - 1, field.shape[1] - 1), index))
    return field[index]


@kd.func
def lerp(left, right, fraction):
    return left + fraction * (right - left)


@kd.func
def bilerp(field, p):
    u, v = p
    s, t = u - 0.5, v - 0.5
    iu, iv = kd.floor(s), kd.floor(t)
    fu, fv = s - iu, t - iv
    a = sample(field, iu, iv)
    b = sample(field, iu + 1, iv)
    c = sample(field, iu, iv + 1)
    d = sample(field, iu + 1, iv + 1)
    return lerp(lerp(a, b, fu), lerp(c, d, fu), fv)


@kd.kernel(fastmath=False)
def advect(vf: kd.Array[kd.vec2, 2], qf: kd.Array[kd.vec2, 2], new_qf: kd.Array[kd.vec2, 2],
           dt: kd.f32):
    for i, j in kd.ndrange(vf.shape[0], vf.shape[1]):
        p = kd.vec2(i, j) + 0.5
        v1 = bilerp(vf, p)
        p1 = p - 0.5 * dt * v1
        v2 = bilerp(vf, p1)
        p2 = p - 0.75 * dt * v2
        v3 = bilerp(vf, p2)
        p = p - dt * ((2 / 9) * v1 + (1 / 3) * v2 + (4 / 9) * v3)
        new_qf[i, j] = bilerp(qf, p)


def test_stable_fluids_advection(rng):
    n = 24
    velocity = (rng.normal(size=(n, n, 2)) * 3).astype(np.float32)
    dye = rng.random((n, n, 2)).astype(np.float32)
    out = np.zeros_like(dye)
    check(advect, velocity, dye, out, 0.5)
    assert dye.min() <= out.min() and out.max() <= dye.max()  # bilinear: no new extremes
    assert not np.array_equal(out, dye)

"""Taichi programs ported as Taichi users write them (API.md section 3): vectors and
matrices unpacked into their components or rows (``u, v = p``), swizzles read and
assigned (``c.zyx``, ``v.xy = w``, ``color.rgb``), a semi-Lagrangian
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


@kd.kernel(fastmath=False)
def swizzles(a: kd.Array[kd.vec4], b: kd.Array[kd.vec3], out: kd.Array[kd.vec3, 2],
             f: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        c = a[i]
        out[i, 0] = c.zyx
        out[i, 1] = kd.vec3(c.xy, c.w) + c.rgb
        v = b[i]
        v.xy = c.wz
        v.b = 7.0
        v.yz += kd.vec2(1.0, 2.0)
        out[i, 2] = v
        a[i].xw = v.zx  # into an element of an array
        f[i] = kd.dot(c.xy, c.yx) + c.r * c.a


@kd.kernel
def swizzle_past_the_end(a: kd.Array[kd.vec2]):
    return a[0].xyz


@kd.kernel
def swizzle_assigned_twice(a: kd.Array[kd.vec3]):
    v = a[0]
    v.xx = kd.vec2(1.0)
    return v


def test_swizzles_read_and_assign_components(rng):
    n = 19
    a = rng.normal(size=(n, 4)).astype(np.float32)
    b = rng.normal(size=(n, 3)).astype(np.float32)
    original = a.copy()
    out = np.zeros((n, 3, 3), np.float32)
    f = np.zeros(n, np.float32)
    check(swizzles, a, b, out, f)
    np.testing.assert_array_equal(out[:, 0], original[:, 2::-1])
    np.testing.assert_array_equal(out[:, 2, 0], original[:, 3])
    np.testing.assert_array_equal(out[:, 2, 2], np.float32(9.0))
    np.testing.assert_array_equal(a[:, 0], out[:, 2, 2])  # a[i].xw = v.zx
    np.testing.assert_array_equal(a[:, 1:3], original[:, 1:3])


def test_swizzles_in_plain_python():
    v = kd.vec4(1.0, 2.0, 3.0, 4.0)
    assert v.zyx.tolist() == [3.0, 2.0, 1.0] and v.rgb.x == 1.0 and v.a == 4.0
    v.yx = kd.vec2(-1.0, -2.0)
    assert v.tolist() == [-2.0, -1.0, 3.0, 4.0]


@pytest.mark.parametrize("kernel, message", [
    (swizzle_past_the_end, "vec2 has no component 'z'"),
    (swizzle_assigned_twice, "names a component twice"),
])
def test_a_wrong_swizzle_is_refused_in_both_modes(kernel, message):
    a = np.ones((2, kernel is swizzle_past_the_end and 2 or 3), np.float32)
    with pytest.raises(kd.CompileError, match=message):
        kernel(a)
    with pytest.raises(AttributeError):
        kernel.python(a)


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


# --- Taichi's n-body: v.norm(eps) and v.normalized(eps) ---

BODIES = 48


@kd.kernel(fastmath=False)
def gravity(pos: kd.Array[kd.vec2], force: kd.Array[kd.vec2], direction: kd.Array[kd.vec2]):
    for i in kd.prange(BODIES):
        p = pos[i]
        total = kd.vec2(0.0)
        for j in range(BODIES):
            if i != j:
                diff = p - pos[j]
                r = diff.norm(1e-5)  # Taichi's: sqrt(diff.dot(diff) + eps)
                total += -25.0 * (1.0 / r) ** 3 * diff
        force[i] = total
        direction[i] = total.normalized(eps=1e-6)


def test_taichi_norm_and_normalized_take_an_epsilon(rng):
    pos = rng.random((BODIES, 2)).astype(np.float32)
    force = np.zeros_like(pos)
    direction = np.zeros_like(pos)
    check(gravity, pos, force, direction)
    lengths = np.sqrt((direction.astype(np.float64) ** 2).sum(1))
    np.testing.assert_allclose(lengths, 1.0, rtol=1e-4)
    v = kd.vec2(3.0, 4.0)
    assert v.norm(11.0) == np.float32(6.0) and v.norm() == np.float32(5.0)
    assert v.normalized(5.0).tolist() == [0.30000001192092896, 0.4000000059604645]

"""Small vectors and matrices: construction, arithmetic, @, dot, cross, length,
normalize, outer, transpose, components; arrays of vectors and matrices; returning
vectors, matrices and tuples."""

import numpy as np
import pytest
from kdsl_cpu_util import assert_same, check, nonzero_floats, nonzero_ints

import kdsl as kd

N = 45
F32 = dict(rtol=2e-5, atol=2e-6)


@kd.kernel
def vec3_basics(pos: kd.Array[kd.vec3], out: kd.Array[kd.vec3], s: kd.Array[kd.f32]):
    for i in kd.prange(pos.shape[0]):
        p = pos[i]
        a = kd.vec3(p.x, p.y * 2.0, p[2])
        b = kd.vec3(1.5)
        c = a * 2.0 + b / 3.0 - p * p
        c.y = c.y + 1.0
        c[2] = -c[0]
        d = 0.5 * c - 1.0
        d += p
        d *= 2.0
        out[i] = d
        s[i] = kd.dot(a, b) + kd.length(p) + p.x * p.y - p[1]


def test_vec3_construction_components_arithmetic(rng):
    pos = nonzero_floats(rng, (N, 3))
    out, s = np.zeros((N, 3), np.float32), np.zeros(N, np.float32)
    check(vec3_basics, pos, out, s, **F32)


@kd.kernel
def vec_ops(a: kd.Array[kd.vec3], b: kd.Array[kd.vec3], out: kd.Array[kd.vec3],
            lengths: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        c = kd.cross(a[i], b[i])
        n = kd.normalize(c)
        out[i] = n * kd.dot(a[i], b[i]) + kd.vec3(kd.sqrt(kd.dot(n, n)))
        lengths[i] = kd.length(c)


def test_cross_normalize_dot_length(rng):
    a, b = nonzero_floats(rng, (N, 3)), nonzero_floats(rng, (N, 3))
    out, lengths = np.zeros((N, 3), np.float32), np.zeros(N, np.float32)
    check(vec_ops, a, b, out, lengths, **F32)
    np.testing.assert_allclose(lengths, np.linalg.norm(np.cross(a, b), axis=1), rtol=1e-5)


@kd.kernel
def mat_ops(a: kd.Array[kd.vec3], b: kd.Array[kd.vec3], m: kd.Array[kd.mat33],
            out_v: kd.Array[kd.vec3], out_m: kd.Array[kd.mat33]):
    for i in kd.prange(a.shape[0]):
        o = kd.outer(a[i], b[i])
        t = kd.transpose(m[i])
        r = m[i] @ a[i]
        mm = m[i] @ t + o * 0.5
        mm[0, 1] = mm[1, 0] + 7.0
        mm[2, 2] = r[0]
        out_v[i] = r + m[i].T @ b[i]
        out_m[i] = mm - 2.0 * kd.mat33(1.0)


def test_matrix_products_outer_transpose(rng):
    a, b = nonzero_floats(rng, (N, 3)), nonzero_floats(rng, (N, 3))
    m = nonzero_floats(rng, (N, 3, 3))
    out_v, out_m = np.zeros((N, 3), np.float32), np.zeros((N, 3, 3), np.float32)
    check(mat_ops, a, b, m, out_v, out_m, **F32)
    np.testing.assert_allclose(out_v, np.einsum("nij,nj->ni", m, a) + np.einsum("nji,nj->ni", m, b),
                               rtol=1e-4, atol=1e-5)


@kd.kernel
def mat_construction(x: kd.Array[kd.f32], out2: kd.Array[kd.mat22], out4: kd.Array[kd.mat44]):
    for i in kd.prange(x.shape[0]):
        v = x[i]
        m2 = kd.mat22(v, 2.0 * v, -v, 1.0)
        out2[i] = m2 @ m2
        m4 = kd.mat44(v)
        m4[3, 0] = 5.0
        q = kd.vec4(v, 1.0, 2.0, 3.0)
        w = m4 @ q
        out4[i] = kd.outer(w, q) + kd.transpose(m4)


def test_mat22_mat44(rng):
    x = nonzero_floats(rng, N)
    out2, out4 = np.zeros((N, 2, 2), np.float32), np.zeros((N, 4, 4), np.float32)
    check(mat_construction, x, out2, out4, **F32)


@kd.kernel
def other_vectors(x: kd.Array[kd.f64], out2: kd.Array[kd.vec2], out4: kd.Array[kd.vec4],
                  outd: kd.Array[kd.vec3d], outi: kd.Array[kd.ivec3]):
    for i in kd.prange(x.shape[0]):
        v2 = kd.vec2(x[i], 1.0)
        v2.y = v2.x * 3.0
        out2[i] = v2 * v2 - 1.0
        v4 = kd.vec4(v2, v2 * 2.0)
        v4.w = kd.length(v4)
        out4[i] = v4
        d = kd.vec3d(x[i], x[i] * x[i], 1.0 / x[i])
        outd[i] = kd.cross(d, kd.vec3d(1.0, 2.0, 3.0)) * 0.1
        n = kd.ivec3(i, 2 * i, -i)
        n.z = n.z * 3
        outi[i] = n + kd.ivec3(1) - n // 2


def test_vec2_vec4_vec3d_ivec3(rng):
    x = nonzero_floats(rng, N, np.float64)
    out2, out4 = np.zeros((N, 2), np.float32), np.zeros((N, 4), np.float32)
    outd, outi = np.zeros((N, 3)), np.zeros((N, 3), np.int32)
    check(other_vectors, x, out2, out4, outd, outi, **F32)
    np.testing.assert_array_equal(outi[:, 0], np.arange(N) + 1 - np.arange(N) // 2)


@kd.kernel
def dynamic_components(a: kd.Array[kd.vec4], out: kd.Array[kd.vec4], s: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        v = a[i]
        total = 0.0
        for k in range(4):
            total += v[k] * (k + 1)
            v[k] = v[k] * k
        s[i] = total
        out[i] = v


def test_dynamic_component_index(rng):
    a = nonzero_floats(rng, (N, 4))
    out, s = np.zeros((N, 4), np.float32), np.zeros(N, np.float32)
    check(dynamic_components, a, out, s, **F32)


@kd.kernel
def vector_math(a: kd.Array[kd.vec3], out: kd.Array[kd.vec3, 1]):
    for i in kd.prange(a.shape[0]):
        v = a[i]
        w = kd.sqrt(kd.abs(v)) + kd.floor(v) + kd.max(v, kd.vec3(0.5)) - kd.min(v, 0.25)
        out[i] = kd.clamp(w, -2.0, 3.0) + kd.sin(v) * kd.exp(v * 0.1)


def test_math_on_vectors(rng):
    a = nonzero_floats(rng, (N, 3))
    out = np.zeros((N, 3), np.float32)
    check(vector_math, a, out, **F32)


@kd.kernel
def vector_returns(a: kd.Array[kd.vec3]):
    s = kd.vec3(0.0)
    for i in range(a.shape[0]):
        s += a[i]
    m = kd.outer(s, a[0])
    return s, kd.length(s), m, a.shape[0]


def test_return_vector_scalar_matrix_tuple(rng):
    a = nonzero_floats(rng, (N, 3))
    s, length, m, n = check(vector_returns, a, **F32)
    assert type(s) is np.ndarray and s.dtype == np.float32 and s.shape == (3,)
    assert type(m) is np.ndarray and m.shape == (3, 3)
    assert isinstance(length, np.float32)
    assert n == N


@kd.kernel
def return_vector_only(x: kd.Array[kd.f64]):
    return kd.vec3d(x[0], x[1], x[0] * x[1])


def test_return_vec3d(rng):
    x = nonzero_floats(rng, 2, np.float64)
    r = check(return_vector_only, x)
    assert r.dtype == np.float64 and r.shape == (3,)


@kd.kernel
def matvec_component(m: kd.mat33, v: kd.vec3):
    r = m @ v
    return r.x + r.z


# Regression test (was a kdsl bug): in plain-Python mode m @ v is a Matrix, not a Vector, so
# (m @ v).x raises AttributeError in kernel.python
def test_python_mode_matvec_is_a_vector():
    m, v = kd.mat33(*range(1, 10)), kd.vec3(1.0, -2.0, 0.5)
    assert_same(matvec_component.python(m, v), matvec_component(m, v))


@kd.kernel
def vector_arguments(a, v, m):
    return m @ (a[0] * v), v.x + v[2]


@kd.kernel
def annotated_vector_arguments(a, v: kd.vec3, m: kd.mat33):
    return m @ (a[0] * v), v.x + v[2]


def test_annotated_vector_and_matrix_arguments(rng):
    a = nonzero_floats(rng, 3)
    v = kd.vec3(1.0, -2.0, 0.5)
    m = kd.mat33(*nonzero_floats(rng, 9).tolist())
    r, s = check(annotated_vector_arguments, a, v, m, **F32)
    assert r.shape == (3,)
    r, s = check(annotated_vector_arguments, a, (1.0, -2.0, 0.5), np.eye(3, dtype=np.float32), **F32)


# Regression test (was a kdsl bug): an unannotated kd.vec3/kd.mat33 argument (a
# Vector/Matrix, ndarray subclasses) is typed as a 1-D/2-D array
def test_unannotated_vector_and_matrix_arguments(rng):
    a = nonzero_floats(rng, 3)
    v = kd.vec3(1.0, -2.0, 0.5)
    m = kd.mat33(*nonzero_floats(rng, 9).tolist())
    r, s = check(vector_arguments, a, v, m, **F32)
    assert r.shape == (3,)


@kd.kernel
def annotated_vector_argument(pos: kd.Array[kd.vec3], g: kd.vec3, dt: kd.f32):
    for i in kd.prange(pos.shape[0]):
        pos[i] = pos[i] + g * dt


def test_annotated_vector_argument_from_tuple_and_array(rng):
    pos = nonzero_floats(rng, (N, 3))
    check(annotated_vector_argument, pos, np.array([0.0, -9.8, 0.5], np.float32), 0.01, **F32)
    before = pos.copy()
    annotated_vector_argument(pos, kd.vec3(0.0, -9.8, 0.5), 0.01)
    np.testing.assert_allclose(pos[:, 1], before[:, 1] - np.float32(0.098), rtol=1e-5)


@kd.kernel
def ivec_ops(a: kd.Array[kd.ivec3], out: kd.Array[kd.ivec3]):
    for i in kd.prange(a.shape[0]):
        v = a[i]
        out[i] = v * 3 - kd.ivec3(1, 2, 3) + v % 4 + kd.abs(v)


def test_integer_vectors(rng):
    a = nonzero_ints(rng, (N, 3), np.int32)
    out = np.zeros((N, 3), np.int32)
    check(ivec_ops, a, out)


@kd.kernel
def array_of_mat22_2d(m: kd.Array[kd.mat22, 2], out: kd.Array[kd.f32, 2]):
    for i, j in kd.ndrange(m.shape[0], m.shape[1]):
        a = m[i, j]
        out[i, j] = a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]


def test_2d_array_of_matrices(rng):
    m = nonzero_floats(rng, (7, 5, 2, 2))
    out = np.zeros((7, 5), np.float32)
    check(array_of_mat22_2d, m, out, **F32)
    np.testing.assert_allclose(out, np.linalg.det(m), rtol=1e-4, atol=1e-5)


@kd.kernel
def strided_vectors(pos: kd.Array[kd.vec3], out: kd.Array[kd.f32]):
    for i in kd.prange(pos.shape[0]):
        out[i] = pos[i].x - pos[i].z * 2.0


def test_array_of_vectors_with_strides(rng):
    base = nonzero_floats(rng, (2 * N, 5))
    out = np.zeros(N, np.float32)
    view = base[::2, 1:4]  # rows every other, columns 1..3: non-contiguous
    check(strided_vectors, view, out)
    np.testing.assert_array_equal(out, view[:, 0] - view[:, 2] * np.float32(2.0))


@kd.kernel
def matrix_row(m: kd.Array[kd.mat33], out: kd.Array[kd.vec3]):
    for i in kd.prange(m.shape[0]):
        out[i] = m[i][1] + m[i][2] * 2.0


def test_matrix_row_extraction(rng):
    m = nonzero_floats(rng, (N, 3, 3))
    out = np.zeros((N, 3), np.float32)
    check(matrix_row, m, out, **F32)


def test_annotated_vector_array_rejects_wrong_shape():
    with pytest.raises(TypeError, match="pos"):
        strided_vectors(np.zeros((4, 2), np.float32), np.zeros(4, np.float32))


def test_vector_result_is_independent_copy(rng):
    a = nonzero_floats(rng, (N, 3))
    s, *_ = vector_returns(a)
    before = s.copy()
    vector_returns(a * 2)
    assert_same(s, before)


def test_array_of_vectors_with_reversed_component_axis(rng):
    base = nonzero_floats(rng, (N, 3))
    out = np.zeros(N, np.float32)
    view = base[::-1, ::-1]  # rows and components reversed: negative strides on both axes
    check(strided_vectors, view, out)
    np.testing.assert_array_equal(out, base[::-1, 2] - base[::-1, 0] * np.float32(2.0))

"""Vector and matrix constructs of programs ported from Taichi, Warp and Numba: mixed
float/integer element types, list literals, ``int(v)``, ``kd.trace``,
``kd.determinant``, ``kd.inverse`` and Taichi's method names. Each kernel runs compiled
and as plain Python (and on the emulated CUDA device, through ``check``)."""

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source, nonzero_floats, nonzero_ints

import kdsl as kd

N = 37
F32 = dict(rtol=2e-5, atol=2e-5)


@kd.kernel
def mixed_elements(x: kd.Array[kd.vec2], base: kd.Array[kd.ivec2], m: kd.Array[kd.mat22],
                   out: kd.Array[kd.vec2], k: kd.i32):
    for i in kd.prange(x.shape[0]):
        fx = x[i] - base[i]                    # vec2 - ivec2 is a vec2
        w = 0.5 * (1.5 - fx) * (1.5 - fx)
        out[i] = m[i] @ fx + w * k + base[i] * fx + m[i] @ base[i]
    return x[0] - base[0], base[0] + x[0] * k


def test_float_and_integer_vectors_keep_the_float_type(rng):
    x = nonzero_floats(rng, (N, 2))
    base = nonzero_ints(rng, (N, 2), np.int32, -4, 4)
    m = nonzero_floats(rng, (N, 2, 2))
    out = np.zeros((N, 2), np.float32)
    first, second = check(mixed_elements, x, base, m, out, np.int32(3), **F32)
    assert first.dtype == np.float32 and second.dtype == np.float32
    expected = np.einsum("nij,nj->ni", m, x - base) + 0.5 * (1.5 - (x - base)) ** 2 * 3 \
        + base * (x - base) + np.einsum("nij,nj->ni", m, base)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_python_mode_vector_arithmetic_keeps_the_float_type():
    v, iv = kd.vec3(1.5, 2.5, 3.5), kd.ivec3(1, 2, 3)
    for result in (v - iv, iv * v, v * np.int32(2), np.float32(2) * iv, kd.dot(v, iv),
                   kd.cross(v, iv)):
        assert np.asarray(result).dtype == np.float32
    assert (iv * 0.5).dtype == np.float64  # a Python float is weak: NumPy's rule
    v += iv
    assert isinstance(v, kd.builtins.Vector) and v.dtype == np.float32


def test_float64_promotion_error_names_its_line():
    k = kernel_from_source('''
        @kd.kernel
        def k(m: kd.Array[kd.mat22], x: kd.Array[kd.vec2], s: kd.f64, out: kd.Array[kd.vec2]):
            for i in kd.prange(x.shape[0]):
                d = x[i] * s
                e = d + 1.0
                out[i] = m[i] @ e
    ''')
    m, x = np.ones((3, 2, 2), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(kd.CompileError) as info:
        k(m, x, 2.0, np.zeros((3, 2), np.float32))
    message = str(info.value)
    assert "@ needs matching element types, got mat22 and vec2d" in message
    assert "the float64 comes from vec2 and f64 at line" in message and "`d = x[i] * s`" in message
    assert info.value.lineno == info.value.location.line  # located at the @ itself
    assert "out[i] = m[i] @ e" in message


@kd.kernel
def taichi_methods(a: kd.Array[kd.vec3], b: kd.Array[kd.vec3], m: kd.Array[kd.mat33],
                   s: kd.Array[kd.f32], v: kd.Array[kd.vec3], o: kd.Array[kd.mat33]):
    for i in kd.prange(a.shape[0]):
        p, q, mi = a[i], b[i], m[i]
        s[i] = p.norm() + p.dot(q) + p.norm_sqr() + mi.trace() + mi.determinant()
        v[i] = p.normalized() + p.cross(q) + mi.transpose() @ q + mi.T @ p
        o[i] = p.outer_product(q) + mi.inverse() + kd.transpose(mi)


def test_taichi_method_names(rng):
    a, b = nonzero_floats(rng, (N, 3)), nonzero_floats(rng, (N, 3))
    m = nonzero_floats(rng, (N, 3, 3)) + 4 * np.eye(3, dtype=np.float32)
    s, v, o = np.zeros(N, np.float32), np.zeros((N, 3), np.float32), np.zeros((N, 3, 3), np.float32)
    check(taichi_methods, a, b, m, s, v, o, rtol=1e-4, atol=1e-4)
    expected = (np.linalg.norm(a, axis=1) + (a * b).sum(1) + (a * a).sum(1)
                + np.trace(m, axis1=1, axis2=2) + np.linalg.det(m))
    np.testing.assert_allclose(s, expected, rtol=1e-4)
    np.testing.assert_allclose(o, np.einsum("ni,nj->nij", a, b) + np.linalg.inv(m)
                               + m.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


def _matrix_kernel(size: int):
    return kernel_from_source(f'''
        @kd.kernel
        def k(m: kd.Array[kd.mat{size}{size}], det: kd.Array[kd.f32], inv: kd.Array[kd.mat{size}{size}],
              tr: kd.Array[kd.f32]):
            for i in kd.prange(m.shape[0]):
                det[i] = kd.determinant(m[i])
                inv[i] = kd.inverse(m[i])
                tr[i] = kd.trace(m[i])
    ''')


@pytest.mark.parametrize("size", [2, 3, 4])
def test_trace_determinant_inverse_against_numpy(rng, size):
    k = _matrix_kernel(size)
    m = nonzero_floats(rng, (N, size, size)) + 3 * np.eye(size, dtype=np.float32)
    det, inv, tr = np.zeros(N, np.float32), np.zeros((N, size, size), np.float32), np.zeros(N, np.float32)
    check(k, m, det, inv, tr, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(det, np.linalg.det(m.astype(np.float64)), rtol=1e-4)
    np.testing.assert_allclose(inv, np.linalg.inv(m.astype(np.float64)), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(tr, np.trace(m, axis1=1, axis2=2), rtol=1e-5)
    np.testing.assert_allclose(np.einsum("nij,njk->nik", m, inv), np.broadcast_to(np.eye(size), m.shape),
                               atol=1e-3)


@kd.kernel
def list_literals(x: kd.Array[kd.f32], v: kd.Array[kd.vec2], m: kd.Array[kd.mat22],
                  w: kd.Array[kd.vec3], iv: kd.Array[kd.ivec2]):
    for i in kd.prange(x.shape[0]):
        s = x[i]
        v[i] = [0, 0]
        if s > 0:
            v[i] = [s, 2 * s]
        m[i] = kd.mat22([[s, 0], [0, s]]) + kd.mat22([1.0, 2.0, 3.0, 4.0])
        w[i] = kd.vec3([s, 1, -s]) + kd.vec3((2, 3, 4))
        iv[i] = kd.ivec2(v[i] * 3.0)      # conversion, truncating toward zero
        iv[i] += kd.ivec2([1, -1])


def test_list_literals_as_values(rng):
    x = nonzero_floats(rng, N)
    args = (x, np.ones((N, 2), np.float32), np.zeros((N, 2, 2), np.float32),
            np.zeros((N, 3), np.float32), np.zeros((N, 2), np.int32))
    check(list_literals, *args)
    v = np.where(x[:, None] > 0, np.stack([x, 2 * x], 1), 0)
    np.testing.assert_array_equal(args[1], v)
    np.testing.assert_array_equal(args[4], np.trunc(v * 3).astype(np.int32) + [1, -1])


def test_int_of_a_vector_points_at_the_conversion():
    k = kernel_from_source('''
        @kd.kernel
        def k(x: kd.Array[kd.vec2], out: kd.Array[kd.ivec2]):
            for i in kd.prange(x.shape[0]):
                out[i] = int(x[i])
    ''')
    x, out = np.ones((3, 2), np.float32), np.zeros((3, 2), np.int32)
    with pytest.raises(kd.CompileError, match=r"int\(\) of a vec2 .*kd\.ivec2\(v\)"):
        k(x, out)
    with pytest.raises(TypeError, match=r"kd\.ivec2\(v\)"):
        k.python(x, out)
    with pytest.raises(TypeError, match=r"kd\.vec3\(v\)"):
        float(kd.ivec3(1, 2, 3))


def test_bad_list_literals_are_located_errors():
    k = kernel_from_source('''
        @kd.kernel
        def k(v: kd.Array[kd.vec3]):
            for i in kd.prange(v.shape[0]):
                v[i] = [1.0, 2.0]
    ''')
    with pytest.raises(kd.CompileError, match="vec3 takes 3 components, got a list of 2"):
        k(np.zeros((2, 3), np.float32))
    k2 = kernel_from_source('''
        @kd.kernel
        def k(m: kd.Array[kd.mat22], out: kd.Array[kd.f32]):
            for i in kd.prange(m.shape[0]):
                out[i] = kd.determinant(kd.vec2(1.0))
    ''')
    with pytest.raises(kd.CompileError, match=r"determinant\(\) needs a square matrix"):
        k2(np.zeros((2, 2, 2), np.float32), np.zeros(2, np.float32))


def test_float64_promotion_through_a_loop_names_its_line():
    k = kernel_from_source('''
        @kd.kernel
        def k(m: kd.Array[kd.mat22], x: kd.Array[kd.vec2], s: kd.f64, out: kd.Array[kd.vec2]):
            for i in kd.prange(x.shape[0]):
                d = kd.vec2(0.0)
                for step in range(3):
                    d += x[i] * s
                out[i] = m[i] @ d
    ''')
    with pytest.raises(kd.CompileError, match=r"got mat22 and vec2d \(the float64 comes from "
                       r"vec2 and f64 at line \d+: `d \+= x\[i\] \* s`"):
        k(np.ones((3, 2, 2), np.float32), np.ones((3, 2), np.float32), 2.0,
          np.zeros((3, 2), np.float32))

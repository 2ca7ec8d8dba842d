"""Matrices indexed as Warp and Taichi users index them: ``m[i, j]`` and ``m[i]`` with
indices known only at run time (negative ones counting from the end), read, assigned,
and differentiated."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def run_time_indices(m: kd.Array[kd.mat33], out: kd.Array[kd.f32, 2], rows: kd.Array[kd.vec3]):
    for p in kd.prange(m.shape[0]):
        a = m[p]
        for i in range(3):
            for j in range(3):
                out[p, i * 3 + j] = a[i, j] + a[-1, j] * a[i, -3]
            rows[p] = a[i] + a[p % 3] - a[-1 - p % 3]
        a[p % 3, (p + 1) % 3] = 100.0
        a[-1, -1] = 7.0
        m[p] = a
        m[p][p % 2, 2] = -1.0


def test_matrix_components_at_run_time_indices(rng):
    m = rng.normal(size=(7, 3, 3)).astype(np.float32)
    original = m.copy()
    out = np.zeros((7, 9), np.float32)
    rows = np.zeros((7, 3), np.float32)
    check(run_time_indices, m, out, rows, rtol=1e-6)
    expected = original + original[:, -1:, :] * original[:, :, :1]
    assert np.allclose(out.reshape(7, 3, 3), expected, rtol=1e-6)
    stored = original.copy()
    for p in range(7):
        stored[p, p % 3, (p + 1) % 3] = 100.0
        stored[p, -1, -1] = 7.0
        stored[p, p % 2, 2] = -1.0
    assert np.array_equal(m, stored)


@kd.kernel
def weighted_trace(m: kd.Array[kd.mat33d], k: kd.i64):
    s = 0.0
    for p in range(m.shape[0]):
        a = m[p]
        for i in range(3):
            s += a[i, (i + k) % 3] * a[i][i]
    return s


def test_gradients_flow_through_run_time_matrix_indices(rng):
    m = rng.normal(size=(4, 3, 3))
    kd.check_grad(weighted_trace, m, 1)
    grad = kd.grad(weighted_trace)(m, 0)
    assert np.allclose(grad, 2 * np.eye(3) * m)


@kd.kernel(debug=True)
def component_at(a: kd.Array[kd.vec3], m: kd.Array[kd.mat22], k: kd.i64):
    v = a[0]
    mm = m[0]
    return v[k] + mm[k, 0]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_debug_mode_reports_a_component_index_out_of_range(device, request):
    if device == "cuda":
        request.getfixturevalue("emulated_cuda")
    a = kd.array(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    m = kd.array(np.arange(4, dtype=np.float32).reshape(1, 2, 2), device=device)
    assert component_at(a, m, -1) == 2.0 + 2.0  # counts from the end
    with pytest.raises(IndexError, match="index 2 is out of bounds for axis 0 of 'mm' with size 2"):
        component_at(a, m, 2)
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 of 'v' with size 3"):
        component_at(a, m, -4)


@pytest.fixture
def emulated_cuda():
    from kdsl.runtime.cuda import driver
    from kdsl.runtime.cuda.emulator import EmulatedDriver

    previous = driver.current_driver()
    driver.set_driver(EmulatedDriver())
    yield
    driver.set_driver(previous)


@kd.kernel
def transform(m: kd.Array[kd.mat33], v: kd.Array[kd.vec3], out: kd.Array[kd.vec3]):
    for i in kd.prange(m.shape[0]):
        out[i] = m[i] @ v[i]


@kd.kernel
def transform_f64(m: kd.Array[kd.mat33d], v: kd.Array[kd.vec3d], out: kd.Array[kd.vec3d]):
    for i in kd.prange(m.shape[0]):
        out[i] = m[i] @ v[i]


def test_arrays_of_matrices_are_read_as_whole_rows(rng):
    """A 3x3 matrix spans 9 elements: the vectoriser loads whole f32 matrices and
    shuffles them apart, and leaves a loop streaming f64 matrices to vectorise each
    iteration on its own, instead of gathering each component (several times slower)."""
    for kernel, dtype in ((transform, np.float32), (transform_f64, np.float64)):
        m = rng.normal(size=(37, 3, 3)).astype(dtype)
        v = rng.normal(size=(37, 3)).astype(dtype)
        out = np.zeros_like(v)
        check(kernel, m, v, out, rtol=1e-5)
        assert np.allclose(out, np.einsum("nij,nj->ni", m, v), rtol=1e-5, atol=1e-6)
        assert "llvm.masked.gather" not in kernel.llvm_ir(m, v, out, optimized=True)


@kd.kernel
def row_vector_products(v: kd.Array[kd.vec3d], m: kd.Array[kd.mat33d], w: kd.Array[kd.vec2]):
    """As in NumPy: ``v @ m`` is the row vector ``v`` times ``m``, ``v @ v`` a dot."""
    s = 0.0
    for i in range(v.shape[0]):
        r = v[i] @ m[i]
        s += r.x + 2.0 * r.y + 3.0 * r.z + v[i] @ v[i] + w[i] @ kd.mat22(1.0, 2.0, 3.0, 4.0) @ w[i]
    return s


def test_vector_at_matrix_is_a_row_vector_product(rng):
    v, m = rng.normal(size=(5, 3)), rng.normal(size=(5, 3, 3))
    w = rng.normal(size=(5, 2)).astype(np.float32)
    total = check(row_vector_products, v, m, w, rtol=1e-12)
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    expected = sum(v[i] @ m[i] @ [1.0, 2.0, 3.0] + v[i] @ v[i] + w[i] @ a @ w[i] for i in range(5))
    assert np.isclose(total, expected, rtol=1e-6)
    kd.check_grad(row_vector_products, v, m, w, argnums=(0, 1))

"""Arrays of small matrices read with scalar indices (``f[p, r, k]`` of an ``(N, 3, 3)``
array): a C-contiguous array whose last two axes are short is specialised on both sizes,
so the stride of its first axis is a constant too and the loads of one matrix vectorise
as one interleaved group. Each kernel is checked against its own Python function (and on
the emulated CUDA device) and NumPy, alternating with arrays of other sizes call after
call, which is where the compiled call path must send each to its own specialisation."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats
from kdsl_row_kernels import pixel_sums

import kdsl as kd
from kdsl import types as T
from kdsl.ir.parser import parse_type
from kdsl.runtime.arguments import argument_key, argument_layout


@kd.kernel
def deform(f, c, v, out, g, dt: kd.f32):
    """``F v`` and ``F + dt C F`` per matrix, sizes read from the arrays."""
    m = f.shape[1]
    for p in kd.prange(f.shape[0]):
        for r in range(m):
            s = 0.0
            for k in range(f.shape[2]):
                s += f[p, r, k] * v[p, k]
            out[p, r] = s
            for k in range(f.shape[2]):
                t = f[p, r, k]
                for q in range(m):
                    t += dt * c[p, r, q] * f[p, q, k]
                g[p, r, k] = t


def _deform_numpy(f, c, v, dt):
    return np.einsum("prk,pk->pr", f, v), f + dt * np.einsum("prq,pqk->prk", c, f)


@pytest.mark.parametrize("m, dtype", [(3, np.float32), (3, np.float64), (2, np.float32),
                                      (2, np.float64), (4, np.float64)])
def test_small_matrices_match_python_and_numpy(rng, m, dtype):
    n = 37
    f, c = (nonzero_floats(rng, (n, m, m), dtype) for _ in range(2))
    v = nonzero_floats(rng, (n, m), dtype)
    out, g = np.zeros((n, m), dtype), np.zeros((n, m, m), dtype)
    check(deform, f, c, v, out, g, 0.25, rtol=1e-5, atol=1e-5)
    want_out, want_g = _deform_numpy(f.astype(np.float64), c, v, 0.25)
    np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-4)
    assert np.abs(g).max() > 0.1
    # matrices of up to 64 bytes have both sizes fixed; wider ones stream faster with a
    # runtime stride
    fixed = f"?x{m}x{m}>" if m * m * f.itemsize <= 64 else f"?x{m}>"
    assert f"array<{'f32' if dtype == np.float32 else 'f64'}, 3, C, {fixed}" in deform.ir(
        f, c, v, out, g, 0.25)
    from kdsl.runtime.fast_call import SLOW

    deform(f, c, v, out, g, 0.25)
    deform(f, c, v, out, g, 0.25)
    assert deform._fast.function(f, c, v, out, g, 0.25) is not SLOW


def test_one_specialisation_per_pair_of_sizes_called_in_turn(rng):
    """Each shape twice in a row (the second call builds the compiled call path the next
    shape's first call meets): only the middle axis differs between some of them."""

    @kd.kernel
    def weighted(a, out):
        for i in kd.prange(a.shape[0]):
            s = 0.0
            for j in range(a.shape[1]):
                for k in range(a.shape[2]):
                    s += a[i, j, k] * (j + 1) * (k + 2)
            out[i] = s

    shapes = [(9, 3, 3), (9, 4, 3), (9, 3, 2), (9, 12, 3), (9, 3, 3), (9, 2, 3)]
    for shape in shapes + shapes[::-1]:
        a = nonzero_floats(rng, shape, np.float32)
        want = (a * np.arange(1, shape[1] + 1)[:, None] * np.arange(2, shape[2] + 2)).sum((1, 2))
        for _ in range(2):
            out = np.zeros(9, np.float32)
            weighted(a, out)
            np.testing.assert_allclose(out, want, rtol=1e-5)
    from kdsl.runtime.fast_call import SLOW

    assert weighted._fast.function(a, out) is not SLOW  # the last shape: (9, 3, 3)
    assert weighted._fast.function(np.zeros((9, 4, 3), np.float32), out) is SLOW
    compiled = {id(c): str(c.params[0].type) for c in weighted._specialisations.values()}
    assert sorted(compiled.values()) == sorted([
        "array<f32, 3, C, ?x2x3>", "array<f32, 3, C, ?x3x2>", "array<f32, 3, C, ?x3x3>",
        "array<f32, 3, C, ?x3>", "array<f32, 3, C, ?x4x3>"])


def test_images_and_four_axes(rng):
    image = nonzero_floats(rng, (7, 5, 3), np.float32)
    out = np.zeros((7, 5), np.float32)
    check(pixel_sums, image, out, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(out, (image * np.arange(1, 4)).sum(2), rtol=1e-5)
    assert "?x5x3" in pixel_sums.ir(image, out)

    @kd.kernel
    def traces(a, out):
        for i in kd.prange(a.shape[0]):
            for j in range(a.shape[1]):
                s = 0.0
                for k in range(a.shape[2]):
                    s += a[i, j, k, k]
                out[i, j] = s

    stack = nonzero_floats(rng, (4, 6, 3, 3), np.float64)
    out = np.zeros((4, 6))
    check(traces, stack, out, rtol=1e-12)
    np.testing.assert_allclose(out, np.trace(stack, axis1=2, axis2=3), rtol=1e-12)


def test_vector_arrays_keep_the_compiled_call_path(rng):
    """An array of vectors has no middle axis to fix: a (M, 4, 3) array of vec3 still
    takes the compiled call path."""
    from kdsl.runtime.fast_call import SLOW

    @kd.kernel
    def lengths(p: kd.Array[kd.vec3, 2], out):
        for i in kd.prange(p.shape[0]):
            for j in range(p.shape[1]):
                out[i, j] = kd.dot(p[i, j], p[i, j])

    p = nonzero_floats(rng, (5, 4, 3), np.float32)
    out = np.zeros((5, 4), np.float32)
    check(lengths, p, out, rtol=1e-6)
    lengths(p, out)
    lengths(p, out)
    assert lengths._fast is not None and lengths._fast.function(p, out) is not SLOW
    np.testing.assert_allclose(out, (p.astype(np.float64) ** 2).sum(2), rtol=1e-5)


def test_what_is_fixed():
    assert argument_layout(np.zeros((10, 3, 3), np.float32))[4] == 3
    assert argument_layout(np.zeros((10, 2, 4), np.float64))[4] == 2
    assert argument_layout(np.zeros((10, 3, 3), np.float64))[4] is None  # 72 bytes
    assert argument_key(np.zeros((2, 3, 3))) == argument_key(np.zeros((2, 4, 3)))
    assert argument_layout(np.zeros((10, 9, 3), np.float32))[4] is None
    assert argument_layout(np.zeros((10, 3, 9), np.float32))[1:5:3] == (None, None)
    assert argument_layout(np.zeros((10, 3), np.float32))[4] is None
    assert argument_layout(np.zeros((10, 3, 3), np.float32)[::2])[4] is None
    assert argument_key(np.zeros((2, 3, 3), np.float32)) != argument_key(
        np.zeros((2, 4, 3), np.float32))
    annotation = T.ArrayType(T.vec3, 2)
    assert annotation.specialised(True, 3, None, False, 4) == T.ArrayType(T.vec3, 2, True)


def test_types_print_and_parse():
    t = T.ArrayType(T.f32, 3, True, 3, middle_axis_size=2)
    assert str(t) == "array<f32, 3, C, ?x2x3>"
    assert parse_type(str(t)) == t
    assert t.fixed_shape == (2, 3) and t.free_ndim == 1
    assert T.ArrayType(T.f32, 3, True, 3).holds(t) and not t.holds(T.ArrayType(T.f32, 3, True, 3))
    assert not t.holds(T.ArrayType(T.f32, 3, True, 3, middle_axis_size=4))


@kd.kernel
def deform_unrolled(f, c, v, out, g, dt: kd.f64):
    """The same with constant trip counts, as an MPM code writes it."""
    for p in kd.prange(f.shape[0]):
        for r in range(3):
            a0 = dt * c[p, r, 0]
            a1 = dt * c[p, r, 1]
            a2 = dt * c[p, r, 2]
            out[p, r] = f[p, r, 0] * v[p, 0] + f[p, r, 1] * v[p, 1] + f[p, r, 2] * v[p, 2]
            for k in range(3):
                g[p, r, k] = f[p, r, k] + a0 * f[p, 0, k] + a1 * f[p, 1, k] + a2 * f[p, 2, k]


def test_matrices_as_an_mpm_code_writes_them(rng):
    """3x3 f32 matrices (36 bytes) have both sizes fixed; f64 ones (72 bytes) stream
    faster with a runtime stride, as before the middle axis was fixed."""
    for dtype, fixed in ((np.float64, "?x3>"), (np.float32, "?x3x3>")):
        f = nonzero_floats(rng, (16, 3, 3), dtype)
        v = nonzero_floats(rng, (16, 3), dtype)
        args = (f, f.copy(), v, np.zeros_like(v), np.zeros_like(f), 0.5)
        check(deform_unrolled, *args, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(args[4], _deform_numpy(f, args[1], v, 0.5)[1], rtol=1e-4,
                                   atol=1e-4)
        assert fixed in deform_unrolled.ir(*args).splitlines()[0]


@kd.kernel
def _frobenius_energy(f) -> kd.f64:
    total = 0.0
    for p in kd.prange(f.shape[0]):
        for r in range(3):
            for k in range(3):
                total += f[p, r, k] * f[p, r, k] * (r + 2 * k + 1)
    return total


def test_gradient_of_small_matrices(rng):
    f = nonzero_floats(rng, (11, 3, 3), np.float32)
    weights = np.arange(3)[:, None] + 2 * np.arange(3)[None, :] + 1
    np.testing.assert_allclose(kd.grad(_frobenius_energy)(f), 2 * f * weights, rtol=1e-5)
    assert "?x3x3" in _frobenius_energy.ir(f)

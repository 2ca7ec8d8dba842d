"""``kd.static``: loops unrolled at compile time (Taichi's ``ti.static``), so small tuples
and lists of vectors and weights can be indexed by the loop variable. Each kernel runs
compiled, as plain Python, and on the emulated CUDA device (through ``check``)."""

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source, nonzero_floats

import kdsl as kd

WEIGHTS = (0.5, 0.25, 0.25)
STENCIL = [[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]


@kd.kernel
def quadratic_weights(x: kd.Array[kd.vec2], grid: kd.Array[kd.f32, 2], out: kd.Array[kd.vec2]):
    """The MLS-MPM pattern: three weight vectors, a 3x3 neighbourhood."""
    for p in kd.prange(x.shape[0]):
        base = kd.ivec2(x[p] - 0.5)
        fx = x[p] - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        acc = kd.vec2(0.0)
        for i, j in kd.static(kd.ndrange(3, 3)):
            weight = w[i].x * w[j].y
            acc += weight * grid[base.x + i, base.y + j] * kd.vec2(i, j)
        out[p] = acc


def test_ndrange_unrolled_indexes_a_list_of_vectors(rng):
    x = rng.uniform(1.0, 6.0, (40, 2)).astype(np.float32)
    grid = nonzero_floats(rng, (9, 9))
    out = np.zeros((40, 2), np.float32)
    check(quadratic_weights, x, grid, out, rtol=2e-5, atol=2e-5)
    assert np.abs(out).sum() > 0


@kd.kernel
def unrolled_ranges(a: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    offsets = (kd.ivec2(0, 1), kd.ivec2(1, 0), kd.ivec2(2, 2))
    for i in kd.prange(a.shape[0] - 2):
        s = 0.0
        for k in kd.static(range(3)):
            s += WEIGHTS[k] * a[i + k] + offsets[k].y
        for k in kd.static(range(2, -1, -1)):
            s = s * 0.5 + STENCIL[1][k]
        for o in kd.static(offsets):
            s += o.x * a[i]
        out[i] = s
    t = 0.0
    for step in range(3):  # a static loop inside a serial loop
        for k in kd.static(range(2)):
            t += a[step + k] * (k + 1)
    return t


def test_range_and_tuple_unrolled_inside_parallel_and_serial_loops(rng):
    a = nonzero_floats(rng, 50)
    out = np.zeros(50, np.float32)
    check(unrolled_ranges, a, out, rtol=1e-5, atol=1e-5)
    expected = 0.5 * a[:-2] + 0.25 * a[1:-1] + 0.25 * a[2:] + 3
    for k in (2, 1, 0):
        expected = expected * 0.5 + STENCIL[1][k]
    np.testing.assert_allclose(out[:-2], expected + 3 * a[:-2], rtol=1e-5)


def test_unrolled_loop_variable_is_a_constant():
    k = kernel_from_source('''
        @kd.kernel
        def k(v: kd.Array[kd.vec3], out: kd.Array[kd.f32]):
            for i in kd.prange(v.shape[0]):
                s = 0.0
                for c in kd.static(range(3)):
                    s += v[i][c] * (c + 1)
                out[i] = s
    ''')
    v = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    out = np.zeros(2, np.float32)
    check(k, v, out)
    ir = k.ir(v, out)
    assert " for " not in ir and "select" not in ir  # unrolled, constant component indices


@pytest.mark.parametrize("body, message", [
    ("for k in kd.static(range(n)):\n        s += k",
     r"kd.static\(range\(...\)\) needs compile-time integer bounds"),
    ("for k in kd.static(range(3)):\n        break",
     "break, continue and return are not supported in a kd.static"),
    ("for k in kd.static(n):\n        s += k", r"kd.static\(\) in a for loop needs range"),
    ("for k in kd.static(range(10000)):\n        s += k", "would unroll 10000 iterations"),
])
def test_static_loop_errors(body, message):
    k = kernel_from_source("@kd.kernel\ndef k(n: kd.i64):\n    s = 0\n    " + body
                           + "\n    return s\n")
    with pytest.raises(kd.CompileError, match=message):
        k(3)

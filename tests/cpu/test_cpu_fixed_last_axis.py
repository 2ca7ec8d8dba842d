"""Arrays of structures read with scalar indices (``pos[j, 0]``, ``pos[j, 1]``, ...): a
C-contiguous array whose last axis is short is specialised on that size, so every stride
is a constant and the loads of one row vectorise as one interleaved group. Each kernel is
checked against its own Python function (and on the emulated CUDA device) on the
specialised layout, on other sizes of the last axis and on strided views (the general
code, or padded rows: test_cpu_padded_rows.py)."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats, positive_floats
from kdsl_row_kernels import pair_energy, pixel_sums, scale_rows

import kdsl as kd


@kd.func
def pair_force(r2: kd.f32) -> kd.f32:
    inv = 1.0 / r2
    return inv * inv - 0.5 * inv


@kd.kernel
def forces_scalar(pos, acc, cutoff: kd.f32):
    """The n-body kernel of the benchmarks on an (N, 3) array of f32 or f64."""
    n = pos.shape[0]
    for i in kd.prange(n):
        ax = 0.0
        ay = 0.0
        az = 0.0
        for j in range(n):
            if j == i:
                continue
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff * cutoff:
                f = pair_force(r2)
                ax += f * dx
                ay += f * dy
                az += f * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az



@kd.kernel
def row_norms(a, out):
    for i in range(a.shape[0]):
        s = 0.0
        for k in range(a.shape[a.ndim - 1]):
            s += a[i, k] * a[i, k]
        out[i] = s



@kd.kernel
def scatter_components(index, values, grid):
    """Atomic updates of the components of an (M, 3) array in a parallel loop."""
    for i in kd.prange(index.shape[0]):
        cell = index[i]
        grid[cell, 0] += values[i, 0]
        grid[cell, 1] += values[i, 1]
        grid[cell, 2] += 2.0 * values[i, 2]


def _lattice(rng: np.random.Generator, n: int, dtype: type) -> np.ndarray:
    """Points on a jittered lattice (no two closer than about 0.8)."""
    side = int(np.ceil(n ** (1 / 3)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n]
    return (grid + rng.uniform(-0.1, 0.1, size=(n, 3))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nbody_scalar_indexed_matches_python_and_numpy(rng, dtype):
    pos = _lattice(rng, 45, dtype)
    acc = np.zeros_like(pos)
    check(forces_scalar, pos, acc, 1.6, rtol=1e-4, atol=1e-4)
    d = pos[:, None, :].astype(np.float64) - pos[None, :, :]
    r2 = (d * d).sum(-1)
    np.fill_diagonal(r2, np.inf)
    f = np.where(r2 < 1.6 ** 2, 1 / r2 ** 2 - 0.5 / r2, 0.0)
    np.testing.assert_allclose(acc, (f[..., None] * d).sum(1), rtol=1e-3, atol=1e-3)
    assert np.abs(acc).max() > 0.01


def test_nbody_on_strided_views(rng):
    """Every other row, and three columns of four: the general code, same results."""
    wide = np.zeros((90, 4), np.float32)
    wide[:, :3] = _lattice(rng, 90, np.float32)
    for pos in (wide[::2, :3], wide[:, :3]):
        assert not pos.flags.c_contiguous
        check(forces_scalar, pos, np.zeros(pos.shape, np.float32), 1.6, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, dtype", [
    ((37, 2), np.float32), ((37, 3), np.float32), ((37, 3), np.float64), ((37, 4), np.float64),
    ((37, 8), np.float32), ((37, 9), np.float32), ((37, 1), np.float64),
])
def test_rows_of_each_size(rng, shape, dtype):
    a = nonzero_floats(rng, shape, dtype)
    check(scale_rows, a, np.zeros_like(a), rtol=1e-6, atol=1e-5)  # a multiply-add may be fused
    check(row_norms, a, np.zeros(shape[0], dtype), rtol=1e-6)


def test_column_major_and_reversed_views(rng):
    base = nonzero_floats(rng, (3, 41), np.float32)
    for a in (base.T, base.T[::-1], np.asfortranarray(base.T)):
        assert not a.flags.c_contiguous
        check(scale_rows, a, np.zeros(a.shape, np.float32), rtol=1e-6, atol=1e-5)


def test_integer_arrays(rng):
    a = rng.integers(-100, 100, size=(29, 3)).astype(np.int32)
    check(scale_rows, a, np.zeros_like(a))


def test_one_kernel_called_with_each_layout_in_turn(rng):
    """The compiled call path of one specialisation must send the others back to
    dispatch: each layout is called twice in a row, so the second call builds the
    compiled path the next layout's first call then meets."""
    shapes = [(21, 3), (21, 4), (21, 3), (21, 5), (21, 2), (21, 3)]
    for shape in shapes:
        a = nonzero_floats(rng, shape, np.float32)
        want = a * np.arange(1, shape[1] + 1, dtype=np.float32) + a[:, ::-1]
        for _ in range(2):
            out = np.zeros_like(a)
            scale_rows(a, out)
            np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-5)
    for shape in shapes:
        a = nonzero_floats(rng, shape, np.float32)
        want = a * np.arange(1, shape[1] + 1, dtype=np.float32) + a[:, ::-1]
        view = np.zeros((21, shape[1] + 1), np.float32)[:, :shape[1]]
        view[...] = a
        for _ in range(2):
            out = np.zeros_like(a)
            scale_rows(view, out)
            np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-5)


def test_three_axes(rng):
    image = positive_floats(rng, (7, 9, 3), np.float32)
    check(pixel_sums, image, np.zeros((7, 9), np.float32), rtol=1e-6)
    check(pixel_sums, image[:, ::2], np.zeros((7, 5), np.float32), rtol=1e-6)


def test_atomic_updates_of_components(rng):
    index = rng.integers(0, 5, size=200).astype(np.int64)
    values = nonzero_floats(rng, (200, 3), np.float64)
    grid = np.zeros((5, 3), np.float64)
    check(scatter_components, index, values, grid, rtol=1e-12, atol=1e-12)
    want = np.zeros((5, 3))
    np.add.at(want, index, values * [1.0, 1.0, 2.0])
    np.testing.assert_allclose(grid, want, rtol=1e-12)


def test_specialisation_is_in_the_ir(rng):
    a = nonzero_floats(rng, (8, 3), np.float32)
    assert "array<f32, 2, C, ?x3>" in scale_rows.ir(a, np.zeros_like(a))
    wide = nonzero_floats(rng, (8, 12), np.float32)
    assert "array<f32, 2, C>" in scale_rows.ir(wide, np.zeros_like(wide))
    view = wide[:, :3]  # padded rows: see test_cpu_padded_rows.py
    assert "array<f32, 2, P12, ?x3>" in scale_rows.ir(view, np.zeros(view.shape, np.float32))
    view = wide[:, ::4]
    assert "array<f32, 2, A>" in scale_rows.ir(view, np.zeros(view.shape, np.float32))


def test_interleaved_rows_need_no_gathers(rng):
    """With constant strides the vectoriser loads whole rows and shuffles them apart,
    as it does for kd.vec3 arrays; with a runtime stride it gathers."""
    pos = _lattice(rng, 64, np.float32)
    text = forces_scalar.llvm_ir(pos, np.zeros_like(pos), 1.6, optimized=True)
    assert "llvm.masked.gather" not in text


def test_func_and_branch_join_layouts(rng):
    """A local holding a specialised (N, 3) array or an (N, 3) array made in the kernel."""
    src = nonzero_floats(rng, (11, 3), np.float32)
    check(_pick_rows, src, np.zeros_like(src), 1)
    check(_pick_rows, src, np.zeros_like(src), 0)


@kd.func
def _first_row_sum(a) -> kd.f32:
    return a[0, 0] + a[0, 1] + a[0, 2]


@kd.kernel
def _pick_rows(src, out, use_src: kd.i32):
    other = kd.zeros((src.shape[0], 3), dtype=kd.f32)
    for i in range(src.shape[0]):
        for k in range(3):
            other[i, k] = 1.0 * k
    chosen = other
    if use_src == 1:
        chosen = src
    total = _first_row_sum(chosen) + _first_row_sum(src)
    for i in range(src.shape[0]):
        for k in range(3):
            out[i, k] = chosen[i, k] + total


@kd.kernel(debug=True)
def _component(a, k: kd.i64) -> kd.f32:
    return a[1, k]


def test_debug_checks_the_fixed_axis(rng):
    a = nonzero_floats(rng, (4, 3), np.float32)
    assert _component(a, 2) == a[1, 2]
    assert _component(a, -1) == a[1, 2]
    with pytest.raises(IndexError, match="3"):
        _component(a, 3)


@kd.kernel
def _centred_copy(src, width: kd.i64):
    """Arrays made in the kernel with a constant short last axis get the fixed size too."""
    n = src.shape[0]
    tmp = kd.zeros((n, 3), dtype=src.dtype)
    wide = kd.empty((n, width), dtype=kd.f64)
    for i in kd.prange(n):
        tmp[i, 0] = src[i, 0] - src[0, 0]
        tmp[i, 1] = src[i, 1] - src[0, 1]
        tmp[i, 2] = src[i, 2] - src[0, 2]
        for k in range(width):
            wide[i, k] = 1.0 * k
    total = 0.0
    for i in range(n):
        total += tmp[i, 0] + 2.0 * tmp[i, 1] + 3.0 * tmp[i, 2] + wide[i, width - 1]
    return tmp, total


def test_arrays_made_in_the_kernel(rng):
    src = nonzero_floats(rng, (13, 3), np.float32)
    assert "array<f32, 2, C, ?x3>" in _centred_copy.ir(src, 4).split("array_new")[1]
    for width in (4, 2, 11):
        check(_centred_copy, src, width, rtol=1e-5, atol=1e-5)
    view = np.zeros((13, 5), np.float32)[:, 1:4]
    view[...] = src
    check(_centred_copy, view, 3, rtol=1e-5, atol=1e-5)
    check(_pick_rows, view, np.zeros((13, 3), np.float32), 1)
    want_tmp, want_total = _centred_copy.python(src, 4)
    for _ in range(3):  # the later calls take the compiled call path
        tmp, total = _centred_copy(src, 4)
        np.testing.assert_allclose(tmp, want_tmp, rtol=1e-6)
        assert tmp.shape == (13, 3) and tmp.flags.c_contiguous
        np.testing.assert_allclose(total, want_total, rtol=1e-5)



@kd.kernel
def _energy_vector(p: kd.Array[kd.vec3d]) -> kd.f64:
    total = 0.0
    for i in kd.prange(p.shape[0]):
        for j in range(p.shape[0]):
            d = p[i] - p[j]
            total += 1.0 / kd.sqrt(kd.dot(d, d) + 0.5)
    return total


def test_gradient_of_the_scalar_indexed_form(rng):
    """The adjoint of an (N, 3) array (scattered into its components) equals the vector
    form's, and central differences."""
    p = nonzero_floats(rng, (17, 3), np.float64)
    g_scalar = kd.grad(pair_energy)(p)
    g_vector = kd.grad(_energy_vector)(p)
    np.testing.assert_allclose(g_scalar, g_vector, rtol=1e-12, atol=1e-12)
    assert np.abs(g_scalar).max() > 1e-3
    kd.check_grad(pair_energy, p)

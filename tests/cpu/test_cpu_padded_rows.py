"""Strided views whose rows are short and padded (``wide[:, :3]`` of an (N, 4) array):
a specialisation fixes the row pitch, so every stride the loops use is a constant, as
for C-contiguous arrays with a short last axis. Each kernel is checked against its own
Python function (and on the emulated CUDA device, where such views take the general
code) on every pitch, alternating layouts call after call, which is where the compiled
call path must send an array of another pitch back to dispatch."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats
from kdsl_row_kernels import pair_energy, pixel_sums, scale_rows

import kdsl as kd
from kdsl import types as T
from kdsl.ir.parser import parse_type
from kdsl.runtime.arguments import argument_key, padded_rows


@kd.kernel
def pair_sums(pos, out):
    """Every pair of rows, the inner loop over rows: the interleaved loads."""
    n = pos.shape[0]
    for i in kd.prange(n):
        sx = 0.0
        sy = 0.0
        for j in range(n):
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            w = 1.0 / (1.0 + dx * dx + dy * dy + pos[j, 2] * pos[j, 2])
            sx += w * dx
            sy += w * dy
        out[i, 0] = sx
        out[i, 1] = sy


@kd.kernel
def vector_norms(p: kd.Array[kd.vec3], out):
    for i in kd.prange(p.shape[0]):
        out[i] = kd.dot(p[i], p[i])


@kd.kernel
def scatter_rows(index, values, grid):
    """Atomic updates of the components of a padded view in a parallel loop."""
    for i in kd.prange(index.shape[0]):
        cell = index[i]
        grid[cell, 0] += values[i, 0]
        grid[cell, 1] += 2.0 * values[i, 1]



@kd.func
def _row_total(a, i: kd.i64) -> kd.f32:
    return a[i, 0] + 2.0 * a[i, 1]


@kd.kernel
def chosen_rows(a, b, out, use_b: kd.i32):
    """One local holding a padded view or another layout, read through a func."""
    src = a
    if use_b == 1:
        src = b
    for i in range(out.shape[0]):
        out[i] = _row_total(src, i) + _row_total(a, i)


def _padded(values: np.ndarray, pitch: int, offset: int = 0) -> np.ndarray:
    """``values`` (N, n) copied into columns offset..offset+n of a fresh (N, pitch) array
    whose other columns hold values the kernel must never read into a result."""
    n = values.shape[1]
    wide = np.full((values.shape[0], pitch), 1e6, values.dtype)
    view = wide[:, offset:offset + n]
    view[...] = values
    return view


@pytest.mark.parametrize("n, pitch, dtype", [
    (3, 4, np.float32), (3, 5, np.float64), (2, 8, np.float32), (4, 16, np.float64),
    (3, 3, np.float32),
])
def test_rows_of_each_pitch(rng, n, pitch, dtype):
    values = nonzero_floats(rng, (37, n), dtype)
    view = _padded(values, pitch, offset=pitch - n)
    if pitch == n:  # dense rows of a non-contiguous array: every other row
        view = _padded(nonzero_floats(rng, (74, n), dtype), n)[::2]
    assert not view.flags.c_contiguous
    out = np.zeros(view.shape, dtype)
    check(scale_rows, view, out, rtol=1e-6, atol=1e-5)
    assert np.abs(out).max() > 0.1
    # written through a padded view too: the padding keeps its values
    target = _padded(np.zeros(view.shape, dtype), pitch + 1)
    check(scale_rows, view, target, rtol=1e-6, atol=1e-5)
    assert (target.base[:, view.shape[1]:] == 1e6).all()


def test_interleaved_loads_match_python(rng):
    pos = _padded(nonzero_floats(rng, (53, 3), np.float32), 4)
    out = np.zeros((53, 2), np.float32)
    check(pair_sums, pos, out, rtol=1e-4, atol=1e-4)
    assert "array<f32, 2, P4, ?x3>" in pair_sums.ir(pos, out)
    text = pair_sums.llvm_ir(pos, out)
    assert "mul i64 0, 16" not in text  # no runtime row stride: a constant one


@pytest.mark.parametrize("layout", ["padded view", "dense rows of four"])
def test_rows_with_a_gap_are_loaded_whole(rng, layout):
    """Three components of every four: LLVM loads whole rows and shuffles them apart
    (it must know that the address of the next row cannot wrap), never gathering."""
    wide = nonzero_floats(rng, (53, 4), np.float32)
    pos = wide[:, :3] if layout == "padded view" else wide
    out = np.zeros((53, 2), np.float32)
    check(pair_sums, pos, out, rtol=1e-4, atol=1e-4)
    text = pair_sums.llvm_ir(pos, out, optimized=True)
    assert "masked.gather" not in text
    assert "load <64 x float>" in text or "load <32 x float>" in text


@kd.kernel
def rotate_rows(p, out, c: kd.f32, s: kd.f32):
    """Writes three components of every row: into a padded view, a group with a gap."""
    for i in kd.prange(p.shape[0]):
        x = p[i, 0]
        y = p[i, 1]
        out[i, 0] = c * x - s * y
        out[i, 1] = s * x + c * y
        out[i, 2] = p[i, 2] + 1.0


@kd.kernel
def rotate_vectors(p: kd.Array[kd.vec3], out: kd.Array[kd.vec3], c: kd.f32, s: kd.f32):
    for i in kd.prange(p.shape[0]):
        v = p[i]
        out[i] = kd.vec3(c * v[0] - s * v[1], s * v[0] + c * v[1], v[2] + 1.0)


@pytest.mark.parametrize("kernel", [rotate_rows, rotate_vectors])
@pytest.mark.parametrize("n", [2, 15, 16, 67, 300])
def test_rows_with_a_gap_are_written_whole_with_a_mask(rng, kernel, n):
    """Three components of every four written: one masked store of whole rows whose
    mask leaves the padding alone (another thread may own it), never a scatter per
    component, and the padding keeps its values on every trip count (vector body,
    remainder, both)."""
    p = nonzero_floats(rng, (n, 3), np.float32)
    out = _padded(np.zeros((n, 3), np.float32), 4)
    assert not out.flags.c_contiguous
    c, s = np.float32(0.6), np.float32(0.8)
    check(kernel, p, out, c, s, rtol=1e-6, atol=1e-5)
    assert np.abs(out).max() > 0.1
    assert (out.base[:, 3] == 1e6).all()
    text = kernel.llvm_ir(p, out, c, s, optimized=True)
    assert "masked.scatter" not in text
    assert "masked.store" in text


def test_vector_arrays(rng):
    p = _padded(nonzero_floats(rng, (29, 3), np.float32), 4)
    out = np.zeros(29, np.float32)
    check(vector_norms, p, out, rtol=1e-6)
    np.testing.assert_allclose(out, (p.astype(np.float64) ** 2).sum(1), rtol=1e-5)
    assert "array<vec3, 1, P4>" in vector_norms.ir(p, out)


def test_atomic_updates_of_a_padded_view(rng):
    index = rng.integers(0, 5, size=300).astype(np.int64)
    values = nonzero_floats(rng, (300, 2), np.float64)
    grid = _padded(nonzero_floats(rng, (5, 2), np.float64), 3)
    want = grid.copy()
    np.add.at(want, index, values * [1.0, 2.0])
    check(scatter_rows, index, values, grid, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grid, want, rtol=1e-12)
    assert (grid.base[:, 2] == 1e6).all()


def test_three_axes(rng):
    base = nonzero_floats(rng, (6, 8, 4), np.float32)
    for image in (base[:, :, :3], base[:, ::2, 1:], base[::-1, :, :3]):
        out = np.zeros(image.shape[:2], np.float32)
        check(pixel_sums, image, out, rtol=1e-6, atol=1e-5)


def test_one_kernel_called_with_each_layout_in_turn(rng):
    """Each layout twice in a row (the second call builds the compiled call path the
    next layout's first call meets): pitches 4, 5, contiguous rows, a column-major
    array, a reversed and a general view of the same sizes."""
    values = nonzero_floats(rng, (21, 3), np.float32)
    layouts = [
        _padded(values, 4), _padded(values, 5), values.copy(), _padded(values, 4, 1),
        np.asfortranarray(values), _padded(values, 4)[::-1][::-1], values[::-1].copy()[::-1],
        _padded(values, 6), np.lib.stride_tricks.as_strided(
            np.resize(values, 21 * 3 * 2), (21, 3), (24, 8)),  # a last axis with a stride
    ]
    for a in layouts + layouts[::-1]:
        want = a * np.arange(1, 4, dtype=np.float32) + a[:, ::-1]
        for _ in range(2):
            out = np.zeros((21, 3), np.float32)
            scale_rows(a, out)
            np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-5)


def test_branch_and_func_join_layouts(rng):
    a = _padded(nonzero_floats(rng, (9, 2), np.float32), 4)
    b = nonzero_floats(rng, (9, 2), np.float32)
    for use_b in (0, 1):
        check(chosen_rows, a, b, np.zeros(9, np.float32), use_b, rtol=1e-6)
        check(chosen_rows, a, a, np.zeros(9, np.float32), use_b, rtol=1e-6)
        check(chosen_rows, a, _padded(b, 7), np.zeros(9, np.float32), use_b, rtol=1e-6)


def test_what_is_padded():
    f4 = np.zeros((10, 4), np.float32)
    assert padded_rows(f4[:, :3].shape, f4[:, :3].strides, 4) == (3, 4)
    assert padded_rows(f4[:, 1:3].shape, f4[:, 1:3].strides, 4) == (2, 4)
    assert padded_rows(f4[:, ::2].shape, f4[:, ::2].strides, 4) is None  # strided last axis
    assert padded_rows(f4[::-1, :3].shape, f4[::-1, :3].strides, 4) is None  # negative pitch
    assert padded_rows(f4[:, :1].shape, f4[:, :1].strides, 4) is None  # one column
    wide = np.zeros((10, 17), np.float64)
    assert padded_rows(wide[:, :3].shape, wide[:, :3].strides, 8) is None  # pitch 17 > 16
    assert padded_rows((10, 3), (0, 8), 8) is None  # a broadcast
    assert argument_key(f4[:, :3]) != argument_key(np.zeros((10, 5), np.float32)[:, :3])


def test_types_print_and_parse():
    for t in (T.ArrayType(T.f32, 2, False, 3, 4), T.ArrayType(T.vec3, 1, False, None, 8),
              T.ArrayType(T.f64, 3, False, 2, 16)):
        assert parse_type(str(t)) == t
        assert t.strides_implied and not t.contiguous
    general = T.ArrayType(T.f32, 2, False)
    padded = T.ArrayType(T.f32, 2, False, 3, 4)
    assert general.holds(padded) and not padded.holds(general)
    assert not padded.holds(T.ArrayType(T.f32, 2, False, 3, 5))
    assert not padded.holds(T.ArrayType(T.f32, 2, True, 3))



def test_gradient_through_a_padded_view(rng):
    values = nonzero_floats(rng, (13, 3), np.float64)
    g_view = kd.grad(pair_energy)(_padded(values, 4))
    g_dense = kd.grad(pair_energy)(values)
    np.testing.assert_allclose(g_view, g_dense, rtol=1e-12, atol=1e-12)
    assert np.abs(g_dense).max() > 1e-3


def test_tangent_through_a_padded_view(rng):
    values = nonzero_floats(rng, (11, 3), np.float64)
    direction = nonzero_floats(rng, (11, 3), np.float64)
    value, tangent = kd.jvp(pair_energy, (_padded(values, 4),), (_padded(direction, 5),))
    dense_value, dense_tangent = kd.jvp(pair_energy, (values,), (direction,))
    np.testing.assert_allclose([value, tangent], [dense_value, dense_tangent], rtol=1e-12)
    np.testing.assert_allclose(tangent, (kd.grad(pair_energy)(values) * direction).sum(), rtol=1e-10)


@kd.kernel
def _drift(x, v, dt: kd.f64):
    for i in kd.prange(x.shape[0]):
        for k in range(x.shape[1]):
            x[i, k] += dt * v[i, k] * v[i, k]


@kd.kernel
def _square_sum(x) -> kd.f64:
    total = 0.0
    for i in range(x.shape[0]):
        for k in range(x.shape[1]):
            total += x[i, k] * x[i, k] * (k + 1)
    return total


def test_tape_over_padded_views_updated_in_place(rng):
    """Three steps that update a padded view in place, then a loss: the tape's
    gradients equal those of the same steps on dense arrays."""
    values = nonzero_floats(rng, (7, 3), np.float64)
    speeds = nonzero_floats(rng, (7, 3), np.float64)
    grads = []
    for x_np, v_np in ((_padded(values, 4), _padded(speeds, 6)), (values.copy(), speeds.copy())):
        x = kd.array(x_np, requires_grad=True)
        v = kd.array(v_np, requires_grad=True)
        with kd.Tape() as tape:
            for _ in range(3):
                _drift(x, v, 0.1)
            loss = _square_sum(x)
        tape.backward(loss)
        grads.append((x.grad.numpy().copy(), v.grad.numpy().copy()))
    for padded, dense in zip(*grads):
        np.testing.assert_allclose(padded, dense, rtol=1e-12)
        assert np.abs(dense).max() > 1e-3

"""Arrays whose first axis steps one element (column-major ``(N, 3)`` arrays, ``pos.T``
of a ``(3, N)`` array): a specialisation fixes that stride, so a loop over rows reads
each column as contiguous memory. Each kernel is checked against its own Python function
(and on the emulated CUDA device, where such arrays take the general code) and NumPy,
for reads and writes, and alternating with other layouts call after call, which is where
the compiled call path must send each array to its own specialisation."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats
from kdsl_row_kernels import pair_energy, pixel_sums, scale_rows

import kdsl as kd
from kdsl import types as T
from kdsl.ir.parser import parse_type
from kdsl.runtime.arguments import argument_key, argument_layout


@kd.kernel
def pair_sums(pos, out):
    """Every pair of rows, the inner loop over rows: three contiguous columns."""
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
def column_sums(a) -> kd.f64:
    """A reduction over every element, columns in the outer loop."""
    total = 0.0
    for k in range(a.shape[1]):
        for i in kd.prange(a.shape[0]):
            total += a[i, k] * (k + 1)
    return total


@kd.kernel
def scatter_rows(index, values, grid):
    """Atomic updates of the components of a column-major array in a parallel loop."""
    for i in kd.prange(index.shape[0]):
        cell = index[i]
        grid[cell, 0] += values[i, 0]
        grid[cell, 1] += 2.0 * values[i, 1]


@kd.func
def _row_total(a, i: kd.i64) -> kd.f32:
    return a[i, 0] + 2.0 * a[i, 1]


@kd.kernel
def chosen_rows(a, b, out, use_b: kd.i32):
    """One local holding a column-major array or another layout, read through a func."""
    src = a
    if use_b == 1:
        src = b
    for i in range(out.shape[0]):
        out[i] = _row_total(src, i) + _row_total(a, i)


def _columns(values: np.ndarray) -> np.ndarray:
    """``values`` as the transpose of a C-contiguous array (column-major)."""
    out = np.ascontiguousarray(values.T).T
    assert out.strides[0] == out.itemsize and not out.flags.c_contiguous
    return out


@pytest.mark.parametrize("n, dtype", [(3, np.float32), (2, np.float64), (5, np.float32),
                                      (12, np.float64)])
def test_reads_and_writes(rng, n, dtype):
    values = _columns(nonzero_floats(rng, (37, n), dtype))
    out = np.zeros(values.shape, dtype)
    check(scale_rows, values, out, rtol=1e-6, atol=1e-5)
    want = values * np.arange(1, n + 1) + values[:, ::-1]
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-5)
    # written through a column-major array too, and through a block of columns of a
    # larger column-major array (a column pitch longer than the rows)
    for target in (np.asfortranarray(np.zeros(values.shape, dtype)),
                   np.asfortranarray(np.full((45, n + 2), 1e6, dtype))[3:40, 1:n + 1]):
        assert argument_layout(target)[3]
        check(scale_rows, values, target, rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(target, want, rtol=1e-6, atol=1e-5)
        for _ in range(2):  # again, through the compiled call path
            target[...] = 0
            scale_rows(values, target)
            np.testing.assert_allclose(target, want, rtol=1e-6, atol=1e-5)
    assert (target.base[:, 0] == 1e6).all() and (target.base[:3] == 1e6).all()


def test_sliding_windows(rng):
    """``sliding_window_view`` of a 1-D array: rows overlap, and the first axis steps
    one element."""
    signal = nonzero_floats(rng, 40, np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(signal, 4)
    assert argument_layout(windows)[3]
    out = np.zeros(windows.shape)
    check(scale_rows, windows, out, rtol=1e-12)
    np.testing.assert_allclose(out, windows * np.arange(1, 5) + windows[:, ::-1], rtol=1e-12)


def test_pair_loop_matches_python_and_the_dense_layout(rng):
    dense = nonzero_floats(rng, (53, 3), np.float32)
    pos = np.asfortranarray(dense)
    out = np.zeros((53, 2), np.float32)
    check(pair_sums, pos, out, rtol=1e-4, atol=1e-4)
    want = np.zeros((53, 2), np.float32)
    pair_sums(dense, want)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert "array<f32, 2, F>" in pair_sums.ir(pos, out)


def test_vector_arrays(rng):
    p = np.asfortranarray(nonzero_floats(rng, (29, 3), np.float32))
    out = np.zeros(29, np.float32)
    check(vector_norms, p, out, rtol=1e-6)
    np.testing.assert_allclose(out, (p.astype(np.float64) ** 2).sum(1), rtol=1e-5)
    assert "array<vec3, 1, F>" in vector_norms.ir(p, out)


def test_reduction_and_three_axes(rng):
    a = np.asfortranarray(nonzero_floats(rng, (31, 4), np.float64))
    total = check(column_sums, a, rtol=1e-12)
    np.testing.assert_allclose(total, (a * np.arange(1, 5)).sum(), rtol=1e-12)
    image = np.asfortranarray(nonzero_floats(rng, (6, 5, 3), np.float32))
    out = np.zeros((6, 5), np.float32)
    check(pixel_sums, image, out, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(out, (image * np.arange(1, 4)).sum(2), rtol=1e-5)


def test_atomic_updates_of_a_column_major_array(rng):
    index = rng.integers(0, 5, size=300).astype(np.int64)
    values = np.asfortranarray(nonzero_floats(rng, (300, 2), np.float64))
    grid = np.asfortranarray(nonzero_floats(rng, (5, 2), np.float64))
    want = grid.copy()
    np.add.at(want, index, values * [1.0, 2.0])
    check(scatter_rows, index, values, grid, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grid, want, rtol=1e-12)


def test_branch_and_func_join_layouts(rng):
    a = np.asfortranarray(nonzero_floats(rng, (9, 2), np.float32))
    b = nonzero_floats(rng, (9, 2), np.float32)
    for use_b in (0, 1):
        check(chosen_rows, a, b, np.zeros(9, np.float32), use_b, rtol=1e-6)
        check(chosen_rows, a, a, np.zeros(9, np.float32), use_b, rtol=1e-6)
        check(chosen_rows, a, b[::-1], np.zeros(9, np.float32), use_b, rtol=1e-6)


def test_one_specialisation_per_layout_called_in_turn(rng):
    """Each layout twice in a row (the second call builds the compiled call path the
    next layout's first call meets); every column-major form shares one specialisation
    and the general one never takes them."""

    @kd.kernel
    def scaled(a, out):
        for i in kd.prange(a.shape[0]):
            for k in range(a.shape[1]):
                out[i, k] = a[i, k] * (k + 1) + a[i, a.shape[1] - 1 - k]

    values = nonzero_floats(rng, (21, 3), np.float32)
    layouts = [
        np.asfortranarray(values), values[::-1].copy()[::-1], _columns(values),
        values.copy(), np.asfortranarray(np.resize(values, (42, 3)))[::2],
        np.asfortranarray(np.resize(values, (25, 3)))[2:23],
    ]
    layouts[-2][...] = values
    for a in layouts + layouts[::-1]:
        want = a * np.arange(1, 4, dtype=np.float32) + a[:, ::-1]
        for _ in range(2):
            out = np.zeros((21, 3), np.float32)
            scaled(a, out)
            np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-5)
    compiled = {id(c): str(c.params[0].type) for c in scaled._specialisations.values()}
    assert sorted(compiled.values()) == [
        "array<f32, 2, A>", "array<f32, 2, C, ?x3>", "array<f32, 2, F>"]


def test_the_compiled_call_path_takes_only_column_major_arrays(rng):
    from kdsl.runtime.fast_call import SLOW

    values = nonzero_floats(rng, (15, 3), np.float32)
    columns, out = np.asfortranarray(values), np.zeros((15, 3), np.float32)
    scale_rows(columns, out)
    scale_rows(columns, out)
    fast = scale_rows._fast
    assert fast is not None and "F" in str(fast.compiled.params[0].type)
    assert fast.function(_columns(values), out) is not SLOW
    assert fast.function(np.asfortranarray(np.resize(values, (17, 3)))[1:16], out) is not SLOW
    for other in (values, values[::-1], np.asfortranarray(np.resize(values, (30, 3)))[::2]):
        assert fast.function(other, out) is SLOW
    assert fast.function(columns, np.asfortranarray(out)) is SLOW  # out: C-contiguous


def test_what_has_a_unit_first_stride():
    f = np.zeros((10, 3), np.float32, order="F")
    assert argument_layout(f)[:4] == (False, None, None, True)
    assert argument_layout(f[1:])[:4] == (False, None, None, True)
    assert argument_layout(f[::2])[:4] == (False, None, None, False)  # every other row
    assert argument_layout(np.zeros((3, 10), np.float64).T)[:4] == (False, None, None, True)
    assert argument_layout(np.zeros((4, 10), np.float32)[:, ::-1].T)[3] is False
    assert argument_layout(np.zeros((10, 1), np.float32, order="F"))[0]  # C-contiguous too
    assert argument_layout(np.broadcast_to(np.zeros(3, np.float32), (10, 3)))[3] is False
    assert argument_key(f) != argument_key(f[::2])


def test_types_print_and_parse():
    for t in (T.ArrayType(T.f32, 2, False, unit_first_stride=True),
              T.ArrayType(T.vec3, 1, False, unit_first_stride=True),
              T.ArrayType(T.f64, 3, False, unit_first_stride=True)):
        assert parse_type(str(t)) == t
        assert not t.strides_implied and not t.contiguous
    general = T.ArrayType(T.f32, 2, False)
    columns = T.ArrayType(T.f32, 2, False, unit_first_stride=True)
    assert general.holds(columns) and not columns.holds(general)
    assert not columns.holds(T.ArrayType(T.f32, 2, True, 3))
    assert columns.of_any_padding() == general
    assert T.ArrayType(T.f32, 2).specialised(True, None, None, True) == T.ArrayType(T.f32, 2, True)


def test_gradient_through_a_column_major_array(rng):
    values = nonzero_floats(rng, (13, 3), np.float64)
    g_columns = kd.grad(pair_energy)(np.asfortranarray(values))
    g_dense = kd.grad(pair_energy)(values)
    np.testing.assert_allclose(g_columns, g_dense, rtol=1e-12, atol=1e-12)
    assert np.abs(g_dense).max() > 1e-3


def test_tangent_through_a_column_major_array(rng):
    values = nonzero_floats(rng, (11, 3), np.float64)
    direction = nonzero_floats(rng, (11, 3), np.float64)
    value, tangent = kd.jvp(pair_energy, (np.asfortranarray(values),), (_columns(direction),))
    dense_value, dense_tangent = kd.jvp(pair_energy, (values,), (direction,))
    np.testing.assert_allclose([value, tangent], [dense_value, dense_tangent], rtol=1e-12)


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


def test_tape_over_column_major_arrays_updated_in_place(rng):
    """Three steps that update a column-major array in place, then a loss: the tape's
    gradients equal those of the same steps on dense arrays."""
    values = nonzero_floats(rng, (7, 3), np.float64)
    speeds = nonzero_floats(rng, (7, 3), np.float64)
    grads = []
    for x_np, v_np in ((np.asfortranarray(values), _columns(speeds)),
                       (values.copy(), speeds.copy())):
        x = kd.array(x_np, requires_grad=True)
        v = kd.array(v_np, requires_grad=True)
        with kd.Tape() as tape:
            for _ in range(3):
                _drift(x, v, 0.1)
            loss = _square_sum(x)
        tape.backward(loss)
        grads.append((x.grad.numpy().copy(), v.grad.numpy().copy()))
    for columns, dense in zip(*grads):
        np.testing.assert_allclose(columns, dense, rtol=1e-12)
        assert np.abs(dense).max() > 1e-3

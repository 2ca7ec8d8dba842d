"""The compiled call path takes arrays of vectors in every layout the Python path
specialises for (column-major, padded rows, other strides), not only C-contiguous ones,
and still sends every argument of another layout or element size to the Python path."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd
from kdsl.runtime.fast_call import SLOW

RNG = np.random.default_rng(2015)


def positions(n: int, dtype: type = np.float32) -> np.ndarray:
    """Values in +-[0.5, 4), never zero."""
    values = RNG.uniform(0.5, 4.0, (n, 3)) * RNG.choice([-1.0, 1.0], (n, 3))
    return values.astype(dtype)


def column_major(a: np.ndarray) -> np.ndarray:
    return np.asfortranarray(a)


def padded(a: np.ndarray) -> np.ndarray:
    """Three columns of an (N, 4) array."""
    wide = np.full((a.shape[0], 4), -7.0, a.dtype)
    wide[:, :3] = a
    return wide[:, :3]


def every_other_row(a: np.ndarray) -> np.ndarray:
    """Rows two rows apart (a pitch of 6 elements)."""
    rows = np.full((2 * a.shape[0], 3), -7.0, a.dtype)
    rows[::2] = a
    return rows[::2]


def transposed(a: np.ndarray) -> np.ndarray:
    """The transpose of a (3, N) array: a unit first stride."""
    return np.ascontiguousarray(a.T).T


def spread_components(a: np.ndarray) -> np.ndarray:
    """Components two elements apart (every other column of an (N, 6) array)."""
    wide = np.full((a.shape[0], 6), -7.0, a.dtype)
    wide[:, ::2] = a
    return wide[:, ::2]


LAYOUTS = [column_major, padded, every_other_row, transposed, spread_components]


@kd.kernel
def rotate(p: kd.Array[kd.vec3], out: kd.Array[kd.vec3], c: kd.f32, s: kd.f32):
    for i in range(p.shape[0]):
        v = p[i]
        out[i] = kd.vec3(c * v[0] - s * v[1], s * v[0] + c * v[1], v[2] + 1.0)


@kd.kernel
def pull(p: kd.Array[kd.vec3d], out: kd.Array[kd.vec3d], k: kd.f64):
    n = p.shape[0]
    for i in kd.prange(n):
        out[i] += k * (p[(i + 1) % n] - p[i])


def expected_rotation(p: np.ndarray, c: np.float32, s: np.float32) -> np.ndarray:
    out = np.zeros(p.shape, p.dtype)
    rotate.python(np.ascontiguousarray(p), out, c, s)
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
def test_arrays_of_vectors_of_each_layout_take_the_compiled_path(layout):
    c, s = np.float32(0.6), np.float32(0.8)
    p, out = layout(positions(13)), np.zeros((13, 3), np.float32)
    rotate(p, out, c, s)
    rotate(p, out, c, s)
    fast = rotate._fast
    assert fast is not None
    q = layout(positions(21))
    out = np.zeros((21, 3), np.float32)
    assert fast.function(q, out, c, s) is None  # done on the compiled path
    np.testing.assert_allclose(out, expected_rotation(q, c, s), rtol=1e-6, atol=1e-5)
    out[...] = 0.0
    rotate(q, out, c, s)
    assert rotate._fast is fast
    np.testing.assert_allclose(out, expected_rotation(q, c, s), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_outputs_of_each_layout_are_written_on_the_compiled_path(layout):
    p = positions(11, np.float64)
    out = layout(positions(11, np.float64))
    expected = np.ascontiguousarray(out)
    for _ in range(2):
        pull(p, out, 0.25)
        pull.python(p, expected, 0.25)
    assert pull._fast is not None
    assert pull._fast.function(p, out, 0.25) is None  # done on the compiled path
    pull.python(p, expected, 0.25)
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    base = out if out.base is None else out.base
    out[...] = np.nan  # the elements outside the view kept their values
    assert np.isnan(base).sum() == out.size
    assert np.all(base[~np.isnan(base)] == -7.0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_other_element_sizes_and_layouts_go_to_the_python_path(layout):
    c, s = np.float32(0.6), np.float32(0.8)
    p, out = layout(positions(9)), np.zeros((9, 3), np.float32)
    rotate(p, out, c, s)
    rotate(p, out, c, s)
    fast = rotate._fast
    four = np.asfortranarray(np.ones((9, 4), np.float32))
    two = np.ones((9, 8), np.float32)[:, :2]
    for wrong in (four, two, np.ones((9, 5), np.float32)[:, 1:]):
        assert fast.function(wrong, out, c, s) is SLOW
        with pytest.raises(TypeError, match="argument 'p'"):
            rotate(wrong, out, c, s)
    assert fast.function(p.astype(np.float64), out, c, s) is SLOW
    assert fast.function(p, np.zeros((9, 4), np.float32)[:, :3], c, s) is SLOW  # out: dense
    others = [f(positions(9)) for f in (np.ascontiguousarray, *LAYOUTS) if f is not layout]
    for other in others:
        if rotate.specialisation((other, out, c, s)) is not fast.compiled:
            assert fast.function(other, out, c, s) is SLOW
        rotate(other, out, c, s)  # the Python path: its own specialisation
        np.testing.assert_allclose(out, expected_rotation(other, c, s), rtol=1e-6, atol=1e-5)


def test_a_read_only_output_of_another_layout_is_still_refused():
    p = positions(7, np.float64)
    out = column_major(positions(7, np.float64))
    pull(p, out, 0.5)
    pull(p, out, 0.5)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        pull(p, out, 0.5)


def matrices(n: int, dtype: type = np.float32) -> np.ndarray:
    return np.stack([positions(3, dtype) for _ in range(n)])


def padded_matrices(m: np.ndarray) -> np.ndarray:
    """Rows of three of four elements (an (N, 3, 4) array's first three columns)."""
    wide = np.full((*m.shape[:2], 4), -7.0, m.dtype)
    wide[..., :3] = m
    return wide[..., :3]


def every_other_matrix(m: np.ndarray) -> np.ndarray:
    twice = np.full((2 * m.shape[0], *m.shape[1:]), -7.0, m.dtype)
    twice[::2] = m
    return twice[::2]


def matrices_last(m: np.ndarray) -> np.ndarray:
    """A (3, 3, N) array's axes moved: a unit first stride."""
    return np.ascontiguousarray(m.transpose(1, 2, 0)).transpose(2, 0, 1)


MATRIX_LAYOUTS = [np.ascontiguousarray, column_major, padded_matrices, every_other_matrix,
                  matrices_last]


@kd.kernel
def deform(f: kd.Array[kd.mat33], v: kd.Array[kd.vec3], out: kd.Array[kd.vec3],
           g: kd.Array[kd.mat33], dt: kd.f32):
    for p in range(f.shape[0]):
        m = f[p]
        out[p] = m @ v[p]
        g[p] = m + dt * (m @ m)


def expected_deform(f: np.ndarray, v: np.ndarray, dt: np.float32) -> tuple[np.ndarray, ...]:
    out, g = np.zeros(v.shape, v.dtype), np.zeros(f.shape, f.dtype)
    deform.python(np.ascontiguousarray(f), v, out, g, dt)
    return out, g


@pytest.mark.parametrize("layout", MATRIX_LAYOUTS)
def test_arrays_of_matrices_of_each_layout_take_the_compiled_path(layout):
    dt = np.float32(0.125)
    f, v = layout(matrices(6)), positions(6)
    out, g = np.zeros((6, 3), np.float32), layout(matrices(6))
    deform(f, v, out, g, dt)
    deform(f, v, out, g, dt)
    fast = deform._fast
    assert fast is not None
    f, v = layout(matrices(10)), positions(10)
    out, g = np.zeros((10, 3), np.float32), layout(np.zeros((10, 3, 3), np.float32))
    assert fast.function(f, v, out, g, dt) is None  # done on the compiled path
    want_out, want_g = expected_deform(f, v, dt)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g, want_g, rtol=1e-5, atol=1e-5)
    wrong_shapes = [np.ones((10, 3, 4), np.float32), np.ones((10, 4, 3), np.float32),
                    np.ones((10, 2, 3), np.float32), np.ones((10, 259, 3), np.float32)]
    for wrong in wrong_shapes + [column_major(w) for w in wrong_shapes]:
        assert fast.function(wrong, v, out, g, dt) is SLOW
        with pytest.raises(TypeError, match="argument 'f'"):
            deform(wrong, v, out, g, dt)
    assert fast.function(f.astype(np.float64), v, out, g, dt) is SLOW
    g.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        deform(f, v, out, g, dt)


@kd.kernel
def norms(p: kd.Array[kd.vec3d], m: kd.Array[kd.mat33d], out: kd.Array[kd.f64]):
    for i in range(out.shape[0]):
        out[i] = kd.dot(p[i], m[i] @ p[i])


def sliced_view(rng: np.random.Generator, n: int, element: tuple[int, ...]) -> np.ndarray:
    """``n`` elements of random values, as a view of a bigger array: axes in some order,
    every k-th element of some, a slice of others."""
    steps = [int(rng.integers(1, 3)) for _ in range(1 + len(element))]
    extra = [int(rng.integers(0, 2)) for _ in element]
    shape = [n * steps[0]] + [(e + x) * s for e, x, s in zip(element, extra, steps[1:])]
    order = rng.permutation(len(shape))
    base = rng.uniform(0.5, 2.0, [shape[k] for k in order])
    view = base.transpose(np.argsort(order))
    index = (slice(None, None, steps[0]), *(slice(x * s, None, s) for x, s in zip(extra, steps[1:])))
    return view[index]


def test_the_compiled_path_takes_exactly_the_arrays_of_its_specialisation():
    rng = np.random.default_rng(7)
    out = np.zeros(5)
    pairs = [(sliced_view(rng, 5, (3,)), sliced_view(rng, 5, (3, 3))) for _ in range(24)]
    taken = 0
    for p, m in pairs:
        norms(p, m, out)
        norms(p, m, out)
        fast = norms._fast
        assert fast is not None
        for q, r in pairs:
            out[...] = 0.0
            result = fast.function(q, r, out)
            if norms.specialisation((q, r, out)) is fast.compiled:
                assert result is None
                taken += 1
                np.testing.assert_allclose(out, np.einsum("ni,nij,nj->n", q, r, q), rtol=1e-12)
            else:
                assert result is SLOW
    assert taken > len(pairs)


@pytest.mark.parametrize("layout", [padded, column_major])
def test_a_long_last_axis_never_passes_for_the_fields_of_a_layout(layout):
    """A last axis of 3 + 4 * 256 elements holds the bits of a 3 and of a row pitch of 4:
    the machine code must not read it as three components in rows of four."""
    c, s = np.float32(0.6), np.float32(0.8)
    p, out = layout(positions(5)), np.zeros((5, 3), np.float32)
    rotate(p, out, c, s)
    rotate(p, out, c, s)
    fast = rotate._fast
    for last in (3 | 4 << 8, 3 | 1 << 8, 3 | 1 << 32):
        if last > 1 << 20:
            wide = np.lib.stride_tricks.as_strided(np.zeros(8, np.float32), (5, last), (0, 0))
        else:
            wide = np.zeros((5, last + 1), np.float32)[:, :last]
        assert not wide.flags.c_contiguous
        assert fast.function(wide, out, c, s) is SLOW
        with pytest.raises(TypeError, match="argument 'p'"):
            rotate(wide, out, c, s)

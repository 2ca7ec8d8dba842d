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

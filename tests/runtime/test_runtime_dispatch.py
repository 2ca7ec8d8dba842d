"""Dispatch (API section 1): one compiled specialisation per argument-type signature
(int or float, f32 or f64 arrays, contiguous or strided); repeated calls reuse it."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd
import kdsl.runtime.compiler as compiler_module


@pytest.fixture
def compilations(monkeypatch):
    """The argument types of every specialisation compiled while the test runs."""
    seen: list[tuple] = []
    real = compiler_module.compile_kernel

    def counting(fn, name, params, *rest, **kw):
        seen.append((name, tuple(p.type for p in params)))
        return real(fn, name, params, *rest, **kw)

    monkeypatch.setattr(compiler_module, "compile_kernel", counting)
    return seen


def test_int_and_float_scalars_are_two_specialisations(compilations):
    @kd.kernel
    def twice(x):
        return x * 2

    assert twice(3) == 6 and type(twice(3)) is int
    assert twice(1.25) == 2.5 and type(twice(1.25)) is float
    for _ in range(5):
        assert twice(4) == 8
        assert twice(0.5) == 1.0
    assert len(compilations) == 2


def test_numpy_scalars_keep_their_type(compilations):
    @kd.kernel
    def twice(x):
        return x * 2

    r32 = twice(np.float32(1.5))
    assert type(r32) is np.float32 and r32 == 3.0
    r64 = twice(np.float64(1.5))
    assert type(r64) in (float, np.float64) and r64 == 3.0
    assert len(compilations) == 2


def test_f32_and_f64_arrays_are_two_specialisations(compilations):
    @kd.kernel
    def total(a):
        s = 0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    a32 = np.array([0.5, 1.25, 2.0], np.float32)
    a64 = a32.astype(np.float64) + 0.125
    assert total(a32) == np.float32(3.75) and type(total(a32)) is np.float32
    assert total(a64) == 4.125
    for _ in range(5):
        total(a32)
        total(a64)
    assert [types[0].dtype for _, types in compilations] == [total_dtype(a32), total_dtype(a64)]


def total_dtype(a: np.ndarray):
    return {np.dtype(np.float32): kd.f32, np.dtype(np.float64): kd.f64}[a.dtype]


def test_contiguous_and_strided_arrays_are_two_specialisations(compilations):
    @kd.kernel
    def bump(a: kd.Array[kd.f64]):
        for i in kd.prange(a.shape[0]):
            a[i] = a[i] + 1.0

    base = np.arange(8.0)
    bump(base)
    np.testing.assert_array_equal(base, np.arange(1.0, 9.0))
    view = base[::2]
    bump(view)
    np.testing.assert_array_equal(base, [2, 2, 4, 4, 6, 6, 8, 8])
    reversed_view = base[::-1]
    bump(reversed_view)
    np.testing.assert_array_equal(base, [3, 3, 5, 5, 7, 7, 9, 9])
    for _ in range(3):
        bump(base)
        bump(view)
    assert len(compilations) == 2


def test_strided_two_dimensional_views(compilations):
    @kd.kernel
    def scale_rows(g: kd.Array[kd.f32, 2], s: kd.f32):
        for i, j in kd.ndrange(g.shape[0], g.shape[1]):
            g[i, j] = g[i, j] * s

    g = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    expected = g.copy()
    scale_rows(g.T, 2.0)
    expected *= 2.0
    np.testing.assert_array_equal(g, expected)
    scale_rows(g[:, ::2], 0.5)
    expected[:, ::2] *= 0.5
    np.testing.assert_array_equal(g, expected)
    scale_rows(g[::2, ::2], 0.5)
    expected[::2, ::2] *= 0.5
    np.testing.assert_array_equal(g, expected)
    # the transpose steps one element along its first axis: a specialisation of its own;
    # both other views are f32 2-D arrays of the general layout
    assert len(compilations) == 2
    scale_rows(g[:, 1:3], 3.0)  # short rows, padded: a specialisation of their own
    expected[:, 1:3] *= 3.0
    np.testing.assert_array_equal(g, expected)
    scale_rows(g.T[1:, :], 2.0)  # the transpose's layout again
    expected.T[1:, :] *= 2.0
    np.testing.assert_array_equal(g, expected)
    assert [str(types[0]) for _, types in compilations] == [
        "array<f32, 2, F>", "array<f32, 2, A>", "array<f32, 2, P4, ?x2>"]


def test_repeated_calls_take_the_fast_path(compilations, monkeypatch):
    @kd.kernel
    def axpy(a: kd.f32, x: kd.Array[kd.f32], y: kd.Array[kd.f32]):
        for i in kd.prange(x.shape[0]):
            y[i] = a * x[i] + y[i]

    x = np.array([1.0, 2.0], np.float32)
    y = np.array([0.5, 0.5], np.float32)
    axpy(2.0, x, y)
    assert len(compilations) == 1

    def no_more_specialising(*args):
        raise AssertionError("a repeated call specialised again")

    monkeypatch.setattr(axpy, "_specialise", no_more_specialising)
    for _ in range(10):
        axpy(2.0, x, y)
    np.testing.assert_array_equal(y, [22.5, 44.5])


def test_annotated_scalar_accepts_int_and_float_without_new_code(compilations):
    @kd.kernel
    def fill(a: kd.Array[kd.f64], v: kd.f64):
        for i in kd.prange(a.shape[0]):
            a[i] = v

    a = np.zeros(3)
    fill(a, 2)
    np.testing.assert_array_equal(a, [2.0, 2.0, 2.0])
    fill(a, 1.5)
    np.testing.assert_array_equal(a, [1.5, 1.5, 1.5])
    fill(a, np.float32(0.25))
    np.testing.assert_array_equal(a, [0.25, 0.25, 0.25])
    assert {types for _, types in compilations} == {compilations[0][1]}


# --- NumPy array subclasses (np.memmap, user subclasses) ---------------------------------


class Tagged(np.ndarray):
    """A trivial ndarray subclass, as libraries define them."""


def test_subclass_arrays_of_different_dtypes_get_their_own_code():
    @kd.kernel
    def total(a):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    values = [1.0, 2.0, 3.0]
    assert total(np.array(values, np.float32).view(Tagged)) == 6.0
    assert total(np.array(values, np.float64).view(Tagged)) == 6.0
    assert total(np.array([1, 2, 3], np.int64).view(Tagged)) == 6.0
    assert total(np.array([1.0, 2.0, 3.0, 4.0], np.float32)[::2].view(Tagged)) == 4.0


def test_memmap_of_the_wrong_dtype_is_a_type_error(tmp_path):
    @kd.kernel
    def total32(a: kd.Array[kd.f32]):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    path32, path64 = tmp_path / "a32.bin", tmp_path / "a64.bin"
    np.array([1.0, 2.0, 3.0], np.float32).tofile(path32)
    np.array([1.0, 2.0, 3.0], np.float64).tofile(path64)
    assert total32(np.memmap(path32, dtype=np.float32, mode="r+")) == 6.0
    with pytest.raises(TypeError):
        total32(np.memmap(path64, dtype=np.float64, mode="r+"))


def test_memmap_of_the_right_dtype_works(tmp_path):
    @kd.kernel
    def double(a: kd.Array[kd.f32]):
        for i in kd.prange(a.shape[0]):
            a[i] = 2.0 * a[i]

    path = tmp_path / "a.bin"
    np.array([1.0, 2.5, -3.0], np.float32).tofile(path)
    m = np.memmap(path, dtype=np.float32, mode="r+")
    double(m)
    m.flush()
    np.testing.assert_array_equal(np.fromfile(path, np.float32), [2.0, 5.0, -6.0])


def test_writing_a_read_only_array_is_refused():
    @kd.kernel
    def set_all(a: kd.Array[kd.f32]):
        for i in kd.prange(a.shape[0]):
            a[i] = 7.0

    a = np.ones(3, np.float32)
    a.flags.writeable = False
    with pytest.raises((ValueError, TypeError)):
        set_all(a)
    np.testing.assert_array_equal(a, [1.0, 1.0, 1.0])

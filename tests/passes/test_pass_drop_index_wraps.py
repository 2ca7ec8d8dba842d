"""drop-index-wraps: a run-time index is lowered to ``wrap_index %i, %size`` (negative
counts from the end); the wrap is removed wherever the range analysis proves the index
non-negative, so the common loops pay nothing for Python's negative indices. Golden IR,
and which kernels keep a wrap; results checked against the kernels' Python."""

from __future__ import annotations

import textwrap

import numpy as np

import kdsl as kd


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def check(kernel, *args):
    """The compiled kernel and its Python agree on the result and the arrays after."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    expected = kernel.python(*copies)
    assert kernel(*args) == expected
    for a, e in zip(args, copies):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, e)


@kd.kernel
def scale(a: kd.Array[kd.f32], b: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        a[i] = b[i] * 2.0


def test_no_wrap_for_the_loop_variable_of_a_parallel_loop():
    a, b = np.zeros(5, np.float32), np.arange(5, dtype=np.float32)
    assert scale.ir(a, b) == golden("""
        kernel @scale(%a: array<f32, 1, C>, %b: array<f32, 1, C>) {
          %0 = array_dim %a {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = array_load %b, %i : f32
            %4 = constant 2.0 : f32
            %5 = mul %3, %4 : f32
            array_store %a, %i, %5
            yield
          }
          return
        }
    """)
    assert "wrap_index" not in scale.ir(a, b, stage="frontend")
    check(scale, a, b)


@kd.kernel
def shifted(a: kd.Array[kd.f32], b: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        a[i] = b[i - 1]


def test_a_wrap_where_the_index_may_be_negative():
    a, b = np.zeros(5, np.float32), np.arange(5, dtype=np.float32)
    assert shifted.ir(a, b) == golden("""
        kernel @shifted(%a: array<f32, 1, C>, %b: array<f32, 1, C>) {
          %0 = array_dim %a {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 1 : i64
          %3 = max %0, %1 : i64
          parallel_for %3 {ndim = 1, reductions = []} (%i: i64) {
            %4 = sub %i, %2 : i64
            %5 = array_dim %b {axis = 0} : i64
            %6 = wrap_index %4, %5 : i64
            %7 = array_load %b, %6 : f32
            array_store %a, %i, %7
            yield
          }
          return
        }
    """)
    check(shifted, a, b)
    np.testing.assert_array_equal(a, [4, 0, 1, 2, 3])


@kd.kernel
def provably_non_negative(a, small: kd.Array[kd.u8], out):
    n = a.shape[0]
    for i in range(1, n):  # a serial loop from 1
        out[i] = a[i // 2] + a[i % 3] + a[max(i - 5, 0)] + a[min(i, n)]
    j = 0
    while j < n:  # a counter carried from 0 upwards
        out[j] += a[j] * 0.5
        j += 2
    for i in kd.prange(small.shape[0]):  # values of an unsigned type
        out[small[i]] += 1.0
    for i in kd.prange(2, n):
        out[i] -= a[n - i]  # a size minus a non-negative value: not proven
    return out[n - 1]  # nor this (n may be 0)


def test_what_the_range_analysis_proves():
    a = np.arange(1.0, 11.0)
    small = np.array([0, 3, 9, 3], np.uint8)
    ir = provably_non_negative.ir(a, small, np.zeros(10))
    assert ir.count("wrap_index") == 2, ir
    assert ir.split("parallel_for")[-1].count("wrap_index") == 2, ir
    check(provably_non_negative, a, small, np.zeros(10))


@kd.kernel
def countdown(a, out):
    k = a.shape[0] - 1
    s = 0.0
    while k > -a.shape[0]:
        s += a[k]  # k goes negative: it keeps its wrap
        k -= 3
    out[0] = s


def test_a_decreasing_carried_value_keeps_its_wrap():
    a = np.arange(1.0, 8.0)
    assert countdown.ir(a, np.zeros(1)).count("wrap_index") == 1
    check(countdown, a, np.zeros(1))


@kd.kernel
def stencil(src: kd.Array[kd.f32, 2], dst: kd.Array[kd.f32, 2]):
    nx = src.shape[0]
    ny = src.shape[1]
    for i in kd.prange(1, nx - 1):
        for j in range(1, ny - 1):
            dst[i, j] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])


def test_neighbours_of_a_loop_from_one():
    """Lower bounds: i - 1 is non-negative where i starts at 1."""
    src = np.arange(20, dtype=np.float32).reshape(4, 5) ** 2
    dst = np.zeros_like(src)
    assert "wrap_index" not in stencil.ir(src, dst)
    check(stencil, src, dst)

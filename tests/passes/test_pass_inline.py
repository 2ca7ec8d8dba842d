"""inline: every call of a func is replaced by a copy of its body, funcs calling funcs
included, so no call is left. Golden IR after the pass, results unchanged."""

from __future__ import annotations

import textwrap

import numpy as np

import kdsl as kd


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@kd.func
def square(v: kd.f32) -> kd.f32:
    return v * v


@kd.kernel
def squares_plus_one(x: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        x[i] = square(x[i]) + 1.0


def test_call_disappears():
    x = np.array([1.5, -2.0, 3.0], np.float32)
    before = squares_plus_one.ir(x, stage="frontend")
    assert "%7 = call %6 {callee = 'square.0'} : f32" in before
    assert squares_plus_one.ir(x, stage="inline") == golden("""
        kernel @squares_plus_one(%x: array<f32, 1, C>) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 0 : i64
          %3 = constant 1 : i64
          %4 = constant 0 : i64
          %5 = max %0, %4 : i64
          parallel_for %5 {ndim = 1, reductions = []} (%i: i64) {
            %6 = array_load %x, %i : f32
            %7 = mul %6, %6 : f32
            %8 = constant 1.0 : f64
            %9 = cast %8 : f32
            %10 = add %7, %9 : f32
            array_store %x, %i, %10
            yield
          }
          return
        }
    """)
    squares_plus_one(x)
    np.testing.assert_array_equal(x, [3.25, 5.0, 10.0])


@kd.func
def plus_one(x):
    return x + 1.0


@kd.func
def doubled_plus_one(x):
    return plus_one(x) * 2.0


@kd.func
def chain(x):
    return doubled_plus_one(x) - plus_one(x)


@kd.kernel
def apply_chain(x: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        x[i] = chain(x[i])


def test_funcs_calling_funcs_are_inlined_transitively():
    x = np.array([1.0, 2.5, -4.0])
    before = apply_chain.ir(x, stage="frontend")
    assert "call" in before
    assert apply_chain.ir(x, stage="inline") == golden("""
        kernel @apply_chain(%x: array<f64, 1, C>) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 0 : i64
          %3 = constant 1 : i64
          %4 = constant 0 : i64
          %5 = max %0, %4 : i64
          parallel_for %5 {ndim = 1, reductions = []} (%i: i64) {
            %6 = array_load %x, %i : f64
            %7 = constant 1.0 : f64
            %8 = add %6, %7 : f64
            %9 = constant 2.0 : f64
            %10 = mul %8, %9 : f64
            %11 = constant 1.0 : f64
            %12 = add %6, %11 : f64
            %13 = sub %10, %12 : f64
            array_store %x, %i, %13
            yield
          }
          return
        }
    """)
    apply_chain(x)
    np.testing.assert_array_equal(x, [2.0, 3.5, -3.0])


@kd.func
def clipped(v: kd.f32, lo: kd.f32) -> kd.f32:
    if v < lo:
        return lo
    return v


@kd.kernel
def clip_all(x: kd.Array[kd.f32], lo: kd.f32):
    for i in kd.prange(x.shape[0]):
        x[i] = clipped(x[i], lo) + clipped(lo, x[i])


def test_func_with_early_return_inlined_twice():
    x = np.array([0.5, 2.0, -1.0, 3.0], np.float32)
    ir = clip_all.ir(x, 1.0, stage="inline")
    assert "call" not in ir
    assert ir.count("lt ") == 2
    expected = x.copy()
    clip_all.python(expected, np.float32(1.0))
    clip_all(x, 1.0)
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(x, [2.0, 4.0, 2.0, 6.0])

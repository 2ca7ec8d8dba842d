"""bounds-checks (debug mode only): every array access is guarded by an ``if`` on its
indices; the else branch reports the first failing axis and yields a zero, so the access
never happens out of bounds. It runs right after inlining, before anything could delete an
access whose value is unused. Golden IR after the pass, results unchanged."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import kdsl as kd


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@kd.kernel(debug=True)
def get(a: kd.Array[kd.i64], k: kd.i64):
    return a[k]


@kd.kernel
def get_unchecked(a: kd.Array[kd.i64], k: kd.i64):
    return a[k]


def test_load_is_guarded():
    a = np.array([5, 6, 7], np.int64)
    assert get.ir(a, 1, stage="inline") == golden("""
        kernel @get(%a: array<i64, 1, C>, %k: i64) -> i64 {
          %0 = array_dim %a {axis = 0} : i64
          %1 = wrap_index %k, %0 : i64
          %2 = array_load %a, %1 : i64
          return %2
        }
    """)
    assert get.ir(a, 1, stage="bounds-checks") == golden("""
        kernel @get(%a: array<i64, 1, C>, %k: i64) -> i64 {
          %0 = array_dim %a {axis = 0} : i64
          %1 = wrap_index %k, %0 : i64
          %2 = constant 0 : i64
          %3 = array_dim %a {axis = 0} : i64
          %4 = ge %1, %2 : bool
          %5 = lt %1, %3 : bool
          %6 = bit_and %4, %5 : bool
          %7 = if %6 : i64 {
            %8 = array_load %a, %1 : i64
            yield %8
          } else {
            raise_index_error %k, %3, %6 {axis = 0, array = 'a'}
            %9 = constant 0 : i64
            yield %9
          }
          return %7
        }
    """)
    assert get(a, 1) == 6
    assert get(a, 2) == 7
    with pytest.raises(IndexError):
        get(a, 3)


def test_no_checks_without_debug():
    a = np.array([5, 6, 7], np.int64)
    assert get_unchecked.ir(a, 1, stage="bounds-checks") == golden("""
        kernel @get_unchecked(%a: array<i64, 1, C>, %k: i64) -> i64 {
          %0 = array_dim %a {axis = 0} : i64
          %1 = wrap_index %k, %0 : i64
          %2 = array_load %a, %1 : i64
          return %2
        }
    """)
    assert "raise_index_error" not in get_unchecked.ir(a, 1)
    assert get_unchecked(a, 0) == 5


@kd.kernel(debug=True)
def put(a: kd.Array[kd.f32, 2], i: kd.i64, j: kd.i64, v: kd.f32):
    a[i, j] = v


def test_store_on_two_axes_checks_both():
    a = np.ones((2, 3), np.float32)
    assert put.ir(a, 1, 2, 2.5, stage="bounds-checks") == golden("""
        kernel @put(%a: array<f32, 2, C, ?x3>, %i: i64, %j: i64, %v: f32) {
          %0 = array_dim %a {axis = 0} : i64
          %1 = wrap_index %i, %0 : i64
          %2 = array_dim %a {axis = 1} : i64
          %3 = wrap_index %j, %2 : i64
          %4 = constant 0 : i64
          %5 = array_dim %a {axis = 0} : i64
          %6 = ge %1, %4 : bool
          %7 = lt %1, %5 : bool
          %8 = bit_and %6, %7 : bool
          %9 = array_dim %a {axis = 1} : i64
          %10 = ge %3, %4 : bool
          %11 = lt %3, %9 : bool
          %12 = bit_and %10, %11 : bool
          %13 = bit_and %8, %12 : bool
          if %13 {
            array_store %a, %1, %3, %v
            yield
          } else {
            raise_index_error %i, %5, %8 {axis = 0, array = 'a'}
            raise_index_error %j, %9, %12 {axis = 1, array = 'a'}
            yield
          }
          return
        }
    """)
    put(a, 1, 2, 2.5)
    expected = np.ones((2, 3), np.float32)
    expected[1, 2] = 2.5
    np.testing.assert_array_equal(a, expected)
    with pytest.raises(IndexError):
        put(a, 0, 3, 9.0)
    np.testing.assert_array_equal(a, expected)


@kd.kernel(debug=True)
def bump(h: kd.Array[kd.i32], v: kd.Array[kd.i64]):
    for i in kd.prange(v.shape[0]):
        h[v[i]] += 1


def test_atomic_update_in_a_parallel_loop_is_guarded():
    h = np.array([10, 20, 30], np.int32)
    v = np.array([0, 2, 2, 1, 2], np.int64)
    assert bump.ir(h, v, stage="bounds-checks") == golden("""
        kernel @bump(%h: array<i32, 1, C>, %v: array<i64, 1, C>) {
          %0 = array_dim %v {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 0 : i64
          %3 = constant 1 : i64
          %4 = constant 0 : i64
          %5 = max %0, %4 : i64
          parallel_for %5 {ndim = 1, reductions = []} (%i: i64) {
            %6 = constant 1 : i64
            %7 = constant 0 : i64
            %8 = array_dim %v {axis = 0} : i64
            %9 = ge %i, %7 : bool
            %10 = lt %i, %8 : bool
            %11 = bit_and %9, %10 : bool
            %12 = if %11 : i64 {
              %13 = array_load %v, %i : i64
              yield %13
            } else {
              raise_index_error %i, %8, %11 {axis = 0, array = 'v'}
              %14 = constant 0 : i64
              yield %14
            }
            %15 = array_dim %h {axis = 0} : i64
            %16 = wrap_index %12, %15 : i64
            %17 = cast %6 : i32
            %18 = constant 0 : i64
            %19 = array_dim %h {axis = 0} : i64
            %20 = ge %16, %18 : bool
            %21 = lt %16, %19 : bool
            %22 = bit_and %20, %21 : bool
            %23 = if %22 : i32 {
              %24 = atomic_rmw %h, %16, %17 {kind = 'add', implicit = True} : i32
              yield %24
            } else {
              raise_index_error %12, %19, %22 {axis = 0, array = 'h'}
              %25 = constant 0 : i32
              yield %25
            }
            yield
          }
          return
        }
    """)
    # optimized: the load of v[i] (i runs over v's size) is speculated out of its guard;
    # the atomic at a computed index stays guarded
    assert bump.ir(h, v) == golden("""
        kernel @bump(%h: array<i32, 1, C>, %v: array<i64, 1, C>) {
          %0 = array_dim %v {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = ge %i, %1 : bool
            %4 = lt %i, %0 : bool
            %5 = bit_and %3, %4 : bool
            %6 = array_load %v, %i : i64
            %7 = if %5 : i64 {
              yield %6
            } else {
              raise_index_error %i, %0, %5 {axis = 0, array = 'v'}
              yield %1
            }
            %8 = array_dim %h {axis = 0} : i64
            %9 = wrap_index %7, %8 : i64
            %10 = constant 1 : i32
            %11 = ge %9, %1 : bool
            %12 = lt %9, %8 : bool
            %13 = bit_and %11, %12 : bool
            %14 = if %13 : i32 {
              %15 = atomic_rmw %h, %9, %10 {kind = 'add', implicit = True} : i32
              yield %15
            } else {
              raise_index_error %7, %8, %13 {axis = 0, array = 'h'}
              %16 = constant 0 : i32
              yield %16
            }
            yield
          }
          return
        }
    """)
    bump(h, v)
    np.testing.assert_array_equal(h, [11, 21, 33])


@kd.kernel(debug=True)
def get_f32(a: kd.Array[kd.f32], k: kd.i64):
    return a[k]


def test_float_fallback_zero_is_a_float_constant():
    a = np.array([1.5, 2.5], np.float32)
    assert "%9 = constant 0.0 : f32" in get_f32.ir(a, 0, stage="bounds-checks")


def test_float_access_checked_and_correct():
    a = np.array([1.5, 2.5], np.float32)
    assert get_f32(a, 1) == np.float32(2.5)
    assert get_f32(a, -1) == np.float32(2.5)  # counts from the end, as in Python
    with pytest.raises(IndexError, match="index -3 is out of bounds"):
        get_f32(a, -3)  # the index as written, not as wrapped

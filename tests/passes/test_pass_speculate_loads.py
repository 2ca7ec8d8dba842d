"""speculate-loads: a load inside a branch moves in front of it when its indices are
provably in bounds (a loop variable running over that array's size) and nothing in the
branch writes memory before it. Golden IR after the pass, results unchanged."""

from __future__ import annotations

import textwrap

import numpy as np

import kdsl as kd


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@kd.kernel
def others_sum(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        s = kd.f32(0.0)
        for j in range(x.shape[0]):
            if j != i:
                s += x[j]
        out[i] = s


def test_load_in_bounds_moves_before_the_branch():
    x = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
    out = np.zeros(4, np.float32)
    before = others_sum.ir(x, out, stage="demote-atomics")
    assert "if %6 : f32 {\n        %8 = array_load %x, %j : f32" in before
    assert others_sum.ir(x, out, stage="speculate-loads") == golden("""
        kernel @others_sum(%x: array<f32, 1, C>, %out: array<f32, 1, C>) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 1 : i64
          %3 = max %0, %1 : i64
          parallel_for %3 {ndim = 1, reductions = []} (%i: i64) {
            %4 = constant 0.0 : f32
            %s = for %1, %0, %2, %4 : f32 (%j: i64, %5: f32) {
              %6 = ne %j, %i : bool
              %7 = array_load %x, %j : f32
              %8 = if %6 : f32 {
                %9 = add %5, %7 : f32
                yield %9
              } else {
                yield %5
              }
              yield %8
            }
            array_store %out, %i, %s
            yield
          }
          return
        }
    """)
    others_sum(x, out)
    np.testing.assert_array_equal(out, [14.0, 13.0, 11.0, 7.0])


@kd.kernel
def bounded_by_another_array(x: kd.Array[kd.f32], y: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(out.shape[0]):
        s = kd.f32(0.0)
        for j in range(y.shape[0]):
            if j != i:
                s += x[j] + y[j]
        out[i] = s


def test_load_not_provably_in_bounds_stays():
    """``y[j]`` moves (j runs over y's size); ``x[j]`` stays: x may be shorter."""
    x = np.array([1.0, 2.0, 4.0], np.float32)
    y = np.array([10.0, 20.0, 40.0], np.float32)
    out = np.zeros(2, np.float32)
    assert bounded_by_another_array.ir(x, y, out, stage="speculate-loads") == golden("""
        kernel @bounded_by_another_array(%x: array<f32, 1, C>, %y: array<f32, 1, C>, %out: array<f32, 1, C>) {
          %0 = array_dim %out {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 1 : i64
          %3 = max %0, %1 : i64
          parallel_for %3 {ndim = 1, reductions = []} (%i: i64) {
            %4 = constant 0.0 : f32
            %5 = array_dim %y {axis = 0} : i64
            %s = for %1, %5, %2, %4 : f32 (%j: i64, %6: f32) {
              %7 = ne %j, %i : bool
              %8 = array_load %y, %j : f32
              %9 = if %7 : f32 {
                %10 = array_load %x, %j : f32
                %11 = add %10, %8 : f32
                %12 = add %6, %11 : f32
                yield %12
              } else {
                yield %6
              }
              yield %9
            }
            array_store %out, %i, %s
            yield
          }
          return
        }
    """)
    bounded_by_another_array(x, y, out)
    np.testing.assert_array_equal(out, [66.0, 55.0])


@kd.kernel
def store_then_load(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        if x[i] > 1.0:
            out[i] = 0.5
            out[i] += x[i]


def test_load_after_a_store_in_the_branch_stays():
    x = np.array([0.5, 2.0, 3.0], np.float32)
    out = np.full(3, 7.0, np.float32)
    assert store_then_load.ir(x, out, stage="speculate-loads") == golden("""
        kernel @store_then_load(%x: array<f32, 1, C>, %out: array<f32, 1, C>) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = array_load %x, %i : f32
            %4 = constant 1.0 : f32
            %5 = gt %3, %4 : bool
            if %5 {
              %6 = constant 0.5 : f32
              array_store %out, %i, %6
              %7 = array_load %x, %i : f32
              %8 = array_load %out, %i : f32
              %9 = add %8, %7 : f32
              array_store %out, %i, %9
              yield
            } else {
              yield
            }
            yield
          }
          return
        }
    """)
    store_then_load(x, out)
    np.testing.assert_array_equal(out, [7.0, 2.5, 3.5])

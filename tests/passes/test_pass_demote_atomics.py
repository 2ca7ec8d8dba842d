"""demote-atomics: ``a[idx] += v`` in a parallel loop is an atomic update unless no two
iterations can touch the same element; then it becomes load, add (or sub), store.
Golden IR after the pass, results unchanged."""

from __future__ import annotations

import textwrap

import numpy as np

import kdsl as kd


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@kd.kernel
def accumulate(acc: kd.Array[kd.f32], v: kd.Array[kd.f32]):
    for i in kd.prange(acc.shape[0]):
        acc[i] += v[i]


def test_update_at_the_loop_variable_is_demoted():
    acc = np.array([1.0, 2.0, 3.0], np.float32)
    v = np.array([0.5, -1.0, 4.0], np.float32)
    before = accumulate.ir(acc, v, stage="dce")
    assert "atomic_rmw %acc, %i, %3 {kind = 'add', implicit = True} : f32" in before
    assert accumulate.ir(acc, v, stage="demote-atomics") == golden("""
        kernel @accumulate(%acc: array<f32, 1, C>, %v: array<f32, 1, C>) {
          %0 = array_dim %acc {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = array_load %v, %i : f32
            %4 = array_load %acc, %i : f32
            %5 = add %4, %3 : f32
            array_store %acc, %i, %5
            yield
          }
          return
        }
    """)
    accumulate(acc, v)
    np.testing.assert_array_equal(acc, [1.5, 1.0, 7.0])


@kd.kernel
def subtract_in_inner_loop(acc: kd.Array[kd.f64], v: kd.Array[kd.f64]):
    for i in kd.prange(acc.shape[0]):
        for k in range(3):
            acc[i] -= v[i] * k


def test_subtraction_in_a_serial_inner_loop_is_demoted():
    acc = np.array([10.0, 20.0])
    v = np.array([1.0, 2.5])
    assert subtract_in_inner_loop.ir(acc, v, stage="demote-atomics") == golden("""
        kernel @subtract_in_inner_loop(%acc: array<f64, 1, C>, %v: array<f64, 1, C>) {
          %0 = array_dim %acc {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 1 : i64
          %3 = max %0, %1 : i64
          parallel_for %3 {ndim = 1, reductions = []} (%i: i64) {
            %4 = constant 3 : i64
            for %1, %4, %2 (%k: i64) {
              %5 = array_load %v, %i : f64
              %6 = cast %k : f64
              %7 = mul %5, %6 : f64
              %8 = array_load %acc, %i : f64
              %9 = sub %8, %7 : f64
              array_store %acc, %i, %9
              yield
            }
            yield
          }
          return
        }
    """)
    subtract_in_inner_loop(acc, v)
    np.testing.assert_array_equal(acc, [7.0, 12.5])


@kd.kernel
def histogram(h: kd.Array[kd.i32], v: kd.Array[kd.i32]):
    for i in kd.prange(v.shape[0]):
        b = v[i] % h.shape[0]
        h[b] += 1


def test_update_at_a_computed_index_stays_atomic():
    h = np.array([100, 200, 300, 400], np.int32)
    v = np.arange(1, 1001, dtype=np.int32) * 7
    assert histogram.ir(h, v, stage="demote-atomics") == golden("""
        kernel @histogram(%h: array<i32, 1, C>, %v: array<i32, 1, C>) {
          %0 = array_dim %v {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = array_load %v, %i : i32
            %4 = array_dim %h {axis = 0} : i64
            %5 = cast %4 : i32
            %6 = mod %3, %5 : i32
            %7 = cast %6 : i64
            %8 = wrap_index %7, %4 : i64
            %9 = constant 1 : i32
            %10 = atomic_rmw %h, %8, %9 {kind = 'add', implicit = True} : i32
            yield
          }
          return
        }
    """)
    expected = h + np.bincount(v % 4, minlength=4).astype(np.int32)
    histogram(h, v)
    np.testing.assert_array_equal(h, expected)


@kd.kernel
def also_written_next_door(acc: kd.Array[kd.f32], v: kd.Array[kd.f32]):
    for i in kd.prange(v.shape[0]):
        acc[i] += v[i]
        acc[i + 1] = 0.5


def test_array_also_written_at_another_index_stays_atomic():
    acc = np.ones(4, np.float32)
    v = np.array([2.0, 3.0, 4.0], np.float32)
    assert also_written_next_door.ir(acc, v, stage="demote-atomics") == golden("""
        kernel @also_written_next_door(%acc: array<f32, 1, C>, %v: array<f32, 1, C>) {
          %0 = array_dim %v {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 1 : i64
          %3 = max %0, %1 : i64
          parallel_for %3 {ndim = 1, reductions = []} (%i: i64) {
            %4 = array_load %v, %i : f32
            %5 = atomic_rmw %acc, %i, %4 {kind = 'add', implicit = True} : f32
            %6 = add %i, %2 : i64
            %7 = constant 0.5 : f32
            array_store %acc, %6, %7
            yield
          }
          return
        }
    """)
    kd.set_num_threads(1)  # this kernel's iterations overlap: its result is defined serially
    also_written_next_door(acc, v)
    np.testing.assert_array_equal(acc, [3.0, 3.5, 4.5, 0.5])


@kd.kernel
def transposed_grid(g: kd.Array[kd.i64, 2]):
    for i, j in kd.ndrange(g.shape[0], g.shape[1]):
        g[j, i] += 1


@kd.kernel
def row_sums(g: kd.Array[kd.i64, 2], out: kd.Array[kd.i64]):
    for i, j in kd.ndrange(g.shape[0], g.shape[1]):
        out[i] += g[i, j]


def test_ndrange_demotes_only_when_every_loop_variable_indexes():
    g = np.arange(1, 10, dtype=np.int64).reshape(3, 3)
    assert transposed_grid.ir(g, stage="demote-atomics") == golden("""
        kernel @transposed_grid(%g: array<i64, 2, C, ?x3>) {
          %0 = array_dim %g {axis = 0} : i64
          %1 = array_dim %g {axis = 1} : i64
          %2 = constant 0 : i64
          %3 = constant 1 : i64
          %4 = max %0, %2 : i64
          %5 = max %1, %2 : i64
          parallel_for %4, %5 {ndim = 2, reductions = []} (%i: i64, %j: i64) {
            %6 = array_load %g, %j, %i : i64
            %7 = add %6, %3 : i64
            array_store %g, %j, %i, %7
            yield
          }
          return
        }
    """)
    out = np.array([100, 200, 300], np.int64)
    assert row_sums.ir(g, out, stage="demote-atomics") == golden("""
        kernel @row_sums(%g: array<i64, 2, C, ?x3>, %out: array<i64, 1, C>) {
          %0 = array_dim %g {axis = 0} : i64
          %1 = array_dim %g {axis = 1} : i64
          %2 = constant 0 : i64
          %3 = max %0, %2 : i64
          %4 = max %1, %2 : i64
          parallel_for %3, %4 {ndim = 2, reductions = []} (%i: i64, %j: i64) {
            %5 = array_load %g, %i, %j : i64
            %6 = atomic_rmw %out, %i, %5 {kind = 'add', implicit = True} : i64
            yield
          }
          return
        }
    """)
    row_sums(g, out)
    np.testing.assert_array_equal(out, [106, 215, 324])
    transposed_grid(g)
    np.testing.assert_array_equal(g, np.arange(2, 11).reshape(3, 3))


@kd.kernel
def explicit_atomic(acc: kd.Array[kd.i64], old: kd.Array[kd.i64]):
    for i in kd.prange(acc.shape[0]):
        old[i] = kd.atomic_add(acc, i, 5)


def test_explicit_atomic_stays():
    acc = np.array([1, 2, 3], np.int64)
    old = np.zeros(3, np.int64)
    assert explicit_atomic.ir(acc, old, stage="demote-atomics") == golden("""
        kernel @explicit_atomic(%acc: array<i64, 1, C>, %old: array<i64, 1, C>) {
          %0 = array_dim %acc {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = constant 5 : i64
            %4 = atomic_rmw %acc, %i, %3 {kind = 'add', implicit = False} : i64
            array_store %old, %i, %4
            yield
          }
          return
        }
    """)
    explicit_atomic(acc, old)
    np.testing.assert_array_equal(acc, [6, 7, 8])
    np.testing.assert_array_equal(old, [1, 2, 3])

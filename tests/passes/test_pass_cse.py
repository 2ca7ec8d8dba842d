"""cse: a pure op equal to one already computed in an enclosing scope is replaced by it
(commutative operands in either order); ops in sibling branches are not shared; loads
are never merged. Golden IR after the pass, and the kernel's results unchanged."""

from __future__ import annotations

import textwrap

import numpy as np

import kdsl as kd


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@kd.kernel
def repeated(x: kd.Array[kd.f32], y: kd.Array[kd.f32], a: kd.f32, b: kd.f32):
    for i in kd.prange(x.shape[0]):
        y[i] = (a * b + x[i]) * (b * a + x[i])


def test_commutative_products_are_shared():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    y = np.zeros(3, np.float32)
    before = repeated.ir(x, y, 1.5, 2.0, stage="simplify")
    assert "mul %a, %b : f32" in before and "mul %b, %a : f32" in before
    assert repeated.ir(x, y, 1.5, 2.0, stage="cse") == golden("""
        kernel @repeated(%x: array<f32, 1, C>, %y: array<f32, 1, C>, %a: f32, %b: f32) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 1 : i64
          %3 = max %0, %1 : i64
          parallel_for %3 {ndim = 1, reductions = []} (%i: i64) {
            %4 = mul %a, %b : f32
            %5 = array_load %x, %i : f32
            %6 = add %4, %5 : f32
            %7 = array_load %x, %i : f32
            %8 = add %4, %7 : f32
            %9 = mul %6, %8 : f32
            array_store %y, %i, %9
            yield
          }
          return
        }
    """)
    repeated(x, y, 1.5, 2.0)
    ab = np.float32(1.5) * np.float32(2.0)
    np.testing.assert_array_equal(y, (ab + x) * (ab + x))


@kd.kernel
def scoped(x: kd.Array[kd.f32], a: kd.f32, b: kd.f32):
    c = a * b
    for i in kd.prange(x.shape[0]):
        if x[i] > 0.0:
            x[i] = a - b
        else:
            x[i] = a - b + c
        x[i] = x[i] + (a - b) + a * b


def test_values_are_shared_only_with_enclosing_scopes():
    """``a * b`` inside the loop reuses the one before it; the three ``a - b`` (then
    branch, else branch, after the if) stay three."""
    x = np.array([1.0, -2.0, 3.0, -0.5], np.float32)
    assert scoped.ir(x, 3.0, 0.5, stage="cse") == golden("""
        kernel @scoped(%x: array<f32, 1, C>, %a: f32, %b: f32) {
          %0 = mul %a, %b : f32
          %1 = array_dim %x {axis = 0} : i64
          %2 = constant 0 : i64
          %3 = constant 1 : i64
          %4 = max %1, %2 : i64
          parallel_for %4 {ndim = 1, reductions = []} (%i: i64) {
            %5 = array_load %x, %i : f32
            %6 = constant 0.0 : f64
            %7 = constant 0.0 : f32
            %8 = gt %5, %7 : bool
            if %8 {
              %9 = sub %a, %b : f32
              array_store %x, %i, %9
              yield
            } else {
              %10 = sub %a, %b : f32
              %11 = add %10, %0 : f32
              array_store %x, %i, %11
              yield
            }
            %12 = array_load %x, %i : f32
            %13 = sub %a, %b : f32
            %14 = add %12, %13 : f32
            %15 = add %14, %0 : f32
            array_store %x, %i, %15
            yield
          }
          return
        }
    """)
    expected = x.copy()
    scoped.python(expected, np.float32(3.0), np.float32(0.5))
    scoped(x, 3.0, 0.5)
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(x, [6.5, 8.0, 6.5, 8.0])

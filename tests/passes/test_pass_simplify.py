"""simplify: constant folding (in the operands' exact type, with Python's integer
semantics), algebraic identities, and branches on constants. Golden IR after the pass,
and the kernel's results unchanged."""

from __future__ import annotations

import textwrap

import numpy as np

import kdsl as kd

SCALE = 1
DEBUG_FLAG = False


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@kd.kernel
def identities(x: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        x[i] = x[i] * SCALE - (2.0 * 3.0 - 6.0)
        if DEBUG_FLAG:
            x[i] = 0.0


def test_fold_and_identities():
    """``x * 1`` and ``x - 0.0`` are ``x``; ``2.0 * 3.0 - 6.0`` folds; the folded
    constants stay until dce removes them."""
    x = np.array([1.5, -2.0, 0.25, -0.0], np.float32)
    before = identities.ir(x, stage="inline")
    assert "mul %6, %8 : f32" in before and "sub %9, %15 : f32" in before
    assert identities.ir(x, stage="simplify") == golden("""
        kernel @identities(%x: array<f32, 1, C>) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 0 : i64
          %3 = constant 1 : i64
          %4 = constant 0 : i64
          %5 = max %0, %4 : i64
          parallel_for %5 {ndim = 1, reductions = []} (%i: i64) {
            %6 = array_load %x, %i : f32
            %7 = constant 1 : i64
            %8 = constant 1.0 : f32
            %9 = constant 2.0 : f64
            %10 = constant 3.0 : f64
            %11 = constant 6.0 : f64
            %12 = constant 6.0 : f64
            %13 = constant 0.0 : f64
            %14 = constant 0.0 : f32
            array_store %x, %i, %6
            yield
          }
          return
        }
    """)
    expected = x.copy()
    identities(x)
    np.testing.assert_array_equal(x, expected)
    assert np.signbit(x[3])


@kd.kernel
def integer_folds(out: kd.Array[kd.i64]):
    out[0] = -7 // 2
    out[1] = -7 % 3
    out[2] = (1 + 2) * 4


def test_integer_folding_has_python_semantics():
    out = np.full(3, 99, np.int64)
    assert integer_folds.ir(out, stage="simplify") == golden("""
        kernel @integer_folds(%out: array<i64, 1, C>) {
          %0 = constant 7 : i64
          %1 = constant -7 : i64
          %2 = constant 2 : i64
          %3 = constant -4 : i64
          %4 = constant 0 : i64
          array_store %out, %4, %3
          %5 = constant 7 : i64
          %6 = constant -7 : i64
          %7 = constant 3 : i64
          %8 = constant 2 : i64
          %9 = constant 1 : i64
          array_store %out, %9, %8
          %10 = constant 1 : i64
          %11 = constant 2 : i64
          %12 = constant 3 : i64
          %13 = constant 4 : i64
          %14 = constant 12 : i64
          %15 = constant 2 : i64
          array_store %out, %15, %14
          return
        }
    """)
    integer_folds(out)
    np.testing.assert_array_equal(out, [-7 // 2, -7 % 3, 12])


@kd.kernel
def f32_folds(out: kd.Array[kd.f32]):
    a = kd.f32(0.1)
    out[0] = a * a


def test_f32_folding_rounds_like_float32():
    out = np.full(1, 5.0, np.float32)
    product = np.float32(0.1) * np.float32(0.1)
    assert f32_folds.ir(out, stage="simplify") == golden(f"""
        kernel @f32_folds(%out: array<f32, 1, C>) {{
          %0 = constant 0.1 : f64
          %1 = constant {float(np.float32(0.1))!r} : f32
          %2 = constant {float(product)!r} : f32
          %3 = constant 0 : i64
          array_store %out, %3, %2
          return
        }}
    """)
    f32_folds(out)
    assert out[0] == product


@kd.kernel
def branch_on_constant(x: kd.Array[kd.i64], n: kd.i64):
    k = 3
    if k > 2:
        y = n + 1
    else:
        y = n - 1
    x[0] = y


def test_if_on_a_constant_keeps_one_branch():
    x = np.full(2, 7, np.int64)
    assert "%y = if %2 : i64 {" in branch_on_constant.ir(x, 5, stage="inline")
    assert branch_on_constant.ir(x, 5, stage="simplify") == golden("""
        kernel @branch_on_constant(%x: array<i64, 1, C>, %n: i64) {
          %0 = constant 3 : i64
          %1 = constant 2 : i64
          %2 = constant True : bool
          %3 = constant 1 : i64
          %4 = add %n, %3 : i64
          %5 = constant 0 : i64
          array_store %x, %5, %4
          return
        }
    """)
    branch_on_constant(x, 5)
    np.testing.assert_array_equal(x, [6, 7])


def test_optimized_ir_has_no_dead_constants():
    x = np.array([1.5, -2.0], np.float32)
    assert identities.ir(x) == golden("""
        kernel @identities(%x: array<f32, 1, C>) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = array_load %x, %i : f32
            array_store %x, %i, %3
            yield
          }
          return
        }
    """)


@kd.kernel
def plus_zero(x: kd.Array[kd.f32], y: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        y[i] = x[i] + 0.0


def test_float_plus_zero_keeps_the_sign_of_zero():
    x = np.array([-0.0, 1.5, -2.0], np.float32)
    y = np.full(3, 9.0, np.float32)
    plus_zero(x, y)
    expected = x + np.float32(0.0)
    np.testing.assert_array_equal(y, expected)
    assert not np.signbit(y[0])

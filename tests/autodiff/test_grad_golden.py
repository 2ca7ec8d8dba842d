"""Golden IR of a gradient, as the differentiation makes it (before optimisation)."""

from __future__ import annotations

import numpy as np

import kdsl as kd


@kd.kernel
def square_sum(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * w
    return s


EXPECTED = """\
kernel @square_sum(%x: array<f64, 1, C>, %w: f64, %d_x: array<f64, 1, C>) -> f64, f64, i64 {
  %0 = constant 0.0 : f64
  %1 = array_dim %x {axis = 0} : i64
  %2 = constant 0 : i64
  %3 = constant 0 : i64
  %4 = constant 1 : i64
  %5 = constant 0 : i64
  %6 = sub %1, %3 : i64
  %7 = max %6, %5 : i64
  %s = for %3, %1, %4, %0 : f64 (%i: i64, %8: f64) {
    %9 = array_load %x, %i : f64
    %10 = mul %9, %w : f64
    %11 = add %8, %10 : f64
    yield %11
  }
  %12 = constant 1.0 : f64
  %13 = constant 0.0 : f64
  %14 = constant 0 : i64
  %15 = constant 0 : i64
  %16 = constant 1 : i64
  %17 = for %15, %7, %16, %13 : f64 (%r: i64, %d_w: f64) {
    %18 = add %14, %7 : i64
    %19 = sub %18, %16 : i64
    %20 = sub %19, %r : i64
    %21 = sub %20, %14 : i64
    %22 = mul %20, %4 : i64
    %23 = add %3, %22 : i64
    %24 = array_load %x, %23 : f64
    %25 = mul %24, %w : f64
    %26 = add %0, %25 : f64
    %27 = mul %12, %w : f64
    %28 = mul %12, %24 : f64
    %29 = add %d_w, %28 : f64
    %30 = atomic_rmw %d_x, %23, %27 {kind = 'add', implicit = True} : f64
    yield %29
  }
  %31 = constant 0 : i64
  return %s, %17, %31
}
"""


def test_gradient_ir_of_a_serial_loop() -> None:
    """The forward loop stores nothing (the reverse sweep reads no carried value); the
    reverse loop runs the iterations backwards, recomputes the body, and carries the
    adjoint of ``w`` (that of ``s`` is the same in every iteration); the adjoint of ``x[i]`` is added into ``d_x``."""
    text = kd.grad(square_sum, (0, 1)).ir(np.ones(3), 2.0, stage="autodiff")
    assert text + "\n" == EXPECTED


def test_gradient_ir_after_optimisation_keeps_the_reverse_loop() -> None:
    text = kd.grad(square_sum, (0, 1)).ir(np.ones(3), 2.0)
    assert "atomic_rmw %d_x" in text
    assert "(%r: i64, %d_w: f64)" in text  # the adjoint of s is the constant 1

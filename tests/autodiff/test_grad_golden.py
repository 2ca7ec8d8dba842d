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
kernel @square_sum(%x: array<f64, 1, C>, %w: f64, %d_x: array<f64, 1, C>) -> f64, f64 {
  %0 = constant 0.0 : f64
  %1 = array_dim %x {axis = 0} : i64
  %2 = constant 0 : i64
  %3 = constant 0 : i64
  %4 = constant 1 : i64
  %5 = constant 1 : i64
  %6 = sub %1, %3 : i64
  %7 = sub %4, %5 : i64
  %8 = add %6, %7 : i64
  %9 = floordiv %8, %4 : i64
  %10 = constant 0 : i64
  %11 = max %9, %10 : i64
  %s = for %3, %1, %4, %0 : f64 (%i: i64, %12: f64) {
    %13 = array_load %x, %i : f64
    %14 = mul %13, %w : f64
    %15 = add %12, %14 : f64
    yield %15
  }
  %16 = constant 1.0 : f64
  %17 = constant 0.0 : f64
  %18 = constant 0 : i64
  %19 = constant 1 : i64
  %20, %21 = for %18, %11, %19, %16, %17 : f64, f64 (%r: i64, %d_s: f64, %d_w: f64) {
    %22 = sub %11, %19 : i64
    %23 = sub %22, %r : i64
    %24 = mul %23, %4 : i64
    %25 = add %3, %24 : i64
    %26 = array_load %x, %25 : f64
    %27 = mul %26, %w : f64
    %28 = add %0, %27 : f64
    %29 = mul %d_s, %w : f64
    %30 = constant 0.0 : f64
    %31 = eq %d_s, %30 : bool
    %32 = constant 0.0 : f64
    %33 = select %31, %32, %29 : f64
    %34 = mul %d_s, %26 : f64
    %35 = constant 0.0 : f64
    %36 = eq %d_s, %35 : bool
    %37 = constant 0.0 : f64
    %38 = select %36, %37, %34 : f64
    %39 = add %d_w, %38 : f64
    %40 = atomic_rmw %d_x, %25, %33 {kind = 'add', implicit = True} : f64
    yield %d_s, %39
  }
  return %s, %21
}
"""


def test_gradient_ir_of_a_serial_loop() -> None:
    """The forward loop stores nothing (the reverse sweep reads no carried value); the
    reverse loop runs the iterations backwards, recomputes the body, and carries the
    adjoints of ``s`` and ``w``; the adjoint of ``x[i]`` is added into ``d_x``."""
    text = kd.grad(square_sum, (0, 1)).ir(np.ones(3), 2.0, stage="autodiff")
    assert text + "\n" == EXPECTED


def test_gradient_ir_after_optimisation_keeps_the_reverse_loop() -> None:
    text = kd.grad(square_sum, (0, 1)).ir(np.ones(3), 2.0)
    assert "atomic_rmw %d_x" in text
    assert "(%r: i64, %d_s: f64, %d_w: f64)" in text

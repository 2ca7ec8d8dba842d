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
  %3 = constant 1 : i64
  %4 = constant 1.0 : f64
  %5 = constant 0.0 : f64
  %6, %7 = for %2, %1, %3, %0, %5 : f64, f64 (%i: i64, %s: f64, %d_w: f64) {
    %8 = array_load %x, %i : f64
    %9 = mul %8, %w : f64
    %10 = mul %4, %w : f64
    %11 = mul %4, %8 : f64
    %12 = add %d_w, %11 : f64
    %13 = atomic_rmw %d_x, %i, %10 {kind = 'add', implicit = True} : f64
    %14 = add %s, %9 : f64
    yield %14, %12
  }
  %15 = constant 0 : i64
  %16 = constant 0 : i64
  return %6, %7, %16
}
"""


def test_gradient_ir_of_a_serial_loop() -> None:
    """``s`` is only summed, so its adjoint is the same in every iteration: one loop, in
    the loop's own order, computes the value and the adjoints (no forward pass of its own,
    nothing stored); it carries ``s`` and the adjoint of ``w``, and adds the adjoint of
    ``x[i]`` into ``d_x``."""
    text = kd.grad(square_sum, (0, 1)).ir(np.ones(3), 2.0, stage="autodiff")
    assert text + "\n" == EXPECTED


def test_gradient_ir_after_optimisation_is_one_loop() -> None:
    text = kd.grad(square_sum, (0, 1)).ir(np.ones(3), 2.0)
    assert "atomic_rmw %d_x" in text
    assert text.count(" = for ") == 1
    assert "(%i: i64, %s: f64, %d_w: f64)" in text  # the adjoint of s is the constant 1


@kd.kernel
def running_product(x: kd.Array[kd.f64]) -> kd.f64:
    p = 1.0
    for i in range(x.shape[0]):
        p = p * x[i]
    return p


def test_a_loop_carrying_a_product_still_runs_backwards() -> None:
    """The adjoint of ``p`` differs from one iteration to the next: a forward loop, then
    a loop over the iterations in reverse order."""
    text = kd.grad(running_product).ir(np.ones(3), stage="autodiff")
    assert "(%r: i64" in text
    x = np.array([0.5, 2.0, 3.0])
    assert np.allclose(kd.grad(running_product)(x), [6.0, 1.5, 1.0])

"""Golden IR of a gradient through a whole-array expression, as the differentiation
makes it (before the tensor lowering)."""

from __future__ import annotations

import numpy as np

import kdsl as kd


@kd.kernel
def scaled_total(x: kd.Array[kd.f64, 2], b: kd.Array[kd.f64]) -> kd.f64:
    return kd.sum(kd.sin(x) * b[None, :])


EXPECTED = """\
kernel @scaled_total(%x: array<f64, 2, C, ?x3>, %b: array<f64, 1, C>, %d_x: array<f64, 2, C, ?x3>, %d_b: array<f64, 1, C>) -> f64, i64 {
  %0 = tensor_map %x {fn = 'sin', operand_type = f64} : array<f64, 2, C>
  %1 = array_view %b {spec = [['newaxis'], ['slice', False, False, False]]} : array<f64, 2, A>
  %2 = array_view %d_b {spec = [['newaxis'], ['slice', False, False, False]]} : array<f64, 2, A>
  %3 = tensor_map %0, %1 {fn = 'mul', operand_type = f64} : array<f64, 2, C>
  %4 = tensor_reduce %3 {kind = 'sum', axis = None, keepdims = False} : f64
  %5 = constant 1.0 : f64
  %6 = array_dim %x {axis = 1} : i64
  %7 = array_dim %1 {axis = 1} : i64
  %8 = constant 1 : i64
  %9 = eq %6, %7 : bool
  %10 = eq %7, %8 : bool
  %11 = bit_or %9, %10 : bool
  raise_shape_error %11, %6, %7 {axis = 1, what = 'under a gradient an operand of size 1 on an axis cannot be broadcast; give it a new axis (a[None, :]) instead'}
  %12 = constant 1 : i64
  %13 = eq %7, %6 : bool
  %14 = eq %6, %12 : bool
  %15 = bit_or %13, %14 : bool
  raise_shape_error %15, %7, %6 {axis = 1, what = 'under a gradient an operand of size 1 on an axis cannot be broadcast; give it a new axis (a[None, :]) instead'}
  %16 = tensor_map %x {fn = 'sin', operand_type = f64} : array<f64, 2, C>
  %17 = tensor_map %5, %1 {fn = 'mul', operand_type = f64} : array<f64, 2, C>
  %18 = tensor_map %5, %16 {fn = 'mul', operand_type = f64} : array<f64, 2, C>
  %19 = tensor_reduce %18 {kind = 'sum', axis = 0, keepdims = True} : array<f64, 2, C>
  %20 = tensor_map %x {fn = 'cos', operand_type = f64} : array<f64, 2, C>
  %21 = tensor_map %17, %20 {fn = 'mul', operand_type = f64} : array<f64, 2, C>
  tensor_assign %2, %19 {accumulate = 'add'}
  tensor_assign %d_x, %21 {accumulate = 'add'}
  %22 = constant 0 : i64
  return %4, %22
}
"""


def test_gradient_ir_of_a_broadcast_product() -> None:
    """The sum spreads the seed 1.0 over the product; ``sin(x)`` is computed again on the
    way back (so that it stays fused there); the adjoint of ``b[None, :]`` is summed over
    the broadcast axis (keepdims, a static size-1 axis) and added into the same view of
    ``d_b``; operands broadcast along axes of run-time size are checked."""
    text = kd.grad(scaled_total, (0, 1)).ir(np.ones((2, 3)), np.ones(3), stage="autodiff")
    assert text + "\n" == EXPECTED


def test_optimised_gradient_has_no_tensor_ops_left() -> None:
    text = kd.grad(scaled_total, (0, 1)).ir(np.ones((2, 3)), np.ones(3))
    assert "tensor_" not in text
    assert text.count("parallel_for") >= 3


@kd.kernel
def weighted(x: kd.Array[kd.f64, 2], y: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.sum(kd.exp(x * 0.5) * y)


def test_an_elementwise_gradient_is_one_fused_loop() -> None:
    """The way back computes exp(x * 0.5) again inside the loop that adds into d_x: no
    temporary array, and the additions into d_x are plain (each element once)."""
    text = kd.grad(weighted).ir(np.ones((2, 3)), np.ones((2, 3)))
    assert "array_new" not in text
    assert "atomic_rmw" not in text
    updates = [line for line in text.splitlines() if "array_store %d_x" in line]
    assert len(updates) == 2  # the loop for equal shapes and the broadcasting one
    assert text.count("exp ") == 4  # forward and backward, in both versions

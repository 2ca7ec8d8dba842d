"""kd.jvp of kernels written with whole-array expressions (API.md section 7): the
tangent against reverse mode (v . grad == jvp) and the value against the kernel's own;
elementwise ops with broadcasting, reductions along axes, max, matmuls (the CPU's packed
product) with one or both factors varying, transposes, row-wise softmax, assignment into
an argument, and whole-array expressions mixed with loops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import kdsl as kd

RNG = np.random.default_rng(17)


@kd.kernel
def broadcast_tanh(x: kd.Array[kd.f64, 2], w: kd.Array[kd.f64], s: kd.f64) -> kd.f64:
    return kd.sum(kd.tanh(x * w[None, :] + s) ** 2)


@kd.kernel
def axis_reductions(x: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.sum(kd.max(x, axis=1) * kd.mean(x * x, axis=1)) + kd.sum(kd.exp(kd.sum(x, axis=0)))


@kd.kernel
def two_layers(w1: kd.Array[kd.f64, 2], w2: kd.Array[kd.f64, 2], x: kd.Array[kd.f64, 2]) -> kd.f64:
    h = kd.tanh(x @ w1)
    y = h @ w2
    return kd.sum(y * y) / y.shape[0]


@kd.kernel
def gram(a: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.sum(kd.sin(a.T @ a))


@kd.kernel
def softmax_loss(z: kd.Array[kd.f64, 2], target: kd.Array[kd.f64, 2]) -> kd.f64:
    e = kd.exp(z - kd.max(z, axis=1, keepdims=True))
    p = e / kd.sum(e, axis=1, keepdims=True)
    return kd.sum((p - target) ** 2)


@kd.kernel
def assigned_then_looped(x: kd.Array[kd.f64], out: kd.Array[kd.f64]) -> kd.f64:
    out[:] = kd.sqrt(x * x + 1.0) * 2.0
    s = 0.0
    for i in kd.prange(out.shape[0]):
        s += out[i] * x[(i + 1) % x.shape[0]]
    return s


@kd.kernel
def matrix_vector(a: kd.Array[kd.f64, 2], v: kd.Array[kd.f64]) -> kd.f64:
    return kd.sum(kd.cos(a @ v))


def check_jvp(kernel: Any, primals: tuple, argnums: tuple[int, ...]) -> None:
    tangents = tuple(RNG.standard_normal(np.shape(p)) if k in argnums and np.ndim(p)
                     else (float(RNG.standard_normal()) if k in argnums else None)
                     for k, p in enumerate(primals))
    value, tangent = kd.jvp(kernel, primals, tangents)
    np.testing.assert_allclose(value, kernel(*[np.copy(p) if np.ndim(p) else p
                                                for p in primals]), rtol=1e-12)
    grads = kd.grad(kernel, argnums)(*[np.copy(p) if np.ndim(p) else p for p in primals])
    expected = sum(float(np.sum(np.asarray(g) * tangents[k])) for g, k in zip(grads, argnums))
    assert abs(expected) > 1e-6
    np.testing.assert_allclose(tangent, expected, rtol=1e-9, atol=1e-12)


def test_elementwise_with_broadcasting_and_a_scalar() -> None:
    check_jvp(broadcast_tanh, (RNG.random((5, 3)), RNG.random(3), 0.3), (0, 1, 2))


def test_reductions_along_axes_and_max() -> None:
    check_jvp(axis_reductions, (RNG.random((4, 6)),), (0,))


@pytest.mark.parametrize("argnums", [(1,), (0, 1)])
def test_matmuls_with_one_or_both_factors_varying(argnums: tuple[int, ...]) -> None:
    primals = (RNG.standard_normal((3, 5)) * 0.5, RNG.standard_normal((5, 2)),
               RNG.standard_normal((7, 3)))
    check_jvp(two_layers, primals, argnums)


def test_a_transposed_factor() -> None:
    check_jvp(gram, (RNG.standard_normal((4, 3)),), (0,))


def test_matrix_times_vector() -> None:
    check_jvp(matrix_vector, (RNG.standard_normal((4, 3)), RNG.standard_normal(3)), (0, 1))


def test_row_wise_softmax() -> None:
    check_jvp(softmax_loss, (RNG.standard_normal((6, 5)), RNG.random((6, 5))), (0,))


def test_assignment_into_an_argument_then_a_loop() -> None:
    check_jvp(assigned_then_looped, (RNG.random(9), np.zeros(9)), (0,))

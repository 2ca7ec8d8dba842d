"""Gradients through whole-array expressions: each adjoint against NumPy-derived
gradients and against float64 central differences (kd.check_grad)."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd

A2 = kd.Array[kd.f64, 2]
A1 = kd.Array[kd.f64]


def data(*shape: int, seed: int = 0) -> np.ndarray:
    """Random non-zero values away from kinks."""
    rng = np.random.default_rng(seed + sum(shape))
    return rng.uniform(0.2, 1.0, shape) * rng.choice([-1.0, 1.0], shape)


@kd.kernel
def elementwise(x: A2, b: A1, s: kd.f64) -> kd.f64:
    return kd.sum(kd.exp(x * s) / (b + 2.0) - kd.sin(b) * x + kd.sqrt(x * x + 1.0) ** 3)


def test_elementwise_with_broadcast_and_scalar() -> None:
    x, b, s = data(5, 3), data(3), 0.7
    gx, gb, gs = kd.grad(elementwise, (0, 1, 2))(x, b, s)
    r = np.sqrt(x * x + 1.0)
    np.testing.assert_allclose(gx, s * np.exp(x * s) / (b + 2.0) - np.sin(b) + 3 * r * x, rtol=1e-12)
    np.testing.assert_allclose(
        gb, (-np.exp(x * s) / (b + 2.0) ** 2 - np.cos(b) * x).sum(axis=0), rtol=1e-12)
    assert gs == pytest.approx((x * np.exp(x * s) / (b + 2.0)).sum(), rel=1e-12)
    kd.check_grad(elementwise, x, b, s, argnums=(0, 1, 2))


@kd.kernel
def outer_difference(a: A1, c: A1) -> kd.f64:
    d = a[:, None] - c[None, :]
    return kd.sum(kd.tanh(d) * d)


def test_new_axes_broadcast_against_each_other() -> None:
    a, c = data(4), data(6)
    ga, gc = kd.grad(outer_difference, (0, 1))(a, c)
    d = a[:, None] - c[None, :]
    local = np.tanh(d) + d * (1 - np.tanh(d) ** 2)
    np.testing.assert_allclose(ga, local.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(gc, -local.sum(axis=0), rtol=1e-12)
    kd.check_grad(outer_difference, a, c, argnums=(0, 1))


@kd.kernel
def axis_sums(x: A2, w: A1) -> kd.f64:
    rows = kd.sum(x * x, axis=1)
    cols = kd.mean(x, axis=0, keepdims=True)
    return kd.sum(rows * w) + kd.sum(kd.cos(cols)) + kd.mean(x) * 2.0


def test_sum_and_mean_along_axes() -> None:
    x, w = data(4, 5), data(4)
    gx, gw = kd.grad(axis_sums, (0, 1))(x, w)
    expected = 2 * x * w[:, None] - np.sin(x.mean(axis=0, keepdims=True)) / 4 + 2.0 / x.size
    np.testing.assert_allclose(gx, expected, rtol=1e-12)
    np.testing.assert_allclose(gw, (x * x).sum(axis=1), rtol=1e-12)
    kd.check_grad(axis_sums, x, w, argnums=(0, 1))


@kd.kernel
def mlp_loss(x: A2, w1: A2, b1: A1, w2: A2, y: A2) -> kd.f64:
    h = kd.tanh(x @ w1 + b1)
    return kd.mean((h @ w2 - y) ** 2)


def mlp_gradients(x, w1, b1, w2, y):
    z = x @ w1 + b1
    h = np.tanh(z)
    r = h @ w2 - y
    d_out = 2 * r / r.size
    d_w2 = h.T @ d_out
    d_z = (d_out @ w2.T) * (1 - h * h)
    return x.T @ d_z, d_z.sum(axis=0), d_w2, d_z @ w1.T


def test_two_layer_network_non_square() -> None:
    x, w1, b1, w2, y = data(7, 3), data(3, 5), data(5), data(5, 2), data(7, 2)
    grads = kd.grad(mlp_loss, (0, 1, 2, 3))(x, w1, b1, w2, y)
    gw1_e, gb1_e, gw2_e, gx_e = mlp_gradients(x, w1, b1, w2, y)
    np.testing.assert_allclose(grads[0], gx_e, rtol=1e-11)
    np.testing.assert_allclose(grads[1], gw1_e, rtol=1e-11)
    np.testing.assert_allclose(grads[2], gb1_e, rtol=1e-11)
    np.testing.assert_allclose(grads[3], gw2_e, rtol=1e-11)
    kd.check_grad(mlp_loss, x, w1, b1, w2, y, argnums=(0, 1, 2, 3))


@kd.kernel
def into_argument(x: A1, out: A1) -> kd.f64:
    out[1:] = x[1:] * x[:-1]
    out[0] = 2.0
    return kd.sum(kd.sin(out))


def test_assignment_into_an_argument_and_the_argument_left_as_found() -> None:
    x, out = data(5), np.full(5, 7.0)
    g = kd.grad(into_argument)(x, out)
    assert np.all(out == 7.0)
    c = np.cos(x[1:] * x[:-1])
    expected = np.zeros(5)
    expected[1:] += c * x[:-1]
    expected[:-1] += c * x[1:]
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_tape_through_a_kernel_writing_its_output_through_a_view() -> None:
    @kd.kernel
    def layer(x: A2, w: A2, out: A2):
        out[:] = kd.tanh(x @ w)

    @kd.kernel
    def total(h: A2) -> kd.f64:
        return kd.sum(h * h)

    x, w = data(6, 3), data(3, 4)
    weights = kd.array(w, requires_grad=True)
    out = kd.zeros((6, 4), kd.f64)
    with kd.Tape() as tape:
        layer(x, weights, out)
        loss = total(out)
    tape.backward(loss)
    h = np.tanh(x @ w)
    np.testing.assert_allclose(weights.grad.numpy(), x.T @ (2 * h * (1 - h * h)), rtol=1e-12)


def test_writing_into_a_whole_array_result_is_differentiated_as_its_loops() -> None:
    @kd.kernel
    def first(x: A1) -> kd.f64:
        y = x * 2.0
        y[0] = 1.0
        return kd.sum(y)

    np.testing.assert_array_equal(kd.grad(first)(data(3)), [0.0, 2.0, 2.0])


@kd.kernel
def elements_in_loops(x: A2, w: A1, n: kd.i32) -> kd.f64:
    y = kd.sin(x * w)
    m = kd.mean(x, axis=0)
    s = 0.0
    for i in range(x.shape[0]):
        s += y[i, 1] * m[2] + kd.sum(y[i] * w)
    for k in range(n):
        s += kd.sum(kd.cos(x * w) * (k + 1.0)) * s * 0.01
    if n > 2:
        s += kd.max(x @ w)
    return s + kd.sum(y * y)


def test_elements_of_results_and_expressions_inside_loops_and_branches() -> None:
    x, w = data(3, 4), data(4)
    gx, gw = kd.grad(elements_in_loops, (0, 1))(x, w, 0)  # the loop and branch do not run
    y, c = np.sin(x * w), np.cos(x * w)
    dy = 2 * y
    dy[:, 1] += x.mean(axis=0)[2]
    dy += w
    dx = dy * c * w
    dx[:, 2] += y[:, 1].sum() / 3
    np.testing.assert_allclose(gx, dx, rtol=1e-12)
    np.testing.assert_allclose(gw, (dy * c * x).sum(axis=0) + y.sum(axis=0), rtol=1e-12)
    kd.check_grad(elements_in_loops, x, w, 3, argnums=(0, 1))


@kd.kernel
def scaled_rows(x: A2, w: A2) -> kd.f64:
    return kd.sum(kd.sin(x * w))


def test_a_size_one_axis_known_only_at_run_time_broadcasts() -> None:
    x = data(4, 3)
    g = kd.grad(scaled_rows, (0, 1))(x, data(4, 3, seed=1))  # same shapes
    assert g[1].shape == (4, 3)
    for w in (data(1, 3), data(4, 1), data(1, 1)):  # the adjoint summed over the broadcast
        d_x, d_w = kd.grad(scaled_rows, (0, 1))(x, w)
        np.testing.assert_allclose(d_x, np.cos(x * w) * w, rtol=1e-12)
        expected = np.sum(np.cos(x * w) * x, axis=tuple(k for k in (0, 1) if w.shape[k] == 1),
                          keepdims=True)
        np.testing.assert_allclose(d_w, expected, rtol=1e-12)
    d_x, d_w = kd.grad(scaled_rows, (0, 1))(data(1, 3), x)  # either operand
    np.testing.assert_allclose(d_x, np.sum(np.cos(x * data(1, 3)) * x, axis=0, keepdims=True),
                               rtol=1e-12)


@kd.kernel
def strided_views(x: A2, v: A1) -> kd.f64:
    a = x[::2, 1:]
    b = x[-1:-4:-1, :-1]
    return (kd.sum(a[:2] * b[1:3] * 3.0) + kd.sum(kd.cos(x.T @ v))
            + kd.sum(x[1:-1:2, 0] * v[1:-1:2]))


def test_slices_with_steps_and_negative_bounds_and_transposes() -> None:
    x, v = data(7, 6), data(7)
    gx, gv = kd.grad(strided_views, (0, 1))(x, v)
    ex = np.zeros_like(x)
    a, b = x[::2, 1:], x[-1:-4:-1, :-1]
    ex[::2, 1:][:2] += 3.0 * b[1:3]
    ex[-1:-4:-1, :-1][1:3] += 3.0 * a[:2]
    s = -np.sin(x.T @ v)
    ex += np.outer(v, s)
    ex[1:-1:2, 0] += v[1:-1:2]
    ev = x @ s
    ev[1:-1:2] += x[1:-1:2, 0]
    np.testing.assert_allclose(gx, ex, rtol=1e-12)
    np.testing.assert_allclose(gv, ev, rtol=1e-12)
    kd.check_grad(strided_views, x, v, argnums=(0, 1))


@kd.kernel
def matrix_vector(a: A2, v: A1, u: A1) -> kd.f64:
    return kd.sum(kd.sin(a @ v)) + kd.sum(kd.exp(u @ a) * 0.1) + (v @ v) * 0.5


def test_matrix_vector_products() -> None:
    a, v, u = data(5, 4), data(4), data(5)
    ga, gv, gu = kd.grad(matrix_vector, (0, 1, 2))(a, v, u)
    c, e = np.cos(a @ v), 0.1 * np.exp(u @ a)
    np.testing.assert_allclose(ga, np.outer(c, v) + np.outer(u, e), rtol=1e-12)
    np.testing.assert_allclose(gv, a.T @ c + v, rtol=1e-12)
    np.testing.assert_allclose(gu, a @ e, rtol=1e-12)
    kd.check_grad(matrix_vector, a, v, u, argnums=(0, 1, 2))


@kd.kernel
def extremes(x: A2) -> kd.f64:
    m = kd.max(x, axis=1)
    n = kd.min(x * 2.0, axis=0, keepdims=True)
    return kd.sum(m * m) + kd.sum(kd.sin(n)) + kd.max(x) * 3.0 + kd.min(kd.cos(x))


def test_max_and_min_route_to_the_extreme_elements() -> None:
    x = data(4, 5)
    g = kd.grad(extremes)(x)
    expected = np.zeros_like(x)
    rows = np.arange(4)
    expected[rows, x.argmax(axis=1)] += 2 * x.max(axis=1)
    cols = np.arange(5)
    expected[x.argmin(axis=0), cols] += 2 * np.cos(2 * x.min(axis=0))
    expected[np.unravel_index(x.argmax(), x.shape)] += 3.0
    k = np.unravel_index(np.cos(x).argmin(), x.shape)
    expected[k] -= np.sin(x[k])
    np.testing.assert_allclose(g, expected, rtol=1e-12)
    kd.check_grad(extremes, x)


@kd.kernel
def row_max(x: A2) -> kd.f64:
    return kd.sum(kd.max(x, axis=1) * 2.0)


def test_tied_maxima_share_the_gradient() -> None:
    x = np.array([[1.0, 3.0, 3.0], [0.5, 0.25, 0.125]])
    g = kd.grad(row_max)(x)
    np.testing.assert_allclose(g, [[0.0, 1.0, 1.0], [2.0, 0.0, 0.0]])


@kd.kernel
def pairwise_extremes(x: A2, y: A2) -> kd.f64:
    return kd.sum(kd.min(x, y) * (y + 2.0) + kd.max(x, y) * x + np.minimum(x, 0.5 * y))


def test_elementwise_min_and_max_of_two_arrays_route_to_the_smaller_and_larger() -> None:
    x, y = data(4, 3), data(4, 3, seed=1)
    gx, gy = kd.grad(pairwise_extremes, (0, 1))(x, y)
    x_smaller, x_larger = x <= y, x >= y
    np.testing.assert_allclose(
        gx, np.where(x_smaller, y + 2.0, 0.0) + np.where(x_larger, 2 * x, y)
        + (x <= 0.5 * y), rtol=1e-12)
    np.testing.assert_allclose(
        gy, np.where(x_smaller, 0.0, y + 2.0) + np.minimum(x, y) + np.where(x_larger, 0.0, x)
        + 0.5 * (x > 0.5 * y), rtol=1e-12)
    kd.check_grad(pairwise_extremes, x, y, argnums=(0, 1))


@kd.kernel
def where_both_sides(x: A2, y: A2) -> kd.f64:
    return kd.sum(kd.where(x > 0.0, x * y, kd.exp(y)) + kd.where(x > 0.0, 0.0, 1.0 / x))


def test_where_routes_to_the_taken_side_without_nan() -> None:
    x, y = data(4, 5), data(4, 5, seed=3)
    x[0, 0] = 0.0  # 1 / x is infinite on the side not taken
    gx, gy = kd.grad(where_both_sides, (0, 1))(x, y)
    positive = x > 0.0
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(gx, np.where(positive, y, -1.0 / np.where(positive, 1.0, x) ** 2))
    np.testing.assert_allclose(gy, np.where(positive, x, np.exp(y)), rtol=1e-12)
    x[0, 0] = 0.5
    kd.check_grad(where_both_sides, x, y, argnums=(0, 1))


@kd.kernel
def assignments(x: A1, s: kd.f64) -> kd.f64:
    c = kd.zeros_like(x)
    c[1:-1] = x[2:] - x[:-2]
    c += s * x
    c[0] = 0.5
    d = kd.zeros_like(x)
    d[:] = c * c
    d[::2] += kd.sin(x[::2])
    return kd.sum(d * x)


def test_slice_and_augmented_assignment_into_temporaries() -> None:
    x, s = data(9), 0.6
    gx, gs = kd.grad(assignments, (0, 1))(x, s)
    c = np.zeros_like(x)
    c[1:-1] = x[2:] - x[:-2]
    c += s * x
    c[0] = 0.5
    d = c * c
    d[::2] += np.sin(x[::2])
    dc = 2 * c * x
    dc[0] = 0.0
    ex = d.copy()
    ex[::2] += np.cos(x[::2]) * x[::2]
    ex += s * dc
    ex[2:] += dc[1:-1]
    ex[:-2] -= dc[1:-1]
    np.testing.assert_allclose(gx, ex, rtol=1e-12)
    assert gs == pytest.approx((dc * x).sum(), rel=1e-12)
    kd.check_grad(assignments, x, s, argnums=(0, 1))

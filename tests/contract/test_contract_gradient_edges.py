"""API.md section 8 at the edges JAX and PyTorch users meet: derivatives at points where
a naive rule gives NaN (a power whose exponent is 0 at a base of 0), views of whole-array
results read in loops, kd.full, kd.check_grad of kd.array arguments, and errors naming the
line of the construct that cannot be differentiated."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def powers_by_position(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] ** i + x[i] ** 0.0  # x ** 0 is 1 everywhere: its derivative is 0
    return s


@kd.kernel
def whole_array_powers(x: kd.Array[kd.f64], p: kd.f64) -> kd.f64:
    return kd.sum(x ** 0.0 + x ** p)


def test_a_zero_exponent_at_a_zero_base_has_a_zero_derivative(rng) -> None:
    # was NaN: 0 * 0 ** -1 (jax.grad and torch give 0 here, and x ** 1 at 0 gives 1)
    x = np.array([0.0, 0.0, 0.0, rng.random() + 1.0])
    expected = np.array([0.0, 1.0, 0.0, 3.0 * x[3] ** 2])
    np.testing.assert_allclose(kd.grad(powers_by_position)(x), expected, rtol=1e-12)
    _, tangent = kd.jvp(powers_by_position, (x,), (np.ones(4),))
    assert np.isclose(tangent, expected.sum(), rtol=1e-12)
    np.testing.assert_array_equal(kd.grad(whole_array_powers)(x, 0.0), np.zeros(4))
    _, tangent = kd.jvp(whole_array_powers, (x, 0.0), (np.ones(4), None))
    assert tangent == 0.0
    y = rng.random(4) + 0.5  # away from 0, the derivative in the exponent still flows
    assert kd.check_grad(whole_array_powers, y, 0.0, argnums=(0, 1)) < 1.0


@kd.kernel
def loop_over_a_transposed_result(a: kd.Array[kd.f64, 2]) -> kd.f64:
    t = kd.exp(a) * 2.0
    u = t.T  # a view of a whole-array result, whose elements a loop reads
    s = 0.0
    for i in range(u.shape[0]):
        s += u[i, 0] * u[i, 1]
    return s


@kd.kernel
def loop_over_a_chain_of_views(a: kd.Array[kd.f64, 2]) -> kd.f64:
    t = kd.sin(a)
    u = t[1:, ::-1].T[None]
    s = kd.sum(t * t)
    for i in kd.prange(u.shape[1]):
        for j in range(u.shape[2]):
            s += u[0, i, j] * (i + j + 1.0)
    return s


def test_elements_of_a_view_of_a_whole_array_result_read_in_a_loop(rng) -> None:
    # was a zero gradient: the view of the result had no adjoint to add into
    a = rng.random((3, 2))
    t = 2.0 * np.exp(a)
    expected = np.zeros_like(a)
    expected[0], expected[1] = t[0] * t[1], t[0] * t[1]
    np.testing.assert_allclose(kd.grad(loop_over_a_transposed_result)(a), expected, rtol=1e-12)
    assert kd.check_grad(loop_over_a_chain_of_views, a) < 1e-4
    d_a = kd.grad(loop_over_a_chain_of_views)(a)
    direction = rng.standard_normal(a.shape)
    value, tangent = kd.jvp(loop_over_a_chain_of_views, (a,), (direction,))
    assert np.isclose(value, loop_over_a_chain_of_views.python(a), rtol=1e-12)
    assert np.isclose(tangent, np.sum(d_a * direction), rtol=1e-10)


@kd.kernel
def scaled_by_a_filled_array(a: kd.Array[kd.f64, 2]) -> kd.f64:
    c = kd.full(a.shape[1], 2.0, kd.f64)
    d = kd.full((a.shape[0], 1), 0.5, kd.f64)
    b = kd.zeros_like(a)
    b[:] = a * c + d
    b[1:] += b[:-1]
    return kd.sum(b * b)


def test_arrays_made_by_kd_full_under_a_gradient(rng) -> None:
    # was an AssertionError: kd.full's value was taken for one more axis
    a = rng.random((3, 4))
    assert np.isclose(scaled_by_a_filled_array(a), scaled_by_a_filled_array.python(a), rtol=1e-12)
    assert kd.check_grad(scaled_by_a_filled_array, a) < 1e-4
    d_a = kd.grad(scaled_by_a_filled_array)(a)
    direction = rng.standard_normal(a.shape)
    _, tangent = kd.jvp(scaled_by_a_filled_array, (a,), (direction,))
    assert np.isclose(tangent, np.sum(d_a * direction), rtol=1e-10)


@kd.kernel
def slice_of_a_transposed_product(x: kd.Array[kd.f64]) -> kd.f64:
    y = x[:, None] * x[None, :]
    z = y.T[1:, :-1]  # a view of a view of a whole-array result
    return kd.sum(z ** 2) + kd.sum(y)


@kd.kernel
def slice_of_a_transposed_result(x: kd.Array[kd.f64, 2]) -> kd.f64:
    y = x * 2.0
    return kd.sum(y.T[1:, :-1] ** 2) + kd.sum(y[::-1].T[0])


def test_a_view_of_a_view_of_a_whole_array_result(rng) -> None:
    # was silently wrong: the adjoint reaching y.T through its slice was dropped
    x = rng.random(4)
    y = np.outer(x, x)
    d_y = np.ones_like(y)
    d_y.T[1:, :-1] += 2.0 * y.T[1:, :-1]
    np.testing.assert_allclose(kd.grad(slice_of_a_transposed_product)(x), (d_y + d_y.T) @ x,
                               rtol=1e-12)
    a = rng.random((3, 3))
    expected = np.zeros_like(a)
    expected.T[1:, :-1] = 8.0 * a.T[1:, :-1]
    expected[:, 0] += 2.0
    np.testing.assert_allclose(kd.grad(slice_of_a_transposed_result)(a), expected, rtol=1e-12)
    d_a = kd.grad(slice_of_a_transposed_result)(a)
    direction = rng.standard_normal(a.shape)
    _, tangent = kd.jvp(slice_of_a_transposed_result, (a,), (direction,))
    assert np.isclose(tangent, np.sum(d_a * direction), rtol=1e-10)


@kd.kernel
def scaled_sines(x: kd.Array[kd.f64, 2], s: kd.f64) -> kd.f64:
    return kd.sum(kd.sin(x) * s)


def test_check_grad_of_arrays_made_by_kd_array(rng) -> None:
    # was a TypeError from float() of the array
    x = rng.random((2, 3))
    d_x, d_s = kd.grad(scaled_sines, (0, 1))(kd.array(x), 2.0)
    np.testing.assert_allclose(d_x.numpy(), 2.0 * np.cos(x), rtol=1e-12)
    assert np.isclose(d_s, np.sin(x).sum(), rtol=1e-12)
    assert kd.check_grad(scaled_sines, kd.array(x), 2.0, argnums=(0, 1)) < 1.0


@kd.kernel
def product_of_elements(x: kd.Array[kd.f64]) -> kd.f64:
    p = 1.0
    for i in kd.prange(x.shape[0]):
        p *= x[i]
    return p


def test_a_product_reduction_is_an_error_at_the_update() -> None:
    # was located at the loop's line rather than at the product's
    line = product_of_elements.py_function.__code__.co_firstlineno + 4
    for derivative in (lambda: kd.grad(product_of_elements)(np.ones(3)),
                       lambda: kd.jvp(product_of_elements, (np.ones(3),), (np.ones(3),))):
        with pytest.raises(kd.CompileError, match="'mul' reduction") as caught:
            derivative()
        assert caught.value.lineno == line
        assert "p *= x[i]" in str(caught.value)


@kd.kernel
def vector_leapfrog(p: kd.Array[kd.vec3d], v: kd.Array[kd.vec3d], dt: kd.f64) -> kd.f64:
    for _ in range(3):  # whole-array updates of arrays of vectors, as Warp users write them
        v -= dt * p
        p += dt * v
    s = 0.0
    for i in kd.prange(p.shape[0]):
        s += kd.dot(p[i], p[i]) + 0.5 * kd.dot(v[i], v[i])
    return s


def test_whole_array_updates_of_arrays_of_vectors(rng) -> None:
    # was a CompileError: the loops they lower to are differentiated, as the docs say
    p, v = rng.random((4, 3)), rng.random((4, 3))
    assert np.isclose(vector_leapfrog(p.copy(), v.copy(), 0.1),
                      vector_leapfrog.python(p.copy(), v.copy(), 0.1), rtol=1e-12)
    assert kd.check_grad(vector_leapfrog, p, v, 0.1, argnums=(0, 1, 2)) < 1.0
    d_p, d_v = kd.grad(vector_leapfrog, (0, 1))(p, v, 0.1)
    tp, tv = rng.standard_normal(p.shape), rng.standard_normal(v.shape)
    _, tangent = kd.jvp(vector_leapfrog, (p, v, 0.1), (tp, tv, None))
    assert np.isclose(tangent, np.sum(d_p * tp) + np.sum(d_v * tv), rtol=1e-10)

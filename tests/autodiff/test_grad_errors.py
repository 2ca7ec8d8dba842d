"""What cannot be differentiated is a located error or a TypeError naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def weighted(x: kd.Array[kd.f64], n: kd.i32, w: kd.f64) -> kd.f64:
    s = 0.0
    for i in range(n):
        s += x[i] * w
    return s


def test_integer_argument_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="argument 'n' is i32"):
        kd.grad(weighted, 1)(np.ones(3), 3, 2.0)


def test_integer_array_is_a_type_error_naming_it() -> None:
    @kd.kernel
    def count(a: kd.Array[kd.i64]) -> kd.f64:
        return float(a[0])

    with pytest.raises(TypeError, match="argument 'a' is an array of i64"):
        kd.grad(count)(np.ones(3, np.int64))


def test_argnums_out_of_range() -> None:
    with pytest.raises(ValueError, match="argnums 5 is out of range"):
        kd.grad(weighted, 5)(np.ones(3), 3, 2.0)


def test_kernel_without_a_scalar_result_is_a_compile_error() -> None:
    @kd.kernel
    def fill(x: kd.Array[kd.f64]):
        for i in range(x.shape[0]):
            x[i] = 1.0

    with pytest.raises(kd.CompileError, match="returns one floating-point scalar") as info:
        kd.grad(fill)(np.ones(3))
    assert "def fill" in str(info.value)


def test_in_place_update_through_a_view_writes_the_viewed_array() -> None:
    @kd.kernel
    def through_view(x: kd.Array[kd.f64, 2]) -> kd.f64:
        row = x[0]
        for i in range(x.shape[1]):
            row[i] = row[i] * 2.0
        return x[0, 0] + x[1, 0]

    np.testing.assert_array_equal(kd.grad(through_view)(np.ones((2, 3))),
                                  [[2.0, 0.0, 0.0], [1.0, 0.0, 0.0]])


def test_used_old_value_of_an_atomic_is_a_located_error() -> None:
    @kd.kernel
    def old_value(x: kd.Array[kd.f64], out: kd.Array[kd.f64]) -> kd.f64:
        s = 0.0
        for i in range(x.shape[0]):
            s += kd.atomic_add(out, 0, x[i])
        return s

    with pytest.raises(kd.CompileError, match="old value") as info:
        kd.grad(old_value)(np.ones(3), np.zeros(1))
    assert "atomic_add" in str(info.value)


def test_product_reduction_is_a_located_error() -> None:
    @kd.kernel
    def product(x: kd.Array[kd.f64]) -> kd.f64:
        p = 1.0
        for i in kd.prange(x.shape[0]):
            p *= x[i]
        return p

    with pytest.raises(kd.CompileError, match="'mul' reduction"):
        kd.grad(product)(np.ones(3))


def test_stop_gradient_blocks_the_flow() -> None:
    @kd.kernel
    def blocked(x: kd.Array[kd.f64]) -> kd.f64:
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i] * kd.stop_gradient(x[i])
        return s

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(kd.grad(blocked)(x), x)
    assert blocked(x) == pytest.approx(14.0)
    assert blocked.python(x) == pytest.approx(14.0)


def test_a_gradient_is_cached_and_reports_its_compile_time() -> None:
    g = kd.grad(weighted, (0, 2))
    gx, gw = g(np.ones(4), 3, 2.0)
    np.testing.assert_allclose(gx, [2.0, 2.0, 2.0, 0.0])
    assert gw == pytest.approx(3.0)
    assert g.compile_seconds is not None and g.compile_seconds >= 0.0
    assert len(g.kernel._specialisations) == 1
    g(np.ones(4), 2, 1.0)
    assert len(g.kernel._specialisations) == 1


@kd.kernel
def sorted_dot(x: kd.Array[kd.f64], w: kd.Array[kd.f64], y: kd.Array[kd.f64]) -> kd.f64:
    for i in range(x.shape[0]):
        y[i] = x[i]
    kd.sort(y)
    s = 0.0
    for i in range(y.shape[0]):
        s += y[i] * w[i]
    return s


@kd.kernel
def argsorted_dot(x: kd.Array[kd.f64], w: kd.Array[kd.f64]) -> kd.f64:
    order = kd.argsort(x)
    s = 0.0
    for i in range(x.shape[0]):
        s += x[order[i]] * w[i]
    return s


def test_sorting_a_differentiated_array_is_an_error_at_the_sort() -> None:
    # kd.sort rebuilds the floats from their sorted bits: a gradient through it would
    # silently be zero.
    rng = np.random.default_rng(3)
    x, w = rng.random(6), rng.random(6)
    with pytest.raises(kd.CompileError, match="kd.sort of a differentiated array") as info:
        kd.grad(sorted_dot)(x, w, np.zeros(6))
    assert "kd.sort(y)" in str(info.value)
    with pytest.raises(kd.CompileError, match="kd.sort of a differentiated array"):
        kd.jvp(sorted_dot, (x, w, np.zeros(6)), (np.ones(6), None, None))
    # with respect to the weights the sort is a constant permutation
    np.testing.assert_allclose(kd.grad(sorted_dot, 1)(x, w, np.zeros(6)), np.sort(x))


def test_argsort_of_a_differentiated_array_is_differentiable() -> None:
    rng = np.random.default_rng(4)
    x, w = rng.random(6), rng.random(6)
    expected = np.zeros(6)
    expected[np.argsort(x, kind="stable")] = w
    np.testing.assert_allclose(kd.grad(argsorted_dot)(x, w), expected)
    kd.check_grad(argsorted_dot, x, w, argnums=(0, 1))

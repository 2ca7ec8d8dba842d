"""Arrays a kernel returns under kd.Tape carry gradients to later calls: against float64
central differences of the same Python program (tensor expressions, arrays made in the
kernel, vector elements, in-place updates of a returned array, a returned loss,
checkpoints, tuples of arrays); arrays aliasing an argument are refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from finite_differences import central_differences

import kdsl as kd

RNG = np.random.default_rng(41)


def value_of(loss: Any) -> float:
    return float(np.asarray(loss).reshape(-1)[0]) if hasattr(loss, "shape") else float(loss)


def check_tape(program: Callable[[Any], Any], x0: np.ndarray,
               checkpoint_every: int | None = None) -> None:
    x = kd.array(x0, requires_grad=True)
    with kd.Tape(checkpoint_every) as tape:
        loss = program(x)
    tape.backward(loss)
    expected = central_differences(lambda y: value_of(program(y.copy())), x0)
    assert np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


@kd.kernel
def layer(w: kd.Array[kd.f64, 2], x: kd.Array[kd.f64, 2]):
    return kd.tanh(x @ w)


@kd.kernel
def mean_square(h: kd.Array[kd.f64, 2]) -> kd.f64:
    return kd.sum(h * h) / (h.shape[0] * h.shape[1])


@kd.kernel
def smoothed(x: kd.Array[kd.f64]):
    """A loop writing a new array it returns."""
    out = kd.zeros(x.shape[0], kd.f64)
    n = x.shape[0]
    for i in kd.prange(n):
        out[i] = 0.5 * x[i] + 0.25 * kd.sin(x[(i + 1) % n]) * x[(i + n - 1) % n]
    return out


@kd.kernel
def relax(a: kd.Array[kd.f64], rate: kd.f64):
    for i in kd.prange(a.shape[0]):
        a[i] = a[i] - rate * a[i] * a[i]


@kd.kernel
def dot_with(a: kd.Array[kd.f64], b: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(a.shape[0]):
        s += a[i] * b[i]
    return s


@kd.kernel
def as_points(x: kd.Array[kd.f64]):
    out = kd.empty(x.shape[0] // 2, kd.vec2d)
    for i in kd.prange(out.shape[0]):
        out[i] = kd.vec2d(x[2 * i] * x[2 * i + 1], kd.cos(x[2 * i]))
    return out


@kd.kernel
def spread(p: kd.Array[kd.vec2d]) -> kd.f64:
    s = 0.0
    for i in kd.prange(p.shape[0]):
        s += kd.dot(p[i], p[i]) * (1.0 + p[i].x)
    return s


@kd.kernel
def squared_norm_into_one(a: kd.Array[kd.f64]):
    return kd.sum(a * a, axis=0, keepdims=True)


def test_a_tensor_expression_s_result_feeds_a_later_call() -> None:
    x = RNG.standard_normal((6, 3))
    check_tape(lambda w: mean_square(layer(w, x)), RNG.standard_normal((3, 2)))


def test_two_layers_through_returned_arrays() -> None:
    x = RNG.standard_normal((5, 3))
    w2 = RNG.standard_normal((4, 2))

    def program(w1: Any) -> Any:
        return mean_square(layer(w2, layer(w1, x)))

    check_tape(program, RNG.standard_normal((3, 4)))


@pytest.mark.parametrize("checkpoint_every", [None, 2])
def test_a_returned_array_updated_in_place_then_read(checkpoint_every: int | None) -> None:
    def program(x: Any) -> Any:
        h = smoothed(x)
        relax(h, 0.3)
        g = smoothed(h)
        relax(h, 0.2)
        return dot_with(h, g)

    check_tape(program, RNG.random(7), checkpoint_every)


def test_a_returned_array_reused_by_several_calls_and_returned_again() -> None:
    def program(x: Any) -> Any:
        h = smoothed(x)
        return dot_with(smoothed(h), h)

    check_tape(program, RNG.random(6))


def test_returned_vector_elements() -> None:
    check_tape(lambda x: spread(as_points(x)), RNG.random(8))


def test_a_returned_one_element_array_is_the_loss() -> None:
    def program(x: Any) -> Any:
        return squared_norm_into_one(smoothed(x))

    check_tape(program, RNG.random(5))


@kd.kernel
def itself(a: kd.Array[kd.f64]):
    for i in kd.prange(a.shape[0]):
        a[i] = a[i] * 2.0
    return a


@kd.kernel
def pair(a: kd.Array[kd.f64]):
    return a * 2.0, kd.sin(a) * a


@kd.kernel
def with_itself(a: kd.Array[kd.f64]):
    return a * 2.0, a


@kd.kernel
def loop_pair(x: kd.Array[kd.f64]):
    """Two arrays made by a loop and an int array, returned as a tuple."""
    n = x.shape[0]
    out = kd.zeros(n, kd.f64)
    other = kd.empty(n, kd.f64)
    signs = kd.zeros(n, kd.i32)
    for i in kd.prange(n):
        out[i] = x[i] * x[(i + 1) % n]
        other[i] = kd.cos(x[i]) + 0.5 * x[(i + n - 1) % n]
        signs[i] = 1 if x[i] > 0.5 else -1
    return out, signs, other


@kd.kernel
def points_and_weights(x: kd.Array[kd.f64]):
    """A tuple of a vector array and a scalar array."""
    points = kd.empty(x.shape[0] // 2, kd.vec2d)
    for i in kd.prange(points.shape[0]):
        points[i] = kd.vec2d(x[2 * i] * x[2 * i + 1], kd.cos(x[2 * i]))
    return points, x * x


def test_arrays_returned_in_a_tuple_carry_gradients() -> None:
    def program(x: Any) -> Any:
        first, second = pair(x)
        return dot_with(first, second)

    check_tape(program, RNG.random(5))


@pytest.mark.parametrize("checkpoint_every", [None, 2])
def test_a_tuple_of_loop_arrays_one_of_ints_updated_and_read_again(
        checkpoint_every: int | None) -> None:
    def program(x: Any) -> Any:
        out, signs, other = loop_pair(x)
        assert signs.dtype == np.int32
        relax(out, 0.3)
        h = smoothed(other)
        return dot_with(out, h)

    check_tape(program, RNG.random(6), checkpoint_every)


def test_only_some_arrays_of_a_tuple_reach_the_loss() -> None:
    def program(x: Any) -> Any:
        _, second = pair(x)
        points, _ = points_and_weights(second)
        return spread(points)

    check_tape(program, RNG.random(6))


def test_returned_arguments_are_refused_when_used() -> None:
    x = kd.array(RNG.random(4), requires_grad=True)
    with kd.Tape():
        same = itself(x)
        with pytest.raises(ValueError, match="argument 'a' of dot_with is an array itself "
                                             "returned under the tape"):
            dot_with(same, x)
        doubled, _ = with_itself(x)  # one of the tuple is the argument: none is followed
        with pytest.raises(ValueError, match="argument 'b' of dot_with is an array with_itself"):
            dot_with(x, doubled)

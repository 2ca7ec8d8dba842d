"""kd.jvp with vector and matrix arguments (a ``kd.vec3d`` centre, a ``kd.mat33`` transform):
their tangents are arrays shaped like them, as JAX takes tangents shaped like the primals;
checked against the gradient along the tangent and against central differences."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd

RNG = np.random.default_rng(23)


@kd.kernel
def transformed_spread(pos: kd.Array[kd.vec3d], centre: kd.vec3d, m: kd.mat33d,
                       k: kd.f64) -> kd.f64:
    s = 0.0
    for i in kd.prange(pos.shape[0]):
        d = m @ (pos[i] - centre)
        s += k * kd.dot(d, d) + kd.sin(d.x * centre.y)
    return s


@kd.kernel
def single_precision(pos: kd.Array[kd.vec3], axis: kd.vec3) -> kd.f32:
    s = 0.0
    for i in kd.prange(pos.shape[0]):
        s += kd.length(kd.cross(pos[i], axis))
    return s


def arguments() -> tuple:
    return (RNG.standard_normal((6, 3)), RNG.standard_normal(3), RNG.standard_normal((3, 3)), 0.7)


def central_difference(args: tuple, tangents: tuple, eps: float = 1e-6) -> float:
    """d/dh of the kernel at args + h * tangents, in float64."""
    def at(h: float) -> float:
        return transformed_spread.python(*[a if t is None else a + h * t
                                           for a, t in zip(args, tangents)])
    return (at(eps) - at(-eps)) / (2 * eps)


@pytest.mark.parametrize("which", [(1,), (2,), (0, 1, 2, 3)], ids=["vector", "matrix", "all"])
def test_tangents_of_vector_and_matrix_arguments(which: tuple[int, ...]) -> None:
    args = arguments()
    tangents = tuple(None if k not in which else
                     float(RNG.normal()) if k == 3 else RNG.standard_normal(np.shape(a))
                     for k, a in enumerate(args))
    value, tangent = kd.jvp(transformed_spread, args, tangents)
    assert np.isclose(value, transformed_spread.python(*args), rtol=1e-12)
    gradients = kd.grad(transformed_spread, which)(*args)
    along = sum(np.sum(g * tangents[k]) for k, g in zip(which, gradients))
    assert abs(along) > 1e-3
    assert np.isclose(tangent, along, rtol=1e-10)
    assert np.isclose(tangent, central_difference(args, tangents), rtol=1e-6)


def test_a_vector_tangent_in_single_precision_is_left_as_given() -> None:
    pos = RNG.standard_normal((9, 3)).astype(np.float32)
    axis = np.array([0.3, -0.5, 0.8], np.float32)
    direction = [1.0, 2.0, -0.5]  # any sequence of its shape, converted to f32
    _, tangent = kd.jvp(single_precision, (pos, axis), (None, direction))
    assert isinstance(tangent, np.float32)
    assert direction == [1.0, 2.0, -0.5]
    expected = kd.grad(single_precision, 1)(pos, axis) @ np.array(direction, np.float32)
    assert np.isclose(tangent, expected, rtol=1e-4)


def test_a_vector_tangent_of_the_wrong_shape_is_a_value_error() -> None:
    args = arguments()
    with pytest.raises(ValueError, match=r"tangent of 'centre' must have the shape of the "
                                         r"argument, \(3,\); got \(4,\)"):
        kd.jvp(transformed_spread, args, (None, np.ones(4), None, None))
    with pytest.raises(ValueError, match=r"tangent of 'm' must have the shape of the argument, "
                                         r"\(3, 3\); got \(9,\)"):
        kd.jvp(transformed_spread, args, (None, None, np.ones(9), None))

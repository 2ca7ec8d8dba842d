"""How kd.Tape records calls: keyword arguments, one kernel called with arguments of
several kinds in turn (each call recorded with its own specialisation), NumPy and kdsl
arrays mixed; gradients against float64 central differences of the same program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from finite_differences import central_differences

import kdsl as kd

RNG = np.random.default_rng(23)


def check_tape(program: Callable[[Any], Any], x0: np.ndarray) -> None:
    x = kd.array(x0, requires_grad=True)
    with kd.Tape() as tape:
        loss = program(x)
    tape.backward(loss)
    expected = central_differences(lambda y: float(program(y.copy())), x0)
    assert np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


@kd.kernel
def damp(x, v, rate: kd.f64 = 0.5):
    """Any number of axes (one specialisation per kind of array)."""
    for i in kd.prange(x.shape[0]):
        v[i] = v[i] * rate + kd.sin(x[i])
        x[i] += 0.1 * v[i]


@kd.kernel
def moved(p: kd.Array[kd.vec2d], v: kd.Array[kd.vec2d], dt: kd.f64):
    for i in kd.prange(p.shape[0]):
        v[i] -= dt * p[i] * kd.dot(p[i], p[i])
        p[i] += dt * v[i]


@kd.kernel
def total_square(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] * x[i]
    return s


@kd.kernel
def total_square_2d(x: kd.Array[kd.f64, 2]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        for j in range(x.shape[1]):
            s += x[i, j] * x[i, j]
    return s


@kd.kernel
def total_square_points(p: kd.Array[kd.vec2d]) -> kd.f64:
    s = 0.0
    for i in kd.prange(p.shape[0]):
        s += kd.dot(p[i], p[i])
    return s


def test_keyword_arguments_and_defaults_are_recorded() -> None:
    def program(x: Any) -> Any:
        v = np.zeros(x.shape[0])
        for step in range(4):
            if step % 2:
                damp(v=v, x=x, rate=0.3)
            else:
                damp(x, v)
        return total_square(x=x)

    check_tape(program, RNG.random(5))


def test_one_kernel_called_with_arrays_of_several_kinds_in_turn() -> None:
    """1-D and 2-D arrays, NumPy and kdsl arrays, Python and NumPy floats: each call
    runs (and is differentiated as) the specialisation its arguments ask for."""
    side = np.cos(np.arange(6.0)).reshape(3, 2)

    def program(x: Any) -> Any:
        flat = np.zeros(x.shape[0])
        rows = kd.array(np.ones((3, 2)))
        other = kd.array(side.copy())
        for _ in range(3):
            damp(x, flat, 0.5)
            damp(other, rows, np.float64(0.25))  # another kind, in between
            damp(x, flat, rate=0.75)
        total_square_2d(other)
        return total_square(x)

    check_tape(program, RNG.random(6))


def test_vector_arrays_updated_in_place_over_many_calls() -> None:
    def program(p: Any) -> Any:
        v = np.zeros(p.shape)
        for _ in range(12):
            moved(p, v, 0.05)
        return total_square_points(p)

    check_tape(program, RNG.standard_normal((4, 2)))


@kd.kernel(debug=True)
def shift_by(x: kd.Array[kd.f64], out: kd.Array[kd.f64], by: kd.i64):
    for i in range(out.shape[0]):
        out[i] = x[i + by] * x[i]


def test_a_failing_call_leaves_the_record_as_it_was() -> None:
    """A call that raises (an index out of bounds; a read-only array it writes), after
    calls of the same kind went through the compiled path, is not recorded: the gradient
    of the calls around it is exact."""

    def program(x: Any, fail: bool = False) -> Any:
        out = np.zeros(x.shape[0] - 1)
        for _ in range(3):
            shift_by(x, out, 1)
        if fail:
            with np.testing.assert_raises_regex(IndexError, "out of bounds"):
                shift_by(x, out, 2)
            frozen = np.zeros(x.shape[0] - 1)
            frozen.flags.writeable = False
            with np.testing.assert_raises_regex(ValueError, "argument 'out'"):
                shift_by(x, frozen, 1)
        shift_by(x, out, 1)
        return total_square(out)

    x0 = RNG.random(5)
    x = kd.array(x0, requires_grad=True)
    with kd.Tape() as tape:
        loss = program(x, fail=True)
    tape.backward(loss)
    expected = central_differences(lambda y: float(program(y.copy())), x0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)

"""The vector-Jacobian products kd.Tape runs drop the copies of updated arrays that
nothing reads (kdsl/ir/autodiff/vjp_copies.py): gradients through kernels whose arrays
are written, read again and overwritten in every pattern, against float64 central
differences of the same Python program; the mass-spring step of the gallery reverses in
two parallel loops and allocates nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from finite_differences import central_differences

import kdsl as kd
from kdsl.runtime.vjp_kernel import vjp_kernel

RNG = np.random.default_rng(29)


def check_tape(program: Callable[[Any], Any], x0: np.ndarray,
               checkpoint_every: int | None = None) -> None:
    x = kd.array(x0, requires_grad=True)
    with kd.Tape(checkpoint_every) as tape:
        loss = program(x)
    final = x.numpy().copy()
    tape.backward(loss)
    np.testing.assert_array_equal(x.numpy(), final)
    expected = central_differences(lambda y: float(program(y.copy())), x0)
    assert np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


@kd.kernel
def total_square(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] * x[i]
    return s


@kd.kernel
def forces_then_update(x: kd.Array[kd.f64], v: kd.Array[kd.f64], f: kd.Array[kd.f64],
                       dt: kd.f64):
    """``f`` written whole before it is read; ``v`` stored then loaded again."""
    n = x.shape[0]
    for i in kd.prange(n):
        f[i] = kd.sin(x[(i + 1) % n]) - x[i] * v[i]
    for i in kd.prange(n):
        v[i] += dt * f[i]
        x[i] += dt * v[i]


@kd.kernel
def read_after_store_elsewhere(x: kd.Array[kd.f64], t: kd.Array[kd.i32], a: kd.Array[kd.f64]):
    """A load of ``a`` after its store, at an index that may be the stored one; then
    ``a`` overwritten (what the call found in it is not what the load reads)."""
    for i in kd.prange(x.shape[0]):
        a[i] = x[i] * x[i]
        x[i] = kd.sin(a[t[i]]) + 0.5 * x[i]
    for i in kd.prange(x.shape[0]):
        a[i] = 7.0


@kd.kernel
def stored_twice(x: kd.Array[kd.f64], a: kd.Array[kd.f64]):
    """``a`` stored, read, stored again; ``x`` read in the next loop after ``a``'s store."""
    n = x.shape[0]
    for i in kd.prange(n):
        a[i] = kd.exp(0.3 * x[i])
        y = a[i] * x[i]
        a[i] = y + a[i]
    for i in kd.prange(n):
        x[i] = a[i] * a[(i + 1) % n]


@kd.kernel
def serial_recurrence(x: kd.Array[kd.f64]):
    """A top-level serial loop updating ``x`` in place, then a parallel loop."""
    for i in range(1, x.shape[0]):
        x[i] = 0.5 * x[i - 1] + kd.cos(x[i])
    for i in kd.prange(x.shape[0]):
        x[i] = x[i] * x[i]


@kd.kernel
def inner_serial_loop(x: kd.Array[kd.f64], w: kd.Array[kd.f64, 2], y: kd.Array[kd.f64]):
    """A serial loop with a carried value inside a parallel loop, ``x`` read after ``y``
    is written and ``y`` updated in place in the next loop."""
    for i in kd.prange(y.shape[0]):
        s = 0.0
        for j in range(x.shape[0]):
            s = s * 0.5 + w[i, j] * kd.tanh(x[j])
        y[i] = s
    for i in kd.prange(y.shape[0]):
        y[i] = y[i] * x[i % x.shape[0]]


def test_forces_written_whole_then_an_in_place_update() -> None:
    def program(x: Any) -> Any:
        v = np.zeros(x.shape[0])
        f = np.zeros(x.shape[0])
        for _ in range(6):
            forces_then_update(x, v, f, 0.1)
        return total_square(x)

    for every in (None, 4):
        check_tape(program, RNG.random(9), checkpoint_every=every)


def test_a_load_after_a_store_at_an_index_that_may_be_the_stored_one() -> None:
    # iteration i reads a[index[i]], its own element (race-free) through another index
    index = np.arange(6, dtype=np.int32)

    def program(x: Any) -> Any:
        a = np.zeros(6)
        for _ in range(3):
            read_after_store_elsewhere(x, index, a)
        return total_square(x)

    check_tape(program, RNG.random(6))


def test_an_array_stored_twice_and_read_between() -> None:
    def program(x: Any) -> Any:
        a = np.zeros(x.shape[0])
        stored_twice(x, a)
        stored_twice(x, a)
        return total_square(x)

    check_tape(program, RNG.random(7) * 0.5)


@pytest.mark.parametrize("checkpoint_every", [None, 2])
def test_a_serial_recurrence_and_a_parallel_loop(checkpoint_every: int | None) -> None:
    def program(x: Any) -> Any:
        serial_recurrence(x)
        serial_recurrence(x)
        return total_square(x)

    check_tape(program, RNG.random(8), checkpoint_every)


def test_a_serial_loop_with_a_carried_value_inside_a_parallel_loop() -> None:
    w = RNG.random((5, 4))

    def program(x: Any) -> Any:
        y = np.ones(5)
        inner_serial_loop(x, w, y)
        inner_serial_loop(x, w, y)
        return total_square(y)

    check_tape(program, RNG.random(4))


# --- the gallery's mass-spring step ---------------------------------------------------


@kd.kernel
def spring_step(x: kd.Array[kd.vec2d], v: kd.Array[kd.vec2d], f: kd.Array[kd.vec2d],
                neighbours: kd.Array[kd.i32, 2], rest: kd.Array[kd.f64, 2], dt: kd.f64):
    n = x.shape[0]
    for i in kd.prange(n):
        force = kd.vec2d(0.0, -9.81)
        for k in kd.static(range(4)):
            j = neighbours[i, k]
            if j >= 0:
                d = x[j] - x[i]
                length = kd.sqrt(kd.dot(d, d) + 1e-12)
                direction = d / length
                closing = 2.0 * kd.dot(v[j] - v[i], direction)
                force += (300.0 * (length - rest[i, k]) + closing) * direction
        f[i] = force
    for i in kd.prange(n):
        v[i] += dt * f[i]
        x[i] += dt * v[i]


@kd.kernel
def height(x: kd.Array[kd.vec2d]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i].y * x[i].y + 0.1 * x[i].x
    return s


def spring_chain(count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.stack([np.arange(count) * 0.3, np.zeros(count)], axis=1) + RNG.random((count, 2)) * 0.05
    neighbours = np.full((count, 4), -1, dtype=np.int32)
    for i in range(count):
        for k, j in enumerate((i - 1, i + 1, i - 2, i + 2)):
            if 0 <= j < count:
                neighbours[i, k] = j
    rest = np.where(neighbours >= 0, 0.3 * np.array([1, 1, 2, 2]), 0.0)
    return x, neighbours, rest


def spring_program(v0: Any, x0: np.ndarray, neighbours: np.ndarray, rest: np.ndarray) -> Any:
    x = x0.copy()
    v = np.zeros_like(x)
    f = np.zeros_like(x)
    v[...] = np.asarray(v0.numpy() if hasattr(v0, "numpy") else v0)
    for _ in range(5):
        spring_step(x, v, f, neighbours, rest, 0.01)
    return height(x)


def test_mass_spring_steps_against_central_differences() -> None:
    x0, neighbours, rest = spring_chain(6)
    v0 = kd.array(RNG.random((6, 2)), requires_grad=True)
    with kd.Tape() as tape:
        x = kd.array(x0)
        v = kd.zeros_like(x)
        f = kd.zeros_like(x)
        _set(v, v0)
        for _ in range(5):
            spring_step(x, v, f, neighbours, rest, 0.01)
        loss = height(x)
    tape.backward(loss)
    expected = central_differences(
        lambda y: float(spring_program(y, x0, neighbours, rest)), v0.numpy().copy())
    assert np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(v0.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


@kd.kernel
def _copy_into(out: kd.Array[kd.vec2d], source: kd.Array[kd.vec2d]):
    for i in kd.prange(out.shape[0]):
        out[i] = source[i]


def _set(out: Any, source: Any) -> None:
    _copy_into(out, source)


def test_the_step_reverses_in_two_parallel_loops_without_copies() -> None:
    x0, neighbours, rest = spring_chain(6)
    args = (x0.copy(), RNG.random((6, 2)), np.zeros((6, 2)), neighbours, rest, 0.01,
            RNG.random((6, 2)), RNG.random((6, 2)), np.zeros((6, 2)), 0.0)
    text = vjp_kernel(spring_step, (0, 1, 2)).ir(*args)
    top_level_loops = [line for line in text.splitlines() if line.startswith("  parallel_for")
                       or line.startswith("  %") and " parallel_for " in line]
    assert len(top_level_loops) == 2, text
    assert "array_new" not in text, text
    assert "many_updates = True" in text


def test_tapes_reuse_the_memory_of_released_tapes_copies() -> None:
    """A reset (or collected) tape gives its copies' memory to the next tapes; a tape
    still alive keeps its own: its backward gives the same gradient after others ran."""
    from kdsl.runtime import tape_memory

    def program(x: Any) -> Any:
        v = np.zeros(x.shape[0])
        f = np.zeros(x.shape[0])
        for _ in range(4):
            forces_then_update(x, v, f, 0.1)
        return total_square(x)

    x0 = RNG.random(2048)  # copies of 16 kB
    first = kd.array(x0, requires_grad=True)
    with kd.Tape() as kept:
        kept_loss = program(first)
    kept.backward(kept_loss)
    expected = first.grad.numpy().copy()
    for _ in range(3):
        x = kd.array(x0 * 0.5, requires_grad=True)
        with kd.Tape() as tape:
            loss = program(x)
        tape.backward(loss)
        tape.reset()
        assert tape_memory.COPIES.bytes > 0
        x = kd.array(x0 * 0.5, requires_grad=True)
        with kd.Tape() as tape:  # its copies in the memory the reset gave back
            loss = program(x)
        tape.backward(loss)
        del tape, loss
    kept.zero()
    kept.backward(kept_loss)
    # the same sums, but a parallel reduction's partials follow the threads' schedule, which
    # may differ between two runs on a busy machine: equal up to rounding, not bit for bit
    np.testing.assert_allclose(first.grad.numpy(), expected, rtol=1e-12,
                               atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(
        x.grad.numpy()[:6], central_differences(
            lambda y: float(program(np.concatenate([y, x0[6:] * 0.5]))), x0[:6] * 0.5),
        rtol=1e-6, atol=1e-8)


# --- arrays overwritten before they are read: no copy -----------------------------------


@kd.kernel
def spread_sine(x: kd.Array[kd.f64], f: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        f[i] = kd.sin(x[i])


@kd.kernel
def forces_over_all_but_the_last(x: kd.Array[kd.f64], f: kd.Array[kd.f64]):
    """``f`` written over one element fewer than the next loop reads: its last element is
    the one the call found."""
    n = x.shape[0]
    for i in kd.prange(n - 1):
        f[i] = x[i] * x[i + 1]
    for i in kd.prange(n):
        x[i] += 0.1 * f[i] * x[i]


@kd.kernel
def scale_by(y: kd.Array[kd.f64], f: kd.Array[kd.f64]):
    for i in kd.prange(y.shape[0]):
        y[i] = y[i] * kd.cos(f[i])


def test_an_array_written_over_fewer_elements_than_read_is_copied() -> None:
    def program(x: Any) -> Any:
        f = np.zeros(x.shape[0])
        spread_sine(x, f)
        forces_over_all_but_the_last(x, f)
        forces_over_all_but_the_last(x, f)
        return total_square(x)

    check_tape(program, RNG.random(6))


def test_an_overwritten_array_read_by_a_call_between_is_copied() -> None:
    def program(x: Any) -> Any:
        f = np.zeros(x.shape[0])
        v = np.zeros(x.shape[0])
        y = np.ones(x.shape[0])
        forces_then_update(x, v, f, 0.1)
        scale_by(y, f)  # reads f as the first call left it
        forces_then_update(x, v, f, 0.1)
        return total_square(y)

    check_tape(program, RNG.random(7))


def test_arrays_overwritten_before_they_are_read_are_not_copied() -> None:
    x = kd.array(RNG.random(50), requires_grad=True)
    v = np.zeros(50)
    f = np.zeros(50)
    with kd.Tape() as tape:
        for _ in range(10):
            forces_then_update(x, v, f, 0.1)
        total_square(x)
    # x and v before each step, one scratch array for f, and the loss's gradient
    assert tape.memory_bytes == 10 * 2 * 50 * 8 + 50 * 8 + 50 * 8

"""Adjoint loops that add into many elements run in blocks on the CPU, each iteration
computing the next one's values next to its own adjoints (kdsl/ir/autodiff/vjp_pipeline.py):
gradients through kd.Tape against float64 central differences of the same Python program
(along random directions), for sizes around the block size, on one and two threads."""

from __future__ import annotations

import numpy as np
import pytest
from finite_differences import central_differences

import kdsl as kd
from kdsl.ir.autodiff.vjp_pipeline import BLOCK
from kdsl.runtime.vjp_kernel import vjp_kernel


@kd.kernel
def springs(x: kd.Array[kd.vec2d], v: kd.Array[kd.vec2d], f: kd.Array[kd.vec2d],
            neighbours: kd.Array[kd.i32, 2], rest: kd.Array[kd.f64, 2], dt: kd.f64):
    """Damped springs to up to four neighbours (-1: none), then the update."""
    for i in kd.prange(x.shape[0]):
        force = kd.vec2d(0.0, -1.0)
        for k in kd.static(range(4)):
            j = neighbours[i, k]
            if j >= 0:
                d = x[j] - x[i]
                length = kd.sqrt(kd.dot(d, d) + 1e-12)
                direction = d / length
                closing = 0.5 * kd.dot(v[j] - v[i], direction)
                force += (30.0 * (length - rest[i, k]) + closing) * direction
        if x[i].y < 0.0:
            force -= 3.0 * v[i]
        f[i] = force
    for i in kd.prange(x.shape[0]):
        v[i] += dt * f[i]
        x[i] += dt * v[i]


@kd.kernel
def energy(x: kd.Array[kd.vec2d], target: kd.Array[kd.vec2d]) -> kd.f64:
    total = 0.0
    for i in kd.prange(x.shape[0]):
        d = x[i] - target[i]
        total += kd.dot(d, d)
    return total


def _chain(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    x = np.stack([np.arange(n) * 0.1, rng.uniform(-0.05, 0.05, n)], axis=1)
    neighbours = np.full((n, 4), -1, dtype=np.int32)
    for k, offset in enumerate((1, -1, 2, -2)):
        j = np.arange(n) + offset
        inside = (j >= 0) & (j < n)
        neighbours[inside, k] = j[inside]
    rest = np.where(neighbours >= 0, 0.1 * np.abs(np.array([1, 1, 2, 2])), 0.0) * 1.05
    target = x + rng.normal(0.0, 0.1, x.shape)
    return x, neighbours, rest, target


def _loss(x0: np.ndarray, v0: np.ndarray, neighbours: np.ndarray, rest: np.ndarray,
          target: np.ndarray, steps: int) -> float:
    x, v, f = x0.copy(), v0.copy(), np.zeros_like(x0)
    for _ in range(steps):
        springs.python(x, v, f, neighbours, rest, 0.01)
    return float(energy.python(x, target))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 3, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 5])
def test_springs_through_a_tape(n: int, threads: int) -> None:
    kd.set_num_threads(threads)
    x0, neighbours, rest, target = _chain(n)
    v0 = np.random.default_rng(n + 1).normal(0.0, 0.3, x0.shape)
    steps = 3
    x = kd.array(x0)
    v = kd.array(v0, requires_grad=True)
    f = kd.zeros_like(x)
    nb, rs, tg = kd.array(neighbours), kd.array(rest), kd.array(target)
    with kd.Tape() as tape:
        for _ in range(steps):
            springs(x, v, f, nb, rs, 0.01)
        loss = energy(x, tg)
    tape.backward(loss)
    # along two random directions: a few Python runs, not two per element
    directions = np.random.default_rng(n + 2).normal(0.0, 1.0, (2, *v0.shape))
    for u in directions:
        along = central_differences(
            lambda t, u=u: _loss(x0, v0 + t[0] * u, neighbours, rest, target, steps),
            np.zeros(1))
        np.testing.assert_allclose(np.sum(v.grad.numpy() * u), along[0], rtol=1e-6, atol=1e-8)
        assert abs(along[0]) > 1e-4


@pytest.mark.parametrize("threads", [1, 2])
def test_one_array_for_two_arguments(threads: int) -> None:
    """One array for both ``x`` and ``v``: the tape passes one adjoint array for both, so
    the first thread adds into copies of it, as the others do, not into it twice as if
    they were two arrays apart."""
    kd.set_num_threads(threads)
    x0, neighbours, rest, target = _chain(BLOCK + 3)
    nb, rs, tg = kd.array(neighbours), kd.array(rest), kd.array(target)
    y = kd.array(x0, requires_grad=True)
    f = kd.zeros_like(y)
    with kd.Tape() as tape:
        springs(y, y, f, nb, rs, 0.01)
        loss = energy(y, tg)
    tape.backward(loss)

    def loss_of(p: np.ndarray) -> float:
        state, forces = p.copy(), np.zeros_like(p)
        springs.python(state, state, forces, neighbours, rest, 0.01)
        return float(energy.python(state, target))

    u = np.random.default_rng(5).normal(0.0, 1.0, x0.shape)
    along = central_differences(lambda t: loss_of(x0 + t[0] * u), np.zeros(1))
    np.testing.assert_allclose(np.sum(y.grad.numpy() * u), along[0], rtol=1e-6, atol=1e-8)
    assert abs(along[0]) > 1e-3


def test_blocks_on_the_cpu_only() -> None:
    """The product of the springs for the CPU runs its adjoint loop in blocks (a serial
    loop in the parallel one); the CUDA tape tests run the same products unblocked."""
    x0, neighbours, rest, _ = _chain(10)
    args = (x0, x0.copy(), x0.copy(), neighbours, rest, 0.01, np.zeros_like(x0),
            np.zeros_like(x0), 0.0)
    text = vjp_kernel(springs, (0, 1)).ir(*args)
    assert " = for " in text

"""A reversed branch of straight-line code reads the values the forward sweep computed in
it (extra results of the forward copy of the branch) instead of computing them again;
branches with loops inside still compute theirs again. Gradients against central
finite differences of the kernels' own Python functions, in float64."""

from __future__ import annotations

import numpy as np
from finite_differences import central_differences

import kdsl as kd


@kd.kernel
def spring_energy(x: kd.Array[kd.vec2d], neighbours: kd.Array[kd.i32, 2],
                  rest: kd.Array[kd.f64, 2], k: kd.f64) -> kd.f64:
    """Springs to up to three neighbours (-1: none, pinned to the origin instead)."""
    total = 0.0
    for i in kd.prange(x.shape[0]):
        e = 0.0
        for m in kd.static(range(3)):
            j = neighbours[i, m]
            if j >= 0:
                d = x[j] - x[i]
                length = kd.sqrt(kd.dot(d, d) + 1e-12)
                direction = d / length
                stretch = length - rest[i, m]
                e += k * stretch * stretch + kd.dot(direction, x[i])
            else:
                e += 0.5 * kd.exp(-kd.dot(x[i], x[i]))
        total += e
    return total


def _springs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.random((n, 2))
    neighbours = rng.integers(-1, n, (n, 3)).astype(np.int32)
    neighbours[neighbours == np.arange(n)[:, None]] = -1
    rest = rng.uniform(0.2, 0.6, (n, 3))
    return x, neighbours, rest


def test_spring_gradient_matches_finite_differences() -> None:
    x, neighbours, rest = _springs(12)
    assert (neighbours < 0).any() and (neighbours >= 0).any()  # both sides taken
    gx, gk = kd.grad(spring_energy, (0, 3))(x, neighbours, rest, 7.0)
    expected_x = central_differences(
        lambda p: spring_energy.python(p, neighbours, rest, 7.0), x)
    expected_k = central_differences(
        lambda k: spring_energy.python(x, neighbours, rest, float(k[0])), np.array([7.0]))
    np.testing.assert_allclose(gx, expected_x, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gk, expected_k[0], rtol=1e-6)
    assert np.abs(expected_x).max() > 1.0


def test_reversed_branches_do_not_compute_again() -> None:
    """Three unrolled springs: three square roots and three exponentials in the forward
    sweep's branches, none in the reversed ones."""
    x, neighbours, rest = _springs(4)
    text = kd.grad(spring_energy, (0, 3)).ir(x, neighbours, rest, 7.0, stage="autodiff")
    assert text.count(" = sqrt ") == 3
    assert text.count(" = exp ") == 3
    # optimised: per spring, the forward division and one reciprocal for its adjoint (the
    # reversed side copies the splat of the length, so the components it reads are seen
    # to be the same value)
    optimised = kd.grad(spring_energy, (0, 3)).ir(x, neighbours, rest, 7.0)
    assert optimised.count(" = div ") == 6


@kd.kernel
def branch_with_loop(x: kd.Array[kd.f64], n: kd.i32) -> kd.f64:
    total = 0.0
    for i in kd.prange(x.shape[0]):
        if x[i] > 0.5:
            p = 1.0
            for _ in range(n):
                p = p * kd.sin(x[i]) + x[i]
            total += p
        else:
            total += kd.sqrt(x[i] + 1.0)
    return total


def test_branch_with_a_loop_computes_again() -> None:
    x = np.random.default_rng(4).random(9)
    assert (x > 0.5).any() and (x <= 0.5).any()
    g = kd.grad(branch_with_loop)(x, 3)
    expected = central_differences(lambda p: branch_with_loop.python(p, 3), x)
    np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)

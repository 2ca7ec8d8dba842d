"""Random numbers as Numba and Taichi users draw them (docs/language.md, "Random
numbers"): after the same ``kd.seed`` a kernel and its plain-Python run draw the same
numbers, on any number of threads, also for ``kd.randint`` over spans past the i64 range."""

from __future__ import annotations

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def draw_integers(out: kd.Array[kd.i64], low: kd.i64, high: kd.i64):
    for i in kd.prange(out.shape[0]):
        out[i] = kd.randint(low, high)


@pytest.mark.parametrize("low, high", [
    (-2**62, 2**62),  # a span of 2**63: once wrapped to a negative span, always `low`
    (-2**63, 2**63 - 1),
    (-1, 2**63 - 1),
    (0, 2**33),
    (-7, 5),
    (3, -3),  # empty: low
])
def test_randint_over_any_span_of_int64(low, high):
    out = np.zeros(400, np.int64)
    expected = np.zeros(400, np.int64)
    kd.seed(11)
    draw_integers.python(expected, low, high)
    kd.seed(11)
    draw_integers(out, low, high)
    np.testing.assert_array_equal(out, expected)
    if cuda_testing.enabled():
        kd.seed(11)
        cuda_testing.check_on_device(draw_integers, (np.zeros(400, np.int64), low, high),
                                     None, (expected,), 0.0, 0.0)
    if high > low:
        assert low <= out.min() and out.max() < high
        assert len(np.unique(out)) > min(high - low, 400) // 2
    else:
        assert np.all(out == low)


@kd.kernel
def monte_carlo_pi(samples: kd.i64):
    inside = 0
    for _ in kd.prange(samples):
        x = kd.random()
        y = kd.random()
        if x * x + y * y < 1.0:
            inside += 1
    return 4.0 * inside / samples


def test_monte_carlo_pi_is_reproducible_and_close():
    kd.seed(3)
    estimate = monte_carlo_pi(20000)
    kd.seed(3)
    assert monte_carlo_pi.python(20000) == estimate
    assert abs(estimate - np.pi) < 0.05

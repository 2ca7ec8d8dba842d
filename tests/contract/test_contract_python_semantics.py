"""Python's own semantics in kernels (API.md sections 2 and 3): ``and``/``or`` give one of
their operands and evaluate the second only when needed, ``math`` functions compute in
double precision, conditional expressions and chained comparisons, serial and parallel."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def operands_decide(a: kd.Array[kd.i64], x: kd.Array[kd.f64], flags: kd.Array[kd.u8],
                    out: kd.Array[kd.f64, 2]):
    for i in kd.prange(a.shape[0]):
        j = i + 1
        # the second operand is read only when the first does not decide (j may be past
        # the end, which debug mode would report)
        ahead = j < a.shape[0] and a[j] > a[i]
        out[i, 0] = a[i] or x[i]  # the first operand where it is true, else the second
        out[i, 1] = a[i] and x[i]
        out[i, 2] = 1.0 if flags[i] or ahead else 0.0
        out[i, 3] = (x[i] and a[i] or -1) * 2
        out[i, 4] = 1.0 if not flags[i] and 0 < a[i] <= 2 else -1.0
        out[i, 5] = math.pow(a[i], 2) + math.pow(x[i] + 3.0, -1.5)  # floats, as Python's math


def test_and_or_give_one_of_their_operands(rng):
    n = 40
    a = rng.integers(-1, 3, n)
    x = rng.choice([0.0, 1.5, -2.25], n)
    flags = rng.integers(0, 2, n).astype(np.uint8)
    out = np.zeros((n, 6))
    check(operands_decide, a, x, flags, out, rtol=1e-14)  # pow: within 4 ulp
    for i in range(n):
        assert out[i, 0] == (a[i] or x[i]) and out[i, 1] == (a[i] and x[i])
    debug = kd.kernel(operands_decide.py_function, debug=True)
    debug(a, x, flags, out)  # no out-of-bounds read of a[n]


@kd.kernel
def rounded(x: kd.Array[kd.f32], n: kd.Array[kd.i32], out: kd.Array[kd.f32, 2]):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = round(x[i])  # halves to even, as Python: round(2.5) == 2
        out[i, 1] = np.round(x[i] * 3.0) + np.rint(x[i])
        out[i, 2] = round(n[i]) + np.round(n[i])
    return round(x[0]), np.round(x), np.round(kd.vec2(x[0], x[1]))


def test_round_halves_to_even_as_python_and_numpy(rng):
    x = (rng.integers(-20, 20, 64) / 2).astype(np.float32)  # many halves
    x[-8:] = rng.normal(size=8) * 10
    n = rng.integers(-9, 9, 64).astype(np.int32)
    out = np.zeros((64, 3), np.float32)
    first, whole, vector = check(rounded, x, n, out)
    assert type(first) is int or isinstance(first, np.integer)
    np.testing.assert_array_equal(out[:, 0], np.array([round(float(v)) for v in x]))
    np.testing.assert_array_equal(whole, np.round(x))
    assert whole.dtype == np.float32 and vector.dtype == np.float32


@kd.kernel
def countdowns(a: kd.Array[kd.f64], start: kd.i64, stop: kd.i64, step: kd.i64,
               out: kd.Array[kd.f64]):
    count = 0
    for i in reversed(range(a.shape[0])):
        out[0] = out[0] * 0.5 + a[i]
    for i in reversed(range(start, stop)):
        out[1] = out[1] * 0.5 + a[i]
    for i in reversed(range(start, stop, step)):
        out[2] = out[2] * 0.5 + a[i] + i
        count += 1
    for i in kd.prange(2):
        for j in reversed(range(i, a.shape[0], 3)):
            out[3 + i] += a[j] * (j + 1)
    return count


@pytest.mark.parametrize("start, stop, step", [
    (0, 20, 1), (2, 17, 3), (17, 2, -3), (5, 5, 2), (19, 0, -1), (3, 20, 7), (10, 1, -4),
    (0, 20, -1),
])
def test_reversed_ranges_visit_the_range_backwards(rng, start, stop, step):
    a = rng.random(20)
    out = np.zeros(5)
    count = check(countdowns, a, start, stop, step, out)
    assert count == len(range(start, stop, step))

"""``for ... else`` and ``while ... else`` in serial loops, as in Python and Numba: the
``else`` clause runs when the loop ends without its own ``break`` (a break of an inner
loop does not count), including inside a parallel loop's iterations."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source

import kdsl as kd


@kd.kernel
def primality(n: kd.Array[kd.i64], out: kd.Array[kd.i64]):
    for i in kd.prange(n.shape[0]):
        for d in range(2, n[i]):
            if d * d > n[i]:
                out[i] = 1
                break
            if n[i] % d == 0:
                out[i] = 0
                break
        else:
            out[i] = 2  # no divisor tried at all: below 3


@kd.kernel
def first_index_or_minus_one(a: kd.Array[kd.f64], targets: kd.Array[kd.f64],
                             out: kd.Array[kd.i64]):
    for t in kd.prange(targets.shape[0]):
        j = 0
        while j < a.shape[0]:
            hits = 0
            for k in range(3):  # an inner loop's break leaves only that loop
                if k == 1:
                    break
                hits += 1
            if a[j] >= targets[t]:
                break
            j += hits
        else:
            j = -1
        out[t] = j


def test_the_else_clause_runs_only_without_a_break(rng):
    n = np.arange(0, 60, dtype=np.int64)
    out = np.full(60, 7, dtype=np.int64)
    check(primality, n, out)
    assert list(out[:5]) == [2, 2, 2, 1, 0] and out[7] == 1 and out[9] == 0
    a = np.sort(rng.random(40))
    targets = np.concatenate([rng.random(20), [1.5, -1.0]])
    found = np.zeros(22, dtype=np.int64)
    check(first_index_or_minus_one, a, targets, found)
    assert found[-2] == -1 and found[-1] == 0
    assert np.array_equal(found[:20], np.searchsorted(a, targets[:20]))


SEARCH = """
@kd.func
def position(a, v):
    for i in range(a.shape[0]):
        if a[i] == v:
            return i
    else:
        return -1

@kd.kernel
def k(a, values, out):
    for i in kd.prange(values.shape[0]):
        for d in (1, 2):  # an unrolled loop with an else
            out[i] += d
        else:
            out[i] *= 10
        out[i] += position(a, values[i]) * 1000
"""


def test_an_else_after_returns_and_unrolled_loops(rng):
    kernel = kernel_from_source(SEARCH)
    a = rng.integers(0, 10, size=12)
    check(kernel, a, np.arange(12), np.zeros(12, dtype=np.int64))


def test_an_else_on_a_parallel_loop_is_a_located_error():
    kernel = kernel_from_source(
        "@kd.kernel\ndef k(a):\n    for i in kd.prange(a.shape[0]):\n        a[i] = 1.0\n"
        "    else:\n        a[0] = 2.0\n")
    with pytest.raises(kd.CompileError, match="'for ... else' over a parallel loop") as info:
        kernel(np.zeros(3))
    assert "for i in kd.prange(a.shape[0]):" in str(info.value)

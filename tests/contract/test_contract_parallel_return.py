"""``return value`` inside a parallel loop (API.md section 2: early return works in
parallel loops): the kernel returns what the first iteration in the loop's order that
returns gives, exactly as the same loop run by Python (``kernel.python``), on any number
of threads and on the CUDA device; iterations after it may or may not have run."""

from __future__ import annotations

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest
from kdsl_cpu_util import check, with_threads

import kdsl as kd
from kdsl.codegen import nvvm


@kd.kernel
def first_above(a, limit):
    for i in kd.prange(a.shape[0]):
        if a[i] > limit:
            return i
    return -1


@kd.kernel
def first_cell(g, limit, visited):
    """Several results of different types, from a serial loop in an ndrange body."""
    count = 0
    for i, j in kd.ndrange(g.shape[0], g.shape[1]):
        visited[i, j] = 1
        for k in range(g.shape[2]):
            if g[i, j, k] > limit:
                return i, j, g[i, j, k], kd.vec3(g[i, j, 0], g[i, j, 1], 2.0), k > 1, k
        count += 1
    return -1, count, 0.0, kd.vec3(0.0), False, -7


@kd.kernel
def odd_step_search(a: kd.Array[kd.f64], target: kd.f64) -> kd.f64:
    for i in kd.prange(a.shape[0] - 1, 0, -3):
        if a[i] < target:
            if a[i] < -1.5:
                break
            continue
        if a[i] > 0.0:
            return a[i] * 2.0
    return -1.0


@kd.kernel
def until_negative(a, limit, after):
    for i in kd.prange(a.shape[0]):
        if a[i] < 0.0:
            break
        if a[i] > limit:
            return i
    after[0] = 1  # runs when the loop ends without returning
    return -1


def _grid(rng, shape, hits):
    g = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    for i, j, k in hits:
        g[i, j, k] = 5.0
    return g


def test_first_returning_iteration_wins_on_any_thread_count(rng):
    a = rng.uniform(0.0, 1.0, 300_000)
    a[[123_456, 250_000, 7_000]] = 3.0
    for threads in (1, 2, 4):
        assert with_threads(threads, first_above, a, 2.0) == 7_000
        assert with_threads(threads, first_above, a, 4.0) == -1
    with cuda_testing.cpu_only():
        check(first_above, a[:50], 0.9)  # short: runs on the calling thread
    a[200_000] = -1.0  # a break before the return at 250_000: no return
    for threads in (1, 2, 4):
        after = np.zeros(1, np.int64)
        assert with_threads(threads, until_negative, a, 2.5, after) == 7_000
        assert with_threads(threads, until_negative, a[130_000:], 2.5, after) == -1
        assert after[0] == 1
    g = _grid(rng, (60, 70, 4), [(50, 3, 0), (41, 69, 3), (41, 69, 2), (59, 0, 1)])
    for threads in (1, 3):
        visited = np.zeros(g.shape[:2], np.int64)
        i, j, value, v, late, k = with_threads(threads, first_cell, g, 2.0, visited)
        assert (i, j) == (41, 69) and value == 5.0 and late and k == 2
        assert v.tolist() == [g[41, 69, 0], g[41, 69, 1], 2.0]
        assert visited[:41].all() and visited[41, :70].all()  # every earlier cell ran
    visited = np.zeros(g.shape[:2], np.int64)
    result = first_cell(np.zeros_like(g), 2.0, visited)
    assert result[:2] == (-1, 60 * 70) and result[-1] == -7 and visited.all()


@pytest.mark.parametrize("target", [0.5, 0.99, 2.0])
def test_return_break_and_continue_with_a_negative_step(target, rng):
    a = rng.normal(size=400)
    a[7] = -2.0  # break: stops the loop without a value
    check(odd_step_search, a, target)


def test_differential_on_small_loops(rng):
    g = _grid(rng, (3, 4, 3), [(2, 1, 2)])
    with cuda_testing.cpu_only():  # which cells a GPU visits after the first is unspecified
        check(first_cell, g, 2.0, np.zeros((3, 4), np.int64))
        check(first_cell, g, 9.0, np.zeros((3, 4), np.int64))


@pytest.mark.skipif(not cuda_testing.enabled(), reason="CUDA tests are off")
def test_on_the_cuda_device(rng):
    a = rng.uniform(0.0, 1.0, 5000)
    a[[4000, 1500, 4999]] = 3.0
    g = _grid(rng, (20, 30, 3), [(19, 2, 1), (7, 29, 0), (7, 29, 2)])
    with cuda_testing.on_device():
        args = cuda_testing.device_arguments(first_above, (a, 2.0))
        assert first_above(*args) == 1500
        args = cuda_testing.device_arguments(first_cell, (g, 2.0, np.zeros((20, 30), np.int64)))
        i, j, value, _, late, k = first_cell(*args)
        assert (i, j) == (7, 29) and value == 5.0 and not late and k == 0
        a[3000] = -1.0  # a break at 3000 comes before the return at 4000
        for start, expected in ((0, 1500), (2000, -1)):
            args = cuda_testing.device_arguments(until_negative, (a[start:], 2.5, np.zeros(1)))
            assert until_negative(*args) == expected
            assert cuda_testing.to_host(args[2])[0] == (expected == -1)


def test_ptx_assembles(rng):
    try:
        nvvm.nvvm_version()
    except nvvm.NvvmUnavailable:
        pytest.skip("libNVVM not installed")
    ptx = first_cell.ptx(np.zeros((2, 2, 2), np.float32), 1.0, np.zeros((2, 2), np.int64))
    if nvvm.ptxas() is not None:
        nvvm.check_with_ptxas(ptx)

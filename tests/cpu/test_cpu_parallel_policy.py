"""How parallel loops share out their iterations: chunks claimed from per-thread blocks,
reductions combined in chunk order, and loops too small to pay for threads run on the
calling thread. None of it changes results: every size and thread count agrees with the
kernel's own Python function."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats, with_threads

import kdsl as kd
from kdsl.codegen.parallel_cost import ASSUMED_INNER_TRIPS, body_cost
from kdsl.ir.core import Block
from kdsl.runtime import threads
from kdsl.runtime.compiler import lower_and_optimize


@kd.kernel
def sum_min_max(x):
    s = 0
    lo = x[0]
    hi = x[0]
    for i in kd.prange(x.shape[0]):
        s += x[i]
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    return s, lo, hi


@kd.kernel
def shifted_square(x, out):
    for i in kd.prange(x.shape[0]):
        out[i] = (x[i] - 0.25) * (x[i] + 0.5)


@kd.kernel
def histogram(idx, bins):
    for i in kd.prange(idx.shape[0]):
        bins[idx[i]] += 1


@kd.kernel
def row_sums(a, out):
    total = 0.0
    for i, j in kd.ndrange(a.shape[0], a.shape[1]):
        out[i] += a[i, j]
        total += a[i, j]
    return total


@kd.kernel
def float_total(x):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] * 1.5
    return s


SIZES = [1, 2, 63, 64, 65, 127, 1000, 4097, 70_001]


@pytest.fixture(params=["every loop uses threads", "default threshold"])
def min_work(request):
    """0 (the suite's setting: every loop starts a team) or kdsl's default."""
    value = 0 if request.param == "every loop uses threads" else threads.DEFAULT_MIN_WORK
    previous = threads.set_min_parallel_work(value)
    yield value
    threads.set_min_parallel_work(previous)


@pytest.mark.parametrize("n_threads", [1, 2, 3, 8])
@pytest.mark.parametrize("n", SIZES)
def test_reductions_agree_with_python_for_any_size_and_thread_count(n, n_threads, min_work, rng):
    x = rng.integers(-1000, 1000, n)
    with_threads(n_threads, check, sum_min_max, x)


@pytest.mark.parametrize("n_threads", [2, 5])
@pytest.mark.parametrize("n", SIZES)
def test_every_element_written_once(n, n_threads, min_work, rng):
    x = nonzero_floats(rng, n)
    with_threads(n_threads, check, shifted_square, x, np.zeros_like(x))


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("n", [10, 5000, 200_000])
def test_scatter_counts_every_iteration(n, n_threads, min_work, rng):
    idx = rng.integers(0, 7, n)
    bins = np.zeros(7, np.int64)
    with_threads(n_threads, histogram, idx, bins)
    np.testing.assert_array_equal(bins, np.bincount(idx, minlength=7))


@pytest.mark.parametrize("shape", [(1, 5000), (3, 40), (37, 1), (300, 300)])
def test_ndrange_with_a_short_first_axis(shape, min_work, rng):
    a = rng.integers(-50, 50, shape).astype(np.float64)
    with_threads(3, check, row_sums, a, np.zeros(shape[0]))


def test_float_reduction_does_not_depend_on_which_thread_ran_which_chunk(rng):
    """Partials are kept per chunk and combined in chunk order: repeated runs give the
    same bits, whichever thread took over which chunk."""
    x = rng.standard_normal(300_001)
    first = with_threads(2, float_total, x)
    for _ in range(20):
        assert with_threads(2, float_total, x) == first
    assert first == pytest.approx(float_total.python(x), rel=1e-12)


def _parallel_body(kernel, *args):
    module, _ = lower_and_optimize(kernel.py_function, kernel.parameters(args), kernel.options,
                                   None)
    loops = [op for op in module.kernel.walk() if op.name == "parallel_for"]
    assert len(loops) == 1
    return loops[0].regions[0]


def test_cost_estimate_counts_inner_loops_as_long(rng):
    x = nonzero_floats(rng, 10)
    cheap = body_cost(_parallel_body(shifted_square, x, np.zeros_like(x)))
    assert 1 <= cheap < 20

    @kd.kernel
    def with_inner_loop(x, out):
        for i in kd.prange(x.shape[0]):
            acc = 0.0
            for j in range(x.shape[0]):
                acc += (x[i] - 0.25) * (x[j] + 0.5)
            out[i] = acc

    nested = body_cost(_parallel_body(with_inner_loop, x, np.zeros_like(x)))
    assert nested >= ASSUMED_INNER_TRIPS * 3


def test_cost_of_an_empty_body_is_one():
    assert body_cost(Block()) == 1


@pytest.mark.parametrize("bad", [-1, 1.5, "10", None, True])
def test_invalid_min_parallel_work_is_rejected(bad):
    before = threads.SETTINGS.min_work
    with pytest.raises(ValueError, match="non-negative integer"):
        threads.set_min_parallel_work(bad)
    assert threads.SETTINGS.min_work == before


@pytest.mark.parametrize("n_threads", [1, 2])
def test_empty_loops(n_threads, min_work):
    empty = np.zeros(0)
    assert with_threads(n_threads, float_total, empty) == 0.0
    with_threads(n_threads, check, shifted_square, empty, np.zeros(0))
    with_threads(n_threads, check, row_sums, np.zeros((0, 3)), np.zeros(0))
    with_threads(n_threads, check, row_sums, np.zeros((3, 0)), np.zeros(3))

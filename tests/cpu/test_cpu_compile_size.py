"""How much machine code a kernel becomes: a tensor statement's broadcasting loop version
stays one loop (LLVM would otherwise copy it once per operand axis that may be 1).
Checked on the optimised LLVM IR, with differential tests of the broadcasting results
against NumPy and ``kernel.python``."""

import numpy as np
import pytest
from kdsl_cpu_util import with_threads

import kdsl as kd
from kdsl.runtime.threads import set_min_parallel_work


@kd.kernel
def five_operands(a: kd.Array[kd.f32, 2], b: kd.Array[kd.f32, 2], c: kd.Array[kd.f32, 2],
                  d: kd.Array[kd.f32, 2], e: kd.Array[kd.f32, 2], out: kd.Array[kd.f32, 2]):
    out[:, :] = 0.25 * (a + b - c + d) * e


def _vector_loops(llvm_ir: str) -> int:
    return sum(line.startswith("vector.body") for line in llvm_ir.splitlines())


def test_a_broadcasting_statement_is_not_copied_per_operand_axis():
    arrays = [np.ones((8, 8), np.float32) for _ in range(6)]
    optimized = five_operands.llvm_ir(*arrays, optimized=True)
    # the plain version and the broadcasting one, each vectorised at most a few times
    assert _vector_loops(optimized) <= 8


@pytest.mark.parametrize("shapes", [
    [(5, 7)] * 5,
    [(1, 7), (5, 1), (5, 7), (1, 1), (5, 7)],
    [(5, 7), (5, 7), (1, 7), (5, 7), (5, 1)],
])
def test_five_operands_broadcast_as_numpy_does(shapes, rng):
    a, b, c, d, e = (rng.uniform(0.5, 2.0, s).astype(np.float32) for s in shapes)
    out = np.zeros((5, 7), np.float32)
    five_operands(a, b, c, d, e, out)
    want = (np.float32(0.25) * (a + b - c + d) * e).astype(np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    reference = np.zeros_like(out)
    five_operands.python(a, b, c, d, e, reference)
    np.testing.assert_allclose(out, reference, rtol=1e-6)


def test_a_size_one_target_axis_takes_size_one_operands(rng):
    a, b, c, d, e = (rng.uniform(0.5, 2.0, (1, 3)).astype(np.float32) for _ in range(5))
    out = np.zeros((1, 3), np.float32)
    five_operands(a, b, c, d, e, out)
    np.testing.assert_allclose(out, np.float32(0.25) * (a + b - c + d) * e, rtol=1e-6)


def test_an_operand_that_does_not_broadcast_is_a_shape_error(rng):
    arrays = [rng.uniform(0.5, 2.0, (5, 7)).astype(np.float32) for _ in range(5)]
    arrays[2] = np.ones((2, 7), np.float32)
    with pytest.raises(ValueError, match="shapes"):
        five_operands(*arrays, np.zeros((5, 7), np.float32))


@kd.kernel
def scaled_copy(a: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        out[i] = 2.0 * a[i]


def test_the_team_helpers_are_not_optimised_per_kernel(rng):
    """run_team and team_driver run once per team: LLVM compiles them as written."""
    a = rng.uniform(-1.0, 1.0, 100_000).astype(np.float32)
    out = np.zeros_like(a)
    text = scaled_copy.llvm_ir(a, out)
    helpers = [line for line in text.splitlines()
               if line.startswith("define") and ("kdsl.run_team" in line or "kdsl.team_driver" in line)]
    assert len(helpers) == 2
    assert all("optnone" in line for line in helpers)
    previous_work = set_min_parallel_work(0)  # a team runs even a short loop
    try:
        with_threads(2, scaled_copy, a, out)
    finally:
        set_min_parallel_work(previous_work)
    np.testing.assert_array_equal(out, 2.0 * a)
    reference = np.zeros_like(a)
    scaled_copy.python(a, reference)
    np.testing.assert_array_equal(out, reference)


@kd.kernel
def sum_of_rows(a: kd.Array[kd.f32, 2], out: kd.Array[kd.f32, 2]) -> kd.f32:
    out[:, :] = 0.5 * a + 1.0
    return kd.sum(a * a)


@kd.kernel
def histogram(keys: kd.Array[kd.i32], counts: kd.Array[kd.i32]):
    for i in kd.prange(keys.shape[0]):
        counts[keys[i]] += 1


def test_loop_hints_spare_llvm_copies_that_gain_nothing(rng):
    """An elementwise loop's scalar remainder is not unrolled, nor the loop combining a
    reduction's chunk partials vectorised; a loop of atomic updates keeps its unrolling."""
    a = rng.uniform(-1.0, 1.0, (37, 29)).astype(np.float32)
    out = np.zeros_like(a)
    text = sum_of_rows.llvm_ir(a, out)
    assert '!"llvm.loop.unroll.runtime.disable"' in text
    assert '!"llvm.loop.vectorize.enable", i1 0' in text
    loop_ids = [line for line in text.splitlines()
                if line.startswith("!") and line.split(" = ")[0] + "," in line]
    # a distinct id per loop, which refers to itself once
    assert len(loop_ids) >= 3
    assert all(line.count(line.split(" = ")[0] + ",") == 1 for line in loop_ids)
    total = sum_of_rows(a, out)
    np.testing.assert_allclose(out, 0.5 * a + 1.0, rtol=1e-6)
    np.testing.assert_allclose(total, np.sum(a.astype(np.float64) ** 2), rtol=1e-5)
    reference = np.zeros_like(a)
    np.testing.assert_allclose(total, sum_of_rows.python(a, reference), rtol=1e-5)

    keys = rng.integers(0, 7, 1000).astype(np.int32)
    counts = np.zeros(7, np.int32)
    assert "llvm.loop.unroll.runtime.disable" not in histogram.llvm_ir(keys, counts)
    histogram(keys, counts)
    np.testing.assert_array_equal(counts, np.bincount(keys, minlength=7))


@kd.kernel
def checked_sum(a: kd.Array[kd.f32, 2], b: kd.Array[kd.f32, 2], c: kd.Array[kd.f32, 2],
                out: kd.Array[kd.f32, 2]):
    out[:, :] = a + b
    out[:, :] += c


def test_error_sites_share_one_reporting_function(rng):
    """Each run-time check calls one function of the module when it fails, instead of
    a copy of the error path per check; the first error is still the one raised."""
    a, b, c = (rng.uniform(-1.0, 1.0, (4, 5)).astype(np.float32) for _ in range(3))
    out = np.zeros_like(a)
    text = checked_sum.llvm_ir(a, b, c, out)
    assert text.count('define internal void @"kdsl.report"') == 1
    assert text.count("cmpxchg") == 1
    checked_sum(a, b, c, out)
    np.testing.assert_allclose(out, a + b + c, rtol=1e-6)
    with pytest.raises(ValueError, match="shapes"):
        checked_sum(a, np.ones((3, 5), np.float32), c, out)
    with pytest.raises(ValueError, match="shapes"):
        checked_sum(a, b, np.ones((4, 2), np.float32), out)

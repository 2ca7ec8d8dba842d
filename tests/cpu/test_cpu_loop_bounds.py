"""Loop bounds as Python has them: ``range`` and ``kd.prange`` run ``len(range(start,
stop, step))`` iterations for any bounds, extreme ones included (no overflow of the trip
count or of the induction variable), and a step that is zero at run time raises
Python's ValueError naming the line."""

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kdsl_cpu_util import check, fuzz_settings, kernel_from_source

import kdsl as kd

BIG = 2**63 - 1
SMALL = -(2**63)


@kd.kernel
def serial_range(a: kd.i64, b: kd.i64, s: kd.i64, out):
    count = 0
    for i in range(a, b, s):
        if count < out.shape[0]:
            out[count] = i
        count += 1
    return count


@kd.kernel
def parallel_range(a: kd.i64, b: kd.i64, s: kd.i64, seen):
    for i in kd.prange(a, b, s):
        kd.atomic_add(seen, 0, 1)
        kd.atomic_min(seen, 1, i)
        kd.atomic_max(seen, 2, i)


def _seen(a: int, b: int, s: int) -> np.ndarray:
    """What parallel_range(a, b, s, seen) leaves: the count, the least and largest i."""
    seen = np.array([0, BIG, SMALL], np.int64)
    parallel_range(a, b, s, seen)
    return seen


_EXTREME = [
    (SMALL, BIG, 2**62), (SMALL, BIG, BIG), (BIG, SMALL, -(2**62)), (BIG, SMALL, SMALL),
    (SMALL, BIG, 2**61 + 7), (BIG - 10, BIG, 3), (SMALL + 10, SMALL, -3), (0, BIG, 2**62),
    (SMALL, 0, 2**62), (BIG, SMALL, -BIG), (5, 5, SMALL), (-5, 5, BIG),
]


@pytest.mark.parametrize("a,b,s", _EXTREME)
def test_serial_range_at_extreme_bounds(a, b, s):
    out = np.zeros(8, np.int64)
    expected = list(range(a, b, s))
    assert check(serial_range, a, b, s, out) == len(expected)
    np.testing.assert_array_equal(out[:len(expected)], expected)


@pytest.mark.parametrize("a,b,s", _EXTREME)
def test_parallel_range_at_extreme_bounds(a, b, s):
    expected = list(range(a, b, s))
    seen = np.array([0, BIG, SMALL], np.int64)
    check(parallel_range, a, b, s, seen)
    assert seen[0] == len(expected)
    if expected:
        assert (seen[1], seen[2]) == (min(expected), max(expected))


@pytest.mark.parametrize("step", [2**62, 3, 2**61 + 1])
def test_constant_step_does_not_carry_the_variable_past_the_largest_int(step):
    k = kernel_from_source(f"""
        @kd.kernel
        def k(a: kd.i64, out):
            count = 0
            for i in range(a, {BIG}, {step}):
                out[count % out.shape[0]] = i
                count += 1
            return count
    """)
    for start in (BIG - 3 * step, BIG - step - 1, BIG - 1):
        out = np.zeros(4, np.int64)
        assert check(k, start, out) == len(range(start, BIG, step))


@given(st.integers(SMALL, BIG), st.integers(SMALL, BIG),
       st.integers(SMALL, BIG).filter(lambda s: s != 0),
       st.sampled_from([1, 2, 3, 2**40, 2**62, BIG]))
@fuzz_settings(60)
def test_trip_count_matches_python(a, b, s, scale):
    s = s // scale or 1
    out = np.zeros(4, np.int64)
    n = _length(a, b, s)
    if n > 5_000:  # a shorter loop from the same start, where its end is an i64
        b = a + 5_000 * s
        if not SMALL <= b <= BIG:
            return
        n = _length(a, b, s)
    assert serial_range(a, b, s, out) == n
    assert _seen(a, b, s)[0] == n


def _length(a: int, b: int, s: int) -> int:
    """len(range(a, b, s)), also where it exceeds a C ssize_t."""
    return max(0, (b - a + s - (1 if s > 0 else -1)) // s)


# --- a zero step -------------------------------------------------------------------


@pytest.mark.parametrize("kernel", [serial_range, parallel_range])
def test_zero_step_at_run_time_raises_value_error_with_the_line(kernel):
    args = (0, 10, 0, np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="arg 3 must not be zero") as python_error:
        kernel.python(*args)
    with pytest.raises(ValueError, match="range\\(\\) arg 3 must not be zero") as error:
        kernel(*args)
    assert "line" in str(error.value) and "range(a, b, s)" in str(error.value)
    del python_error


@kd.kernel
def zero_step_on_device(x, s: kd.i64):
    for i in kd.prange(0, x.shape[0], s):
        x[i] = 1.0


def test_zero_step_raises_on_cuda():
    if not cuda_testing.enabled():
        pytest.skip("CUDA tests are off")
    with cuda_testing.on_device():
        x = kd.zeros(8, kd.f32, device="cuda")
        with pytest.raises(ValueError, match="arg 3 must not be zero"):
            zero_step_on_device(x, 0)
        zero_step_on_device(x, 3)
        np.testing.assert_array_equal(x.numpy(), [1, 0, 0, 1, 0, 0, 1, 0])


def test_zero_step_literal_is_a_compile_error():
    k = kernel_from_source("""
        @kd.kernel
        def k(n: kd.i64):
            for i in range(0, n, 0):
                pass
    """)
    with pytest.raises(kd.CompileError, match="step must not be zero"):
        k(3)

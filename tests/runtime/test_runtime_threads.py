"""The thread count (API section 5): ``kd.set_num_threads(n)`` or ``KDSL_NUM_THREADS``;
an invalid value is a ``ValueError``; results do not depend on the count."""

from __future__ import annotations

import os

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def count_and_sum(x: kd.Array[kd.i64], hist: kd.Array[kd.i64]):
    s = 0
    for i in kd.prange(x.shape[0]):
        s += x[i]
        hist[x[i] % hist.shape[0]] += 1
    return s


X = np.arange(1, 10001, dtype=np.int64) * 3


def expected_hist() -> np.ndarray:
    return np.bincount(X % 5, minlength=5)


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_results_do_not_depend_on_the_thread_count(threads):
    kd.set_num_threads(threads)
    assert kd.get_num_threads() == threads
    hist = np.zeros(5, np.int64)
    assert count_and_sum(X, hist) == int(X.sum())
    np.testing.assert_array_equal(hist, expected_hist())


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None, True, 2.0])
def test_invalid_thread_counts_are_rejected(bad):
    before = kd.get_num_threads()
    with pytest.raises(ValueError) as info:
        kd.set_num_threads(bad)
    assert "positive integer" in str(info.value)
    assert kd.get_num_threads() == before


def test_environment_variable_sets_the_count(run_python):
    code = (
        "import numpy as np, kdsl as kd; print(kd.get_num_threads()); "
        "kd.set_num_threads(1); print(kd.get_num_threads())"
    )
    result = run_python(code, env={"KDSL_NUM_THREADS": "3"})
    assert result.stdout.split() == ["3", "1"]


def test_default_is_the_available_cores(run_python):
    result = run_python("import kdsl as kd; print(kd.get_num_threads())")
    assert int(result.stdout) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5"])
def test_invalid_environment_variable_is_a_value_error(run_python, bad):
    code = (
        "try:\n"
        "    import kdsl as kd\n"
        "    kd.set_num_threads(kd.get_num_threads())\n"
        "    print('accepted', kd.get_num_threads())\n"
        "except ValueError as e:\n"
        "    print('ValueError:', e)\n"
    )
    result = run_python(code, env={"KDSL_NUM_THREADS": bad})
    assert result.stdout.startswith("ValueError:"), result.stdout
    assert "KDSL_NUM_THREADS" in result.stdout


def test_numpy_integer_thread_count_is_accepted():
    kd.set_num_threads(np.int64(2))
    assert kd.get_num_threads() == 2

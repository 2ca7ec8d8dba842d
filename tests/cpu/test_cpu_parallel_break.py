"""``break`` and value-less ``return`` in parallel loops: the thread that runs the
iteration skips the iterations it has not started yet, so which iterations ran is checked
as a set (every recorded hit is a real one, at least one is found when one exists); on one
thread, or in a loop short enough to run on the calling thread, the result is Python's."""

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest
from kdsl_cpu_util import check, with_threads

import kdsl as kd
from kdsl.codegen import nvvm


@kd.kernel
def first_above(a, limit, hits, seen):
    for i in kd.prange(a.shape[0]):
        if a[i] > limit:
            hits[i] = 1
            break
        seen[i] = 1


@kd.kernel
def mark_unless_found(a, target, out):
    out[0] = -1.0
    for i in kd.prange(a.shape[0]):
        if a[i] == target:
            out[1] = i
            return
    out[0] = 1.0  # not found: runs only when no iteration returned


@kd.kernel
def first_negative_cell(g, hits, seen):
    for i, j in kd.ndrange(g.shape[0], g.shape[1]):
        if g[i, j] < 0.0:
            hits[i, j] = 1
            break
        seen[i, j] = 1


@kd.kernel
def rows_until_empty(a, limit, first, done):
    for i in kd.prange(a.shape[0]):
        for j in range(a.shape[1]):
            for k in range(a.shape[2]):
                if a[i, j, k] > limit:
                    if k > 0:
                        first[i, j] = k
                        break  # leaves the loop over k only
        done[i] = 1
        if first[i, 0] == 0:
            break  # leaves the parallel loop


@kd.kernel
def nested_return(a, out, rows):
    count = 0
    for i in kd.prange(a.shape[0]):
        for j in range(a.shape[1]):
            if a[i, j] < 0.0:
                out[0] = i
                return
        rows[i] = 1
        count += 1
    out[1] = count


@kd.kernel
def first_in_each_row(a, limit, first):
    for i in kd.prange(a.shape[0]):
        for j in kd.prange(a.shape[1]):  # nested: runs serially, so break is Python's
            if a[i, j] > limit:
                first[i] = j
                break


def test_break_in_a_nested_parallel_loop(rng):
    check(first_in_each_row, rng.uniform(0.0, 1.0, (30, 20)), 0.9, np.full(30, -1, np.int64))


def _check_search(a, limit, hits, seen):
    found = hits == 1
    assert np.all(a[found] > limit)
    assert np.all(a[seen == 1] <= limit)
    assert not np.any(found & (seen == 1))
    assert found.any() == bool(np.any(a > limit))


def _search_args(n, rng):
    a = rng.uniform(0.0, 1.0, n)
    return a, np.zeros(n, np.int64), np.zeros(n, np.int64)


@pytest.mark.parametrize("n", [1, 7, 40])
def test_short_search_is_python_exactly(n, rng):
    a, hits, seen = _search_args(n, rng)
    with cuda_testing.cpu_only():
        check(first_above, a, 0.8, hits, seen)


def test_search_on_one_thread_is_python_exactly(rng):
    a, hits, seen = _search_args(200_000, rng)
    a[150_000:] += 1.0
    with cuda_testing.cpu_only():
        with_threads(1, check, first_above, a, 1.5, hits, seen)
    assert hits.sum() == 1 and seen.sum() == 150_000


@pytest.mark.parametrize("threads", [2, 4])
def test_search_on_a_team_records_only_real_hits(threads, rng):
    a, hits, seen = _search_args(400_000, rng)
    with_threads(threads, first_above, a, 0.999, hits, seen)
    _check_search(a, 0.999, hits, seen)
    assert seen.sum() < a.size - (a > 0.999).sum()  # iterations were skipped
    a, hits, seen = _search_args(400_000, rng)
    with_threads(threads, first_above, a, 2.0, hits, seen)  # no hit: every iteration runs
    assert hits.sum() == 0 and seen.sum() == a.size


@pytest.mark.parametrize("n", [5, 300_000])
def test_return_skips_the_code_after_the_loop(n, rng):
    a = rng.uniform(0.0, 1.0, n)
    a[n // 2] = 7.0
    out = np.zeros(2)
    mark_unless_found(a, 7.0, out)
    assert out.tolist() == [-1.0, n // 2]
    with cuda_testing.cpu_only():
        check(mark_unless_found, a, 7.0, np.zeros(2))
        check(mark_unless_found, a, 8.0, np.zeros(2))  # not found: the code after runs


def test_break_in_ndrange(rng):
    g = rng.uniform(0.0, 1.0, (300, 400))
    g[[5, 70, 250], [17, 399, 0]] = -1.0
    hits, seen = np.zeros(g.shape, np.int64), np.zeros(g.shape, np.int64)
    first_negative_cell(g, hits, seen)
    _check_search(-g, 0.0, hits, seen)
    with cuda_testing.cpu_only():
        with_threads(1, check, first_negative_cell, g, np.zeros(g.shape, np.int64),
                     np.zeros(g.shape, np.int64))
        check(first_negative_cell, g[:3, :4].copy(), np.zeros((3, 4), np.int64),
              np.zeros((3, 4), np.int64))


def test_break_in_nested_serial_loops_leaves_only_them(rng):
    a = rng.uniform(0.0, 1.0, (64, 5, 6))
    a[:, 0, 2] = 0.9
    a[40, 0, :] = 0.0  # row 40 finds nothing in its first slice: the parallel loop stops
    with cuda_testing.cpu_only():
        first, done = np.zeros((64, 5), np.int64), np.zeros(64, np.int64)
        with_threads(1, check, rows_until_empty, a, 0.7, first, done)
    assert done.sum() == 41 and done[40] == 1
    first2, done2 = np.zeros((64, 5), np.int64), np.zeros(64, np.int64)
    with_threads(4, rows_until_empty, a, 0.7, first2, done2)
    ran = done2 == 1
    np.testing.assert_array_equal(first2[ran], _python_first(a, 0.7)[ran])


def _python_first(a, limit):
    first = np.zeros(a.shape[:2], np.int64)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            for k in range(a.shape[2]):
                if a[i, j, k] > limit and k > 0:
                    first[i, j] = k
                    break
    return first


def test_return_from_serial_loops_in_a_parallel_body(rng):
    a = rng.uniform(0.0, 1.0, (50, 8))
    with cuda_testing.cpu_only():
        check(nested_return, a, np.zeros(2, np.int64), np.zeros(50, np.int64))
        a[20, 3] = -1.0
        out, rows = np.zeros(2, np.int64), np.zeros(50, np.int64)
        with_threads(1, check, nested_return, a, out, rows)
    assert out.tolist() == [20, 0] and rows.sum() == 20


needs_cuda = pytest.mark.skipif(not cuda_testing.enabled(), reason="CUDA tests are off")


@needs_cuda
def test_break_and_return_on_the_cuda_device(rng):
    a, hits, seen = _search_args(5000, rng)
    with cuda_testing.on_device():
        args = cuda_testing.device_arguments(first_above, (a, 0.99, hits, seen))
        first_above(*args)
        _check_search(a, 0.99, cuda_testing.to_host(args[2]), cuda_testing.to_host(args[3]))
        a[1234] = 7.0
        for target, expected in ((7.0, [-1.0, 1234.0]), (8.0, [1.0, 0.0])):
            args = cuda_testing.device_arguments(mark_unless_found, (a, target, np.zeros(2)))
            mark_unless_found(*args)
            assert cuda_testing.to_host(args[2]).tolist() == expected
        g = rng.uniform(0.0, 1.0, (40, 70))
        g[9, 33] = -1.0
        args = cuda_testing.device_arguments(
            first_negative_cell, (g, np.zeros(g.shape, np.int64), np.zeros(g.shape, np.int64)))
        first_negative_cell(*args)
        _check_search(-g, 0.0, cuda_testing.to_host(args[1]), cuda_testing.to_host(args[2]))


def test_ptx_assembles(rng):
    try:
        nvvm.nvvm_version()
    except nvvm.NvvmUnavailable:
        pytest.skip("libNVVM not installed")
    a, hits, seen = _search_args(100, rng)
    for ptx in (first_above.ptx(a, 0.5, hits, seen), mark_unless_found.ptx(a, 0.5, np.zeros(2)),
                nested_return.ptx(a.reshape(10, 10), np.zeros(2, np.int64), hits[:10])):
        if nvvm.ptxas() is not None:
            nvvm.check_with_ptxas(ptx)


@kd.kernel
def sum_until_large(x):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        if x[i] > 10.0:
            break
        s += x[i] * x[i]
    return s


def test_gradient_of_a_loop_left_by_break_is_a_located_error(rng):
    x = rng.uniform(0.0, 1.0, 20)
    def taped() -> None:
        with kd.Tape() as tape:
            loss = sum_until_large(kd.array(x, requires_grad=True))
        tape.backward(loss)

    for differentiate in (lambda: kd.grad(sum_until_large)(x), taped,
                          lambda: kd.jvp(sum_until_large, (x,), (np.ones_like(x),))):
        with pytest.raises(kd.CompileError, match="'break' or 'return'") as info:
            differentiate()
        assert "for i in kd.prange" in str(info.value)

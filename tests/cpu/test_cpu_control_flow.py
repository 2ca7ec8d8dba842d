"""Control flow: range with any start/stop/step, while, break, continue, early return,
if/elif/else, conditional expressions, short-circuit and/or, chained comparisons,
serial loops around parallel loops, nested parallel loops."""

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats, nonzero_ints

import kdsl as kd

# --- range ---------------------------------------------------------------------------


@kd.kernel
def range_sum(x, start, stop, step):
    s = 0.0
    count = 0
    for i in range(start, stop, step):
        s += x[i] * (i + 1)
        count += 1
    return s, count


@pytest.mark.parametrize("start,stop,step", [
    (0, 50, 1), (3, 50, 1), (3, 50, 4), (49, -1, -1), (49, 2, -3), (10, 10, 1),
    (10, 3, 1), (3, 10, -1), (0, 50, 7), (47, 0, -47), (5, 6, 100),
])
def test_range_start_stop_step(start, stop, step, rng):
    x = nonzero_floats(rng, 50, np.float64)
    s, count = check(range_sum, x, start, stop, step, rtol=1e-12)
    assert count == len(range(start, stop, step))


@kd.kernel
def constant_steps(x, out):
    n = x.shape[0]
    k = 0
    for i in range(n - 1, -1, -1):
        out[k] = x[i]
        k += 1
    for i in range(n - 1, 0, -3):
        out[i] += 100.0
    for i in range(2, n, 5):
        out[i] -= 1000.0
    for i in range(n):
        out[i] *= 2.0
    for i in range(1, 1):
        out[i] = -1.0
    return k


def test_constant_steps_including_negative(rng):
    x = nonzero_floats(rng, 37)
    out = np.zeros(37, np.float32)
    assert check(constant_steps, x, out) == 37


@kd.kernel
def prange_with_steps(out, start, stop, step):
    for i in kd.prange(start, stop, step):
        out[i] = i * 10 + 1


@pytest.mark.parametrize("start,stop,step", [(0, 40, 1), (5, 40, 3), (39, -1, -2), (39, 0, -5),
                                             (10, 5, 1)])
def test_prange_start_stop_step(start, stop, step):
    out = np.full(40, -7, np.int64)
    check(prange_with_steps, out, start, stop, step)
    expected = np.full(40, -7)
    for i in range(start, stop, step):
        expected[i] = i * 10 + 1
    np.testing.assert_array_equal(out, expected)


# --- while, break, continue ----------------------------------------------------------


@kd.kernel
def collatz_steps(n, steps):
    for i in kd.prange(n.shape[0]):
        v = n[i]
        k = 0
        while v != 1:
            if v % 2 == 0:
                v = v // 2
            else:
                v = 3 * v + 1
            k += 1
        steps[i] = k


def test_while_collatz(rng):
    n = rng.integers(1, 10_000, 300)
    steps = np.zeros(300, np.int64)
    check(collatz_steps, n, steps)
    assert steps[n == 1].sum() == 0 and steps.max() > 50


@kd.kernel
def newton_sqrt(a: kd.Array[kd.f64], out: kd.Array[kd.f64], iterations: kd.Array[kd.i32]):
    for i in kd.prange(a.shape[0]):
        x = a[i]
        it = 0
        while True:
            nxt = 0.5 * (x + a[i] / x)
            it += 1
            if abs(nxt - x) <= 1e-12 * nxt or it >= 100:
                x = nxt
                break
            x = nxt
        out[i] = x
        iterations[i] = it


# Regression test (was a kdsl bug): a break in a serial loop that is a direct statement of a
# prange body is rejected as 'break directly inside a parallel loop'
def test_while_true_with_break(rng):
    a = rng.uniform(0.5, 1e4, 200)
    out, iterations = np.zeros(200), np.zeros(200, np.int32)
    check(newton_sqrt, a, out, iterations, rtol=1e-14)
    np.testing.assert_allclose(out, np.sqrt(a), rtol=1e-12)


@kd.kernel
def first_above(x, threshold):
    found = -1
    for i in range(x.shape[0]):
        if x[i] > threshold:
            found = i
            break
    return found


def test_break_in_range_loop(rng):
    x = nonzero_floats(rng, 100)
    for threshold in (0.0, 2.0, 3.9, 100.0):
        check(first_above, x, threshold)
    assert first_above(x, 100.0) == -1


@kd.kernel
def row_prefix_until_negative(x, out):
    for i in kd.prange(x.shape[0]):
        s = 0.0
        j = 0
        while j < x.shape[1]:
            if x[i, j] < 0.0:
                break
            s += x[i, j]
            j += 1
        out[i] = s


# Regression test (was a kdsl bug): a break in a serial loop that is a direct statement of a
# prange body is rejected as 'break directly inside a parallel loop'
def test_break_in_while_inside_prange(rng):
    x = nonzero_floats(rng, (64, 20), np.float64)
    out = np.zeros(64)
    check(row_prefix_until_negative, x, out, rtol=1e-14)


@kd.kernel
def sum_skipping(x, out):
    for i in kd.prange(x.shape[0]):
        s = 0.0
        for j in range(x.shape[1]):
            if x[i, j] < 0.0:
                continue
            if j % 3 == 1:
                continue
            s += x[i, j]
        out[i] = s


def test_continue(rng):
    x = nonzero_floats(rng, (50, 17), np.float64)
    out = np.zeros(50)
    check(sum_skipping, x, out, rtol=1e-14)


@kd.func
def row_prefix(x, i):
    s = 0.0
    j = 0
    while j < x.shape[1]:
        if x[i, j] < 0.0:
            break
        s += x[i, j]
        j += 1
    return s


@kd.kernel
def row_prefix_by_func(x, out):
    for i in kd.prange(x.shape[0]):
        out[i] = row_prefix(x, i)


def test_break_in_func_called_from_prange(rng):
    x = nonzero_floats(rng, (64, 20), np.float64)
    out = np.zeros(64)
    check(row_prefix_by_func, x, out, rtol=1e-14)


@kd.kernel
def break_below_if_in_prange(x, out):
    for i in kd.prange(x.shape[0]):
        s = 0.0
        if x[i, 0] > -100.0:
            for j in range(x.shape[1]):
                if x[i, j] < 0.0:
                    break
                s += x[i, j]
        out[i] = s


def test_break_in_loop_nested_below_if_in_prange(rng):
    x = nonzero_floats(rng, (64, 20), np.float64)
    out = np.zeros(64)
    check(break_below_if_in_prange, x, out, rtol=1e-14)


@kd.kernel
def continue_in_prange(x, out):
    for i in kd.prange(x.shape[0]):
        if x[i] < 0.0:
            continue
        out[i] = x[i] * 2.0


def test_continue_directly_in_prange(rng):
    x = nonzero_floats(rng, 90)
    out = np.full(90, -5.0, np.float32)
    check(continue_in_prange, x, out)


@kd.kernel
def nested_break_continue(x, out):
    for i in kd.prange(x.shape[0]):
        total = 0
        for j in range(x.shape[1]):
            if x[i, j] % 7 == 0:
                break
            k = 0
            while k < x[i, j] % 5:
                k += 1
                if k == 2:
                    continue
                total += k
            if total > 40:
                break
        out[i] = total


# Regression test (was a kdsl bug): a break in a serial loop that is a direct statement of a
# prange body is rejected as 'break directly inside a parallel loop'
def test_nested_break_continue(rng):
    x = rng.integers(1, 60, (80, 30))
    out = np.zeros(80, np.int64)
    check(nested_break_continue, x, out)


@kd.kernel
def while_with_else_like_flag(x):
    i = 0
    n = x.shape[0]
    while i < n and x[i] < 3.0:
        i += 1
    return i


def test_while_condition_short_circuit(rng):
    x = nonzero_floats(rng, 30) * 0.5  # magnitudes < 2: runs to the end
    assert check(while_with_else_like_flag, x) == 30
    x[17] = 5.0
    assert check(while_with_else_like_flag, x) == 17


# --- early return ------------------------------------------------------------------


@kd.kernel
def find_in_grid(g, value):
    for i in range(g.shape[0]):
        for j in range(g.shape[1]):
            if g[i, j] == value:
                return i, j
    return -1, -1


def test_early_return_from_nested_loops(rng):
    g = rng.integers(1, 1000, (20, 30))
    g[13, 7] = 5000
    g[15, 2] = 5000
    assert check(find_in_grid, g, 5000) == (13, 7)
    assert check(find_in_grid, g, -3) == (-1, -1)


@kd.kernel
def early_return_while(x):
    i = 0
    while True:
        if x[i] < 0.0:
            return i
        i += 1
        if i == x.shape[0]:
            return -1


def test_early_return_from_while_true(rng):
    x = np.abs(nonzero_floats(rng, 40))
    assert check(early_return_while, x) == -1
    x[25] = -1.0
    assert check(early_return_while, x) == 25


@kd.func
def piecewise(t):
    if t < -1.0:
        return -1.0
    elif t < 0.0:
        return t * t - 1.0
    if t > 2.0:
        return 3.0
    for k in range(3):
        if t < 0.5 * k:
            return t + k
    return t * 0.5


@kd.func
def sign(v):
    if v > 0:
        return 1
    if v < 0:
        return -1
    return 0


@kd.kernel
def apply_piecewise(x, out, signs):
    for i in kd.prange(x.shape[0]):
        out[i] = piecewise(x[i])
        signs[i] = sign(x[i])


def test_func_with_several_returns(rng):
    x = rng.uniform(-3.0, 3.0, 300)
    x[:4] = [0.0, 0.25, -1.0, 2.0]
    out, signs = np.zeros(300), np.zeros(300, np.int64)
    check(apply_piecewise, x, out, signs, rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(signs, np.sign(x))


@kd.kernel
def return_early_or_late(x, flag):
    if flag > 0:
        return x[0] * 2.0
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return s


def test_return_before_loop(rng):
    x = nonzero_floats(rng, 10, np.float64)
    check(return_early_or_late, x, 1)
    check(return_early_or_late, x, 0, rtol=1e-14)


# --- if/elif/else, conditional expressions ------------------------------------------


@kd.kernel
def classify(x, out):
    for i in kd.prange(x.shape[0]):
        v = x[i]
        if v < -2.0:
            c = 0
        elif v < 0.0:
            c = 1
        elif v < 1.0:
            c = 2
        else:
            c = 3
        out[i, 0] = c
        out[i, 1] = 10 if v > 0.0 else (20 if v > -1.0 else 30)
        out[i, 2] = c * 2 if c % 2 == 0 else -c


def test_if_elif_else_and_conditional_expressions(rng):
    x = nonzero_floats(rng, 200)
    out = np.zeros((200, 3), np.int64)
    check(classify, x, out)
    assert set(out[:, 0].tolist()) == {0, 1, 2, 3}


@kd.kernel
def branch_types(x, out):
    for i in kd.prange(x.shape[0]):
        if x[i] > 0.0:
            y = 1
        else:
            y = x[i] * 0.5
        out[i] = y + (0.5 if x[i] > 1.0 else 2)


def test_branches_with_int_and_float_assignments(rng):
    x = nonzero_floats(rng, 50)
    out = np.zeros(50, np.float32)
    check(branch_types, x, out)


# --- short circuit -------------------------------------------------------------------


@kd.kernel(debug=True)
def guarded_neighbours(x, out):
    n = x.shape[0]
    for i in kd.prange(n):
        right = i + 1 < n and x[i + 1] > x[i]
        left = i == 0 or x[i - 1] < x[i]
        out[i] = 2 * int(right) + int(left)


def test_short_circuit_guards_out_of_bounds_reads(rng):
    """The right operands would read x[n] and x[-1] (not a constant: out of bounds) if
    evaluated; the kernel is bounds-checked, so evaluating them raises IndexError."""
    x = nonzero_floats(rng, 64)
    out = np.zeros(64, np.int64)
    check(guarded_neighbours, x, out)


@kd.kernel
def count_evaluations(x, counter, out):
    for i in kd.prange(x.shape[0]):
        a = x[i] > 0.0 and kd.atomic_add(counter, 0, 1) >= 0
        b = x[i] > 0.0 or kd.atomic_add(counter, 1, 1) >= 0
        c = x[i] > 0.0 and x[i] < 2.0 or kd.atomic_add(counter, 2, 1) < -5
        out[i] = int(a) + 2 * int(b) + 4 * int(c)


def test_short_circuit_skips_side_effects(rng):
    x = nonzero_floats(rng, 200)
    counter = np.zeros(3, np.int64)
    out = np.zeros(200, np.int64)
    check(count_evaluations, x, counter, out)
    positive = int((x > 0).sum())
    assert counter.tolist() == [positive, 200 - positive, int(((x <= 0) | (x >= 2)).sum())]


@kd.kernel
def not_and_or(a, b, out):
    for i in kd.prange(a.shape[0]):
        p = a[i] > 0
        q = b[i] > 0
        out[i, 0] = not p and q
        out[i, 1] = not (p or q)
        out[i, 2] = p and q or not p and not q
        out[i, 3] = (a[i] > 10 or b[i] > 10) and not (a[i] < -10)


def test_not_and_or(rng):
    a, b = nonzero_ints(rng, 100), nonzero_ints(rng, 100)
    out = np.zeros((100, 4), np.bool_)
    check(not_and_or, a, b, out)


# --- chained comparisons -------------------------------------------------------------


@kd.kernel
def chained(x, lo, hi, out):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = lo < x[i] <= hi
        out[i, 1] = lo <= x[i] < hi < 3.5
        out[i, 2] = x[i] > lo > -10.0
        out[i, 3] = -1.0 < x[i] != 1.5 < 2.0
        out[i, 4] = 1 < 2 < 3


def test_chained_comparisons(rng):
    x = nonzero_floats(rng, 150)
    out = np.zeros((150, 5), np.bool_)
    check(chained, x, -1.0, 1.5, out)
    np.testing.assert_array_equal(out[:, 0], (x > -1.0) & (x <= 1.5))


@kd.kernel
def chained_evaluates_middle_once(x, counter, out):
    for i in kd.prange(x.shape[0]):
        out[i] = 0.0 < kd.atomic_add(counter, 0, 1) + x[i] < 10.0


def test_chained_comparison_evaluates_middle_once(rng):
    x = nonzero_floats(rng, 100)
    counter = np.zeros(1, np.int64)
    out = np.zeros(100, np.bool_)
    chained_evaluates_middle_once(x, counter, out)
    assert counter[0] == 100


# --- serial loops around parallel loops; nested parallel loops ----------------------


@kd.kernel
def heat(u: kd.Array[kd.f64], tmp: kd.Array[kd.f64], steps: kd.i64, alpha: kd.f64):
    n = u.shape[0]
    for step in range(steps):
        for i in kd.prange(1, n - 1):
            tmp[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in kd.prange(1, n - 1):
            u[i] = tmp[i]
        if step % 10 == 9:
            total = 0.0
            for i in kd.prange(n):
                total += u[i]
            for i in kd.prange(n):
                u[i] = u[i] - total / n * 1e-3


def test_time_stepping_in_one_call(rng):
    u = rng.uniform(0.5, 1.5, 200)
    tmp = np.zeros(200)
    check(heat, u, tmp, 100, 0.2, rtol=1e-10)


@kd.kernel
def two_buffers(a, b, steps):
    n = a.shape[0]
    for step in range(steps):
        if step % 2 == 0:
            for i in kd.prange(1, n - 1):
                b[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1]
        else:
            for i in kd.prange(1, n - 1):
                a[i] = 0.25 * b[i - 1] + 0.5 * b[i] + 0.25 * b[i + 1]
    return steps


def test_ping_pong_buffers(rng):
    a = nonzero_floats(rng, 333)
    b = a.copy()
    check(two_buffers, a, b, 31, rtol=1e-5, atol=1e-6)


@kd.kernel
def nested_prange(out):
    for i in kd.prange(out.shape[0]):
        for j in kd.prange(out.shape[1]):
            out[i, j] = i * 1000 + j
            for k in kd.prange(3):
                out[i, j] += k


def test_nested_prange(rng):
    out = np.zeros((37, 23), np.int64)
    check(nested_prange, out)
    np.testing.assert_array_equal(out, np.arange(37)[:, None] * 1000 + np.arange(23) + 3)


@kd.kernel
def nested_prange_reduction(x, out):
    for i in kd.prange(x.shape[0]):
        s = 0.0
        for j in kd.prange(x.shape[1]):
            s += x[i, j]
        out[i] = s


def test_nested_prange_with_inner_reduction(rng):
    x = nonzero_floats(rng, (40, 50), np.float64)
    out = np.zeros(40)
    check(nested_prange_reduction, x, out, rtol=1e-12)


@kd.kernel
def grid_fill(out):
    for i, j in kd.ndrange(out.shape[0], out.shape[1]):
        out[i, j] = i * 100 + j
    for i, j, k in kd.ndrange(2, 3, 4):
        out[i, j] += k


def test_ndrange():
    out = np.zeros((19, 29), np.int64)
    check(grid_fill, out)


@kd.kernel
def nested_break_continue_serial(x, out):
    for i in range(x.shape[0]):
        total = 0
        for j in range(x.shape[1]):
            if x[i, j] % 7 == 0:
                break
            k = 0
            while k < x[i, j] % 5:
                k += 1
                if k == 2:
                    continue
                total += k
            if total > 40:
                break
        out[i] = total


def test_nested_break_continue_serial(rng):
    x = rng.integers(1, 60, (80, 30))
    out = np.zeros(80, np.int64)
    check(nested_break_continue_serial, x, out)
    assert len(set(out.tolist())) > 5


@kd.kernel
def jacobi_until_converged(u: kd.Array[kd.f64], tmp: kd.Array[kd.f64], tol: kd.f64,
                           max_steps: kd.i64):
    n = u.shape[0]
    for step in range(max_steps):
        err = 0.0
        for i in kd.prange(1, n - 1):
            tmp[i] = 0.5 * (u[i - 1] + u[i + 1])
            err = max(err, abs(tmp[i] - u[i]))
        for i in kd.prange(1, n - 1):
            u[i] = tmp[i]
        if err < tol:
            return step
    return -1


@pytest.mark.parametrize("max_steps", [10, 100_000])
def test_early_return_from_serial_loop_around_parallel_loops(max_steps):
    u = np.zeros(50)
    u[0], u[-1] = 0.5, 1.0
    steps = check(jacobi_until_converged, u, np.zeros(50), 1e-4, max_steps)
    assert (steps == -1) == (max_steps == 10)


@kd.kernel
def halve_until_small(u, tol):
    steps = 0
    while True:
        s = 0.0
        for i in kd.prange(u.shape[0]):
            u[i] = u[i] * 0.5
            s += u[i]
        steps += 1
        if s < tol:
            break
    return steps, s


def test_break_from_while_true_around_parallel_loop(rng):
    u = rng.uniform(0.5, 1.0, 100)
    steps, s = check(halve_until_small, u, 1e-3, rtol=1e-12)
    assert steps > 10

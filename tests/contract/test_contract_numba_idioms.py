"""What Numba users write in ``@njit`` functions, in kernels: ``a.size``, ``a.dtype``,
``a.copy()``, ``divmod``, funcs with default and keyword arguments, loops over tuples."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def normalised_rows(a, weights):
    n, m = a.shape
    out = np.empty_like(a)
    total = 0.0
    for i in kd.prange(n):
        row = a[i].copy()
        row *= weights
        out[i, :] = row / row.sum()
        total += out[i, :].sum()
    scratch = np.zeros(a.shape, a.dtype)
    scratch[:] = a
    return out, total / a.size, a.size, scratch, np.copy(weights)


def test_size_dtype_and_copy_as_numpy(rng):
    a = rng.uniform(0.5, 1.5, size=(7, 5)).astype(np.float32)
    weights = rng.uniform(0.5, 1.5, size=5).astype(np.float32)
    out, mean, size, scratch, w = check(normalised_rows, a, weights, rtol=1e-6)
    assert size == 35 and scratch.dtype == np.float32 and np.array_equal(scratch, a)
    assert np.allclose(out, a * weights / (a * weights).sum(axis=1, keepdims=True), rtol=1e-6)
    assert mean == pytest.approx(7 / 35) and np.array_equal(w, weights) and w is not weights


@kd.kernel
def copy_is_not_a_view(a: kd.Array[kd.f64, 2]):
    b = a.copy()
    a[0, 0] = 100.0
    return b, a.T.copy()


def test_a_copy_keeps_the_values_of_when_it_was_made(rng):
    a = rng.normal(size=(3, 4))
    original = a.copy()
    b, t = copy_is_not_a_view(a)
    assert np.array_equal(b, original) and t.flags.c_contiguous
    assert np.array_equal(t, a.T)


@kd.kernel
def quotients(x: kd.Array[kd.f64], n: kd.Array[kd.i64], out: kd.Array[kd.f64, 2]):
    for i in kd.prange(x.shape[0]):
        q, r = divmod(x[i], 0.75)
        k, m = divmod(n[i], 4)
        out[i, 0] = q
        out[i, 1] = r
        out[i, 2] = k
        out[i, 3] = m


def test_divmod_as_python(rng):
    x = rng.uniform(-5, 5, size=40)
    n = rng.integers(-20, 20, size=40)
    out = np.zeros((40, 4))
    check(quotients, x, n, out)
    assert np.array_equal(out[:, 3], n % 4) and np.array_equal(out[:, 2], n // 4)


@kd.func
def spring_force(d, k=2.0, rest=0.5):
    return k * (d - rest)


@kd.kernel
def springs(d: kd.Array[kd.f32], out: kd.Array[kd.f32, 2]):
    for i in kd.prange(d.shape[0]):
        out[i, 0] = spring_force(d[i])
        out[i, 1] = spring_force(d[i], 3.0)
        out[i, 2] = spring_force(d[i], rest=1.0)
        out[i, 3] = spring_force(rest=0.0, d=d[i], k=0.5)


def test_funcs_take_default_and_keyword_arguments(rng):
    d = rng.uniform(0, 2, size=30).astype(np.float32)
    out = np.zeros((30, 4), np.float32)
    check(springs, d, out, rtol=1e-6)
    assert np.allclose(out[:, 0], 2 * (d - 0.5)) and np.allclose(out[:, 3], 0.5 * d)
    assert out.dtype == np.float32  # the default values are weak, as literals
    assert spring_force(1.0, rest=0.25) == 1.5  # and from Python


def test_a_call_python_cannot_bind_names_the_func():
    @kd.kernel
    def bad(d: kd.Array[kd.f32]):
        d[0] = spring_force(d[0], stiffness=3.0)

    with pytest.raises(kd.CompileError, match="unexpected keyword argument 'stiffness'"):
        bad(np.ones(2, np.float32))


NEIGHBOURS = ((-1, 0), (1, 0), (0, -1), (0, 1))
WEIGHTS = [0.25, 0.5]


@kd.kernel
def laplacian(u: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2]):
    for i, j in kd.ndrange((1, u.shape[0] - 1), (1, u.shape[1] - 1)):
        s = 0.0
        for di, dj in NEIGHBOURS:
            s += u[i + di, j + dj]
        scales = (1.0, 2.0)
        for c in scales:
            s *= c
        for w in [0.5, 0.25]:
            s += w
        out[i, j] = s - 4.0 * u[i, j]


def test_loops_over_tuples_are_unrolled(rng):
    u = rng.normal(size=(6, 7))
    out = np.zeros_like(u)
    check(laplacian, u, out)
    ref = 2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) + 0.75 - 4 * u[1:-1, 1:-1]
    assert np.allclose(out[1:-1, 1:-1], ref)


def test_a_loop_over_a_global_list_is_an_error_as_in_numba():
    @kd.kernel
    def bad(a: kd.Array[kd.f64]):
        for w in WEIGHTS:
            a[0] += w

    with pytest.raises(kd.CompileError, match="can only loop over"):
        bad(np.zeros(2))


def test_break_in_a_loop_over_a_tuple_says_it_is_unrolled():
    @kd.kernel
    def bad(a: kd.Array[kd.f64]):
        for w in (1.0, 2.0):
            if a[0] > w:
                break
            a[0] += w

    with pytest.raises(kd.CompileError, match="unrolled at compile time"):
        bad(np.zeros(2))


@kd.kernel
def numpy_array_functions(x: kd.Array[kd.f32, 2], s: kd.f64):
    return (x.astype(np.float64), (x * 10.0).astype(np.int32), np.clip(x, -0.5, 0.5),
            np.square(x), np.clip(s, 0.0, 1.0), np.square(s))


def test_astype_clip_and_square_as_numpy(rng):
    x = rng.normal(size=(6, 5)).astype(np.float32)
    got = check(numpy_array_functions, x, 1.5)
    expected = (x.astype(np.float64), (x * 10.0).astype(np.int32), np.clip(x, -0.5, 0.5),
                np.square(x), np.clip(1.5, 0.0, 1.0), np.square(1.5))
    for g, e in zip(got, expected):
        assert np.asarray(g).dtype == np.asarray(e).dtype and np.array_equal(g, e)


OFFSETS = np.zeros(4)


@kd.kernel
def relax(x, dt=0.5, steps: kd.i32 = 2):
    for _ in range(steps):
        for i in kd.prange(x.shape[0]):
            x[i] += dt + OFFSETS[i]
    return x[0]


def test_kernel_parameters_take_default_values():
    x = np.zeros(4)
    assert relax(x) == 1.0 and relax(x) == 2.0  # the second call: the compiled call path
    assert relax(x, 1.0) == 4.0 and relax(x, 1.0, 1) == 5.0
    assert relax.python(np.zeros(4)) == 1.0
    assert "%dt: f64" in relax.ir(x)


@kd.kernel
def scaled_energy(x: kd.Array[kd.f64], scale=2.0):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += scale * x[i] * x[i]
    return s


def test_gradients_of_kernels_with_default_values(rng):
    x = rng.normal(size=5)
    assert np.allclose(kd.grad(scaled_energy)(x), 4.0 * x)
    assert np.allclose(kd.grad(scaled_energy)(x, 0.5), x)


@kd.kernel
def python_and_numpy_reductions(a: kd.Array[kd.f64], m: kd.Array[kd.f64, 2]):
    return (sum(a), max(a), min(a), sum(m), sum((a[0], a[1], 2.0)), sum(a, 10.0),
            max((a[1], a[2], a[0])), np.logical_and(a[0] > 0, a[1] > 0),
            np.logical_or(a > 1, a < 0.5), np.logical_not(a > 1), np.logical_xor(a > 1, m[0] > 0),
            np.logical_not(a[0]))


def test_python_sum_min_max_and_numpy_logical_functions(rng):
    a = rng.normal(size=4)
    m = rng.normal(size=(3, 4))
    got = check(python_and_numpy_reductions, a, m, rtol=1e-12)
    expected = (sum(a), max(a), min(a), sum(m), a[0] + a[1] + 2.0, sum(a, 10.0),
                max((a[1], a[2], a[0])), np.logical_and(a[0] > 0, a[1] > 0),
                np.logical_or(a > 1, a < 0.5), np.logical_not(a > 1),
                np.logical_xor(a > 1, m[0] > 0), np.logical_not(a[0]))
    for g, e in zip(got, expected):
        assert np.allclose(g, e, rtol=1e-12) and np.asarray(g).dtype == np.asarray(e).dtype


@kd.func()
def halve(x):
    return x / 2


@kd.kernel()
def halves(a: kd.Array[kd.f64]):
    for i in kd.prange(a.shape[0]):
        a[i] = halve(a[i])


def test_decorators_with_empty_parentheses():
    a = np.array([2.0, 5.0])
    halves(a)
    assert a.tolist() == [1.0, 2.5] and halve(3.0) == 1.5


@kd.kernel
def damped_step(x: kd.Array[kd.f32], dt=0.5):
    for i in kd.prange(x.shape[0]):
        x[i] = x[i] * (1.0 - dt)


@kd.kernel
def squared_norm(x: kd.Array[kd.f32]):
    return kd.sum(x * x)


def test_kernels_with_default_values_under_a_tape():
    x = kd.array(np.array([1.0, 2.0], np.float32), requires_grad=True)
    with kd.Tape() as tape:
        damped_step(x)
        loss = squared_norm(x)
    tape.backward(loss)
    assert np.allclose(x.grad.numpy(), 2 * 0.25 * np.array([1.0, 2.0]))


@kd.kernel
def typed_as_numpy(a: np.ndarray, n: int, s: float) -> float:
    t = 0.0
    for i in range(n):
        t += a[i] * s
    return t


def test_numpy_type_hints_on_parameters():
    assert typed_as_numpy(np.arange(3.0), 3, 2.0) == 6.0

    @kd.kernel
    def hinted(a: npt.NDArray[np.float64], flag: bool) -> None:
        if flag:
            a[0] = 7.0

    a = np.arange(3.0)
    hinted(a, True)
    assert a.tolist() == [7.0, 1.0, 2.0]

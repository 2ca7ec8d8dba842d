"""kd.jvp (forward mode) against reverse mode: v . grad(f) == jvp(f, v) on kernels with
loops, branches, while loops, vectors, matrices, math builtins and in-place updates."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import kdsl as kd

RNG = np.random.default_rng(17)


@kd.kernel
def carried_loop(x: kd.Array[kd.f64], a: kd.f64, n: kd.i32) -> kd.f64:
    p = 1.0
    for k in range(n):
        p = p * kd.cos(x[k % x.shape[0]]) + a * x[(k + 1) % x.shape[0]] * p * 0.5
    return p


@kd.kernel
def branches_and_while(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    y = w
    k = 0
    while y < 4.0 and k < 20:
        y = y * 1.5 + x[k % x.shape[0]]
        k += 1
    s = 0.0
    for i in kd.prange(x.shape[0]):
        if x[i] > 0.5:
            s += kd.exp(x[i]) * y
        else:
            s += kd.where(x[i] > 0.2, x[i] * x[i], kd.log1p(x[i]))
    return s


@kd.kernel
def early_exit(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in range(x.shape[0]):
        if s > 2.0:
            break
        if x[i] < 0.1:
            continue
        s += kd.tanh(x[i]) + kd.atan2(x[i], 1.0 + s)
    return s


@kd.kernel
def vectors(pos: kd.Array[kd.vec3d], k: kd.f64) -> kd.f64:
    n = pos.shape[0]
    total = 0.0
    for i in kd.prange(n):
        e = 0.0
        for j in range(n):
            if j == i:
                continue
            d = pos[i] - pos[j]
            e += k / kd.sqrt(kd.dot(d, d) + 0.01) + kd.length(kd.cross(d, pos[j]))
        total += e
    return total


@kd.kernel
def matrices(m: kd.Array[kd.f64, 2], v: kd.Array[kd.f64]) -> kd.f64:
    a = kd.mat33d(m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2],
                  m[2, 0], m[2, 1], m[2, 2])
    u = kd.vec3d(v[0], v[1], v[2])
    w = a @ u + kd.transpose(a) @ kd.normalize(u)
    return kd.dot(w, w) + kd.trace(kd.outer(u, w))


@kd.kernel
def math_builtins(x: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in range(x.shape[0]):
        v = x[i]
        s += (kd.sin(v) * kd.cos(v) + kd.exp2(v) + kd.log(v + 1.0) + kd.erf(v)
              + kd.pow(v, 1.5) + kd.hypot(v, 2.0) + abs(v - 0.5) + min(v, 0.4)
              + max(v * v, 0.1) + kd.clamp(v, 0.2, 0.8) + kd.asin(v * 0.5) + kd.cosh(v))
    return s


@kd.kernel
def in_place_steps(x: kd.Array[kd.f64], v: kd.Array[kd.f64], k: kd.f64, steps: kd.i32) -> kd.f64:
    n = x.shape[0]
    for _step in range(steps):
        for i in kd.prange(n):
            v[i] += 0.1 * k * (x[(i + 1) % n] + x[(i + n - 1) % n] - 2.0 * x[i])
        for i in kd.prange(n):
            x[i] += 0.1 * v[i]
    e = 0.0
    for i in kd.prange(n):
        e += x[i] * x[i] + v[i]
    return e


@kd.kernel
def scatter(x: kd.Array[kd.f64], index: kd.Array[kd.i32]) -> kd.f64:
    out = kd.zeros(4, kd.f64)
    for i in kd.prange(x.shape[0]):
        kd.atomic_add(out, index[i], x[i] * x[i])
    s = 0.0
    for j in range(4):
        s += out[j] * out[j]
    return s


@kd.kernel
def single_precision(x: kd.Array[kd.f32], a: kd.f32) -> kd.f32:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += kd.sin(a * x[i])
    return s


def directional(args: tuple, tangents: tuple, argnums: tuple[int, ...], kernel: Any) -> float:
    grads = kd.grad(kernel, argnums)(*[a.copy() if isinstance(a, np.ndarray) else a
                                       for a in args])
    return float(sum(np.sum(np.asarray(g) * np.asarray(tangents[k]))
                     for g, k in zip(grads, argnums)))


@kd.kernel
def extremes(x: kd.Array[kd.f64, 2], w: kd.f64) -> kd.f64:
    lo = 10.0 * w
    hi = -1e30
    total = 0.0
    for i, j in kd.ndrange(x.shape[0], x.shape[1]):
        v = kd.sin(x[i, j] * w) + x[i, j] * x[i, j]
        lo = min(lo, v)
        hi = max(hi, v * w)
        total += v
    return lo * hi + total


@kd.kernel
def initial_value_wins(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    lo = w * w
    for i in kd.prange(x.shape[0]):
        lo = min(lo, x[i] + 1.0)
    return lo


CASES = [
    (carried_loop, lambda: (RNG.random(4), 0.7, 9), (0, 1)),
    (branches_and_while, lambda: (RNG.random(9), 0.5), (0, 1)),
    (early_exit, lambda: (RNG.random(12), ), (0,)),
    (vectors, lambda: (RNG.random((6, 3)), 1.5), (0, 1)),
    (matrices, lambda: (RNG.random((3, 3)), RNG.random(3) + 0.1), (0, 1)),
    (math_builtins, lambda: (RNG.random(5) * 0.9 + 0.05, ), (0,)),
    (in_place_steps, lambda: (RNG.random(8), RNG.random(8), 0.5, 70), (0, 1, 2)),
    (scatter, lambda: (RNG.random(10), RNG.integers(0, 4, 10).astype(np.int32)), (0,)),
    (extremes, lambda: (RNG.random((5, 7)), 0.8), (0, 1)),
    (initial_value_wins, lambda: (RNG.random(6), 0.5), (0, 1)),
]


@pytest.mark.parametrize("kernel,make,argnums", CASES, ids=[c[0].__name__ for c in CASES])
def test_jvp_is_the_gradient_along_the_tangent(kernel: Any, make: Any,
                                               argnums: tuple[int, ...]) -> None:
    args = make()
    tangents = tuple(
        (RNG.standard_normal(np.shape(a)) if isinstance(a, np.ndarray) else float(RNG.normal()))
        if k in argnums else None for k, a in enumerate(args))
    expected = directional(args, tangents, argnums, kernel)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    value, tangent = kd.jvp(kernel, copies, tangents)
    assert value == pytest.approx(kernel.python(*[a.copy() if isinstance(a, np.ndarray) else a
                                                  for a in args]), rel=1e-12)
    assert tangent == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert expected != 0.0


def test_jvp_in_single_precision_and_with_constant_arguments() -> None:
    x = RNG.random(16).astype(np.float32)
    t = RNG.random(16).astype(np.float32)
    value, tangent = kd.jvp(single_precision, (x, np.float32(1.3)), (t, None))
    expected = float(np.sum(np.cos(1.3 * x.astype(np.float64)) * 1.3 * t))
    assert isinstance(tangent, np.float32)
    assert tangent == pytest.approx(expected, rel=1e-4)
    _, along_a = kd.jvp(single_precision, (x, np.float32(1.3)), (None, 1.0))
    assert along_a == pytest.approx(float(np.sum(np.cos(1.3 * x) * x)), rel=1e-4)


def test_jvp_leaves_the_tangents_it_was_given() -> None:
    x, v = RNG.random(8), RNG.random(8)
    tx = RNG.random(8)
    before = tx.copy()
    kd.jvp(in_place_steps, (x, v, 0.5, 3), (tx, None, None, None))
    np.testing.assert_array_equal(tx, before)


def test_bad_tangents() -> None:
    x = RNG.random(4)
    with pytest.raises(ValueError, match="the shape of the argument"):
        kd.jvp(carried_loop, (x, 0.5, 3), (np.ones(3), None, None))
    with pytest.raises(TypeError, match="'n' is i32; only floating-point"):
        kd.jvp(carried_loop, (x, 0.5, 3), (None, None, 1))
    with pytest.raises(ValueError, match="3 primals but 2 tangents"):
        kd.jvp(carried_loop, (x, 0.5, 3), (None, 1.0))


def test_a_kernel_without_a_scalar_result_is_a_compile_error() -> None:
    @kd.kernel
    def writes(x: kd.Array[kd.f64]):
        for i in range(x.shape[0]):
            x[i] = x[i] * 2.0

    with pytest.raises(kd.CompileError, match="kd.jvp needs a kernel that returns one"):
        kd.jvp(writes, (RNG.random(3),), (RNG.random(3),))

"""Values computed on the gradient's way back: sums in serial loops whose adjoint loop
runs in the loop's own order, parallel sums given by the adjoint loop. Each kernel's value
and gradient against the kernel itself and central differences."""

from __future__ import annotations

import numpy as np

import kdsl as kd


def check(kernel, *args, argnums=0) -> None:  # type: ignore[no-untyped-def]
    value, _ = kd.value_and_grad(kernel, argnums)(*args)
    assert np.isclose(value, kernel.python(*args), rtol=1e-12)
    kd.check_grad(kernel, *args, argnums=argnums)


@kd.kernel
def vector_sums(p: kd.Array[kd.vec3d], k: kd.f64) -> kd.f64:
    n = p.shape[0]
    total = 0.0
    for i in kd.prange(n):
        force = kd.vec3d(0.0, 0.0, 0.0)
        count = 0
        for j in range(n):
            if j == i:
                continue
            d = p[i] - p[j]
            force -= d * (k / (kd.dot(d, d) + 0.5))
            count += 1
        total += kd.dot(force, force) / float(count)
    return total


def test_vector_sum_with_an_integer_counter() -> None:
    """``force`` is only summed but its value is used after the loop (not deferred)."""
    p = np.random.default_rng(0).random((7, 3))
    check(vector_sums, p, 1.3, argnums=(0, 1))


@kd.kernel
def differences(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    n = x.shape[0]
    total = 0.0
    lowest = 1e30
    for i in kd.prange(n):
        e = 0.0
        for j in range(n):
            e -= kd.sin(x[i] * w - x[j])
        e = e + 2.0 * x[i]
        total += e
        lowest = min(lowest, float(i))
    return total * w + lowest


def test_subtracted_sum_and_a_reduction_that_does_not_vary() -> None:
    x = np.random.default_rng(1).random(9)
    check(differences, x, 0.8, argnums=(0, 1))


@kd.kernel
def sums_in_a_time_loop(x: kd.Array[kd.f64], steps: kd.i32) -> kd.f64:
    n = x.shape[0]
    e = 0.0
    for _step in range(steps):
        for i in kd.prange(n):
            x[i] = x[i] * 0.9 + 0.05 * kd.cos(x[i] * float(i + 1))
        s = 0.0
        for i in kd.prange(n):
            s += x[i] * x[i]
        e += kd.sqrt(s)
    return e


def test_sums_inside_a_time_loop() -> None:
    x = np.random.default_rng(2).random(6)
    value, g = kd.value_and_grad(sums_in_a_time_loop)(x, 5)
    assert np.isclose(value, sums_in_a_time_loop.python(x.copy(), 5), rtol=1e-12)
    kd.check_grad(sums_in_a_time_loop, x, 5)


@kd.kernel
def serial_sums(x: kd.Array[kd.f64], a: kd.f64) -> kd.f64:
    s = 0.0
    t = 1.0
    for i in range(x.shape[0]):
        s += x[i] * a
        t = t + kd.exp(-x[i] * x[i])
    u = 0.0
    for i in range(2, x.shape[0], 3):
        u = u - x[i] * x[i - 1]
    return s + t * a + u


def test_serial_sums_and_strided_loop() -> None:
    x = np.random.default_rng(3).random(10)
    check(serial_sums, x, 0.4, argnums=(0, 1))
    empty = np.zeros(0)
    value, (g, ga) = kd.value_and_grad(serial_sums, (0, 1))(empty, 0.4)
    assert value == 0.4 and ga == 1.0 and g.shape == (0,)


def test_parallel_energy_in_float32() -> None:
    @kd.kernel
    def energy(pos: kd.Array[kd.vec3]) -> kd.f32:
        n = pos.shape[0]
        total = 0.0
        for i in kd.prange(n):
            e = 0.0
            for j in range(n):
                d = pos[i] - pos[j]
                e += 1.0 / kd.sqrt(kd.dot(d, d) + 0.01)
            total += e
        return total

    pos = np.random.default_rng(4).random((40, 3)).astype(np.float32)
    value, g = kd.value_and_grad(energy)(pos)
    p = pos.astype(np.float64)
    d = p[:, None, :] - p[None, :, :]
    r2 = (d * d).sum(-1) + 0.01
    assert np.isclose(value, (1.0 / np.sqrt(r2)).sum(), rtol=1e-5)
    expected = -2.0 * ((r2 ** -1.5)[:, :, None] * d).sum(axis=1)
    assert np.allclose(g, expected, rtol=1e-4, atol=1e-3)
    text = kd.grad(energy).ir(pos)
    # the value comes from the adjoint loop; a serial loop adds the adjoints, summed
    # component by component, into d_pos
    assert text.count("parallel_for") == 1
    assert "array_new %0, %1 {fill = 'zeros'} : array<f32, 2, C>" in text

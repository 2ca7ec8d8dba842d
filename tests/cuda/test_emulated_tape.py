"""kd.Tape on kdsl's emulated CUDA device, compared with the same program on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def relax_step(x: kd.Array[kd.f64], v: kd.Array[kd.f64], k: kd.Array[kd.f64]):
    n = x.shape[0]
    for i in kd.prange(n):
        v[i] += 0.05 * (k[i] * (x[(i + 1) % n] - x[i]) - kd.sin(x[i]))
    for i in kd.prange(n):
        x[i] += 0.05 * v[i]


@kd.kernel
def energy(x: kd.Array[kd.f64], loss: kd.Array[kd.f64]):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i] * x[i]
    loss[0] = s


def gradients(device: str, x0: np.ndarray, k0: np.ndarray,
              checkpoint_every: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = kd.array(x0, device=device, requires_grad=True)
    k = kd.array(k0, device=device, requires_grad=True)
    v = kd.zeros(x0.shape[0], kd.f64, device=device)
    loss = kd.zeros(1, kd.f64, device=device)
    with kd.Tape(checkpoint_every) as tape:
        for _ in range(12):
            relax_step(x, v, k)
        energy(x, loss)
    final = x.numpy().copy()
    tape.backward(loss)
    tape.backward(loss)  # accumulates on the device too
    assert x.grad.device == device
    np.testing.assert_array_equal(x.numpy(), final)
    return x.grad.numpy() / 2, k.grad.numpy() / 2, final


@pytest.mark.parametrize("checkpoint_every", [None, 5])
def test_tape_on_the_device_matches_the_cpu(emulated_device, checkpoint_every) -> None:
    rng = np.random.default_rng(5)
    x0, k0 = rng.random(33), 0.5 + rng.random(33)
    on_cpu = gradients("cpu", x0, k0)
    on_device = gradients("cuda", x0, k0, checkpoint_every)
    for a, b in zip(on_device, on_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    assert np.any(on_cpu[0] != 0) and np.any(on_cpu[1] != 0)


@kd.kernel
def weighted_energy(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        for j in range(3):
            s += w * kd.sin(x[i] * float(j + 1))
    return s


def test_jvp_on_the_device_matches_the_cpu(emulated_device) -> None:
    rng = np.random.default_rng(8)
    x, t = rng.random(40), rng.random(40)
    expected = kd.jvp(weighted_energy, (x, 0.7), (t, 0.5))
    got = kd.jvp(weighted_energy, (kd.array(x, device="cuda"), 0.7),
                 (kd.array(t, device="cuda"), 0.5))
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@kd.kernel
def spring_step(x: kd.Array[kd.vec2d], v: kd.Array[kd.vec2d], f: kd.Array[kd.vec2d],
                neighbours: kd.Array[kd.i32, 2]):
    """Forces from up to 4 neighbours (many adjoint updates per iteration), then an
    in-place update: the product drops the copies and stores nothing reads."""
    n = x.shape[0]
    for i in kd.prange(n):
        force = kd.vec2d(0.0, -1.0)
        for k in kd.static(range(4)):
            j = neighbours[i, k]
            if j >= 0:
                d = x[j] - x[i]
                length = kd.sqrt(kd.dot(d, d) + 1e-12)
                force += (30.0 * (length - 0.3) + kd.dot(v[j] - v[i], d)) * (d / length)
        f[i] = force
    for i in kd.prange(n):
        v[i] += 0.01 * f[i]
        x[i] += 0.01 * v[i]


@kd.kernel
def spread(x: kd.Array[kd.vec2d]) -> kd.f64:
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += kd.dot(x[i], x[i])
    return s


def test_mass_spring_tape_on_the_device_matches_the_cpu(emulated_device) -> None:
    rng = np.random.default_rng(11)
    count = 10
    x0 = np.stack([np.arange(count) * 0.3, np.zeros(count)], axis=1) + rng.random((count, 2)) * 0.1
    neighbours = np.full((count, 4), -1, dtype=np.int32)
    for i in range(count):
        for k, j in enumerate((i - 1, i + 1, i - 2, i + 2)):
            if 0 <= j < count:
                neighbours[i, k] = j
    results = []
    for device in ("cpu", "cuda"):
        x = kd.array(x0, device=device, requires_grad=True)
        v = kd.zeros_like(x)
        f = kd.zeros_like(x)
        nb = kd.array(neighbours, device=device)
        with kd.Tape() as tape:
            for _ in range(4):
                spring_step(x, v, f, nb)
            loss = spread(x)
        tape.backward(loss)
        results.append(x.grad.numpy())
    assert np.abs(results[0]).max() > 0.1
    np.testing.assert_allclose(results[1], results[0], rtol=1e-10)


@kd.kernel
def smoothed(x: kd.Array[kd.f64]):
    out = kd.zeros(x.shape[0], kd.f64)
    n = x.shape[0]
    for i in kd.prange(n):
        out[i] = 0.5 * x[i] + 0.25 * kd.sin(x[(i + 1) % n]) * x[(i + n - 1) % n]
    return out


@kd.kernel
def relax(a: kd.Array[kd.f64], rate: kd.f64):
    for i in kd.prange(a.shape[0]):
        a[i] = a[i] - rate * a[i] * a[i]


@kd.kernel
def dot_with(a: kd.Array[kd.f64], b: kd.Array[kd.f64]) -> kd.f64:
    s = 0.0
    for i in kd.prange(a.shape[0]):
        s += a[i] * b[i]
    return s


def test_returned_arrays_on_the_device_match_the_cpu(emulated_device) -> None:
    x0 = np.random.default_rng(12).random(9)
    grads = []
    for device in ("cpu", "cuda"):
        x = kd.array(x0, device=device, requires_grad=True)
        with kd.Tape() as tape:
            h = smoothed(x)
            relax(h, 0.3)
            loss = dot_with(smoothed(h), h)
        tape.backward(loss)
        assert x.grad.device == device
        grads.append(x.grad.numpy())
    assert np.abs(grads[0]).max() > 1e-3
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10)


@kd.kernel
def smoothed_pair(x: kd.Array[kd.f64]):
    n = x.shape[0]
    out = kd.zeros(n, kd.f64)
    other = kd.zeros(n, kd.f64)
    for i in kd.prange(n):
        out[i] = 0.5 * x[i] * x[(i + 1) % n]
        other[i] = kd.cos(x[i]) + 0.25 * x[(i + n - 1) % n]
    return out, other


def test_arrays_returned_in_a_tuple_on_the_device_match_the_cpu(emulated_device) -> None:
    x0 = np.random.default_rng(14).random(7)
    grads = []
    for device in ("cpu", "cuda"):
        x = kd.array(x0, device=device, requires_grad=True)
        with kd.Tape() as tape:
            h, g = smoothed_pair(x)
            relax(h, 0.3)
            loss = dot_with(h, g)
        tape.backward(loss)
        grads.append(x.grad.numpy())
    assert np.abs(grads[0]).max() > 1e-3
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10)


@kd.kernel
def small_network(w: kd.Array[kd.f64, 2], x: kd.Array[kd.f64, 2]) -> kd.f64:
    h = kd.tanh(x @ w)
    return kd.sum(h * h * kd.max(h, axis=1, keepdims=True))


def test_jvp_of_whole_array_expressions_on_the_device_matches_the_cpu(emulated_device) -> None:
    rng = np.random.default_rng(21)
    w, x, t = rng.standard_normal((3, 4)), rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    expected = kd.jvp(small_network, (w, x), (t, None))
    got = kd.jvp(small_network, (kd.array(w, device="cuda"), kd.array(x, device="cuda")),
                 (kd.array(t, device="cuda"), None))
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    assert abs(expected[1]) > 1e-6


@kd.kernel
def biased_dense(x: kd.Array[kd.f64, 2], w: kd.Array[kd.f64, 2], b: kd.Array[kd.f64, 2],
                 out: kd.Array[kd.f64, 2]):
    out[:] = kd.tanh(x @ w + b)  # b is (1, m): broadcast along an axis of size 1


@kd.kernel
def column_weighted(h: kd.Array[kd.f64, 2], c: kd.Array[kd.f64, 2], loss: kd.Array[kd.f64]):
    loss[0] = kd.sum(h * c)  # c is (n, 1)


def test_tape_with_size_one_axes_on_the_device_matches_the_cpu(emulated_device) -> None:
    rng = np.random.default_rng(8)
    x, w0, b0, c0 = (rng.standard_normal(s) for s in ((6, 3), (3, 4), (1, 4), (6, 1)))
    found = []
    for device in ("cpu", "cuda"):
        w, b, c = (kd.array(a, device=device, requires_grad=True) for a in (w0, b0, c0))
        h = kd.zeros((6, 4), kd.f64, device=device)
        loss = kd.zeros(1, kd.f64, device=device)
        with kd.Tape() as tape:
            biased_dense(kd.array(x, device=device), w, b, h)
            column_weighted(h, c, loss)
        tape.backward(loss)
        assert b.grad.device == device and b.grad.shape == (1, 4) and c.grad.shape == (6, 1)
        found.append([a.grad.numpy() for a in (w, b, c)])
    z = np.tanh(x @ w0 + b0)
    np.testing.assert_allclose(found[0][1], np.sum(c0 * (1 - z * z), axis=0, keepdims=True),
                               rtol=1e-12)
    np.testing.assert_allclose(found[0][2], np.sum(z, axis=1, keepdims=True), rtol=1e-12)
    for a, b in zip(found[1], found[0]):
        np.testing.assert_allclose(a, b, rtol=1e-10)


@kd.kernel
def shifted_spread(pos: kd.Array[kd.vec3d], centre: kd.vec3d, m: kd.mat33d) -> kd.f64:
    s = 0.0
    for i in kd.prange(pos.shape[0]):
        d = m @ (pos[i] - centre)
        s += kd.dot(d, d)
    return s


def test_jvp_with_vector_and_matrix_tangents_on_the_device_matches_the_cpu(emulated_device) -> None:
    rng = np.random.default_rng(13)
    pos, centre, m = rng.standard_normal((17, 3)), rng.standard_normal(3), rng.standard_normal((3, 3))
    tangents = (None, rng.standard_normal(3), rng.standard_normal((3, 3)))
    expected = kd.jvp(shifted_spread, (pos, centre, m), tangents)
    got = kd.jvp(shifted_spread, (kd.array(pos, device="cuda"), centre, m), tangents)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    assert abs(expected[1]) > 1e-6

"""The adjoint parallel loops' scattered updates: each thread adds into its own copy of
the adjoint array, and a loop whose arrays are too large to copy for a team runs on the
calling thread. Every path against a float64 NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
from finite_differences import central_differences

import kdsl as kd
from kdsl.codegen import parallel_copies

SOFTENING = 0.05


def _pair_energy() -> kd.Kernel:
    """A fresh kernel (compiled again under a changed copy limit): pairs over j inside a
    parallel loop over i, so that each iteration adds into every element's adjoint."""

    @kd.kernel
    def pair_energy(x: kd.Array[kd.f64], y: kd.Array[kd.vec3d]) -> kd.f64:
        total = 0.0
        for i in kd.prange(x.shape[0]):
            e = 0.0
            for j in range(x.shape[0]):
                d = y[i] - y[j]
                e += x[i] * x[j] / kd.sqrt(kd.dot(d, d) + (x[i] - x[j]) ** 2 + SOFTENING)
            total += e
        return total

    return pair_energy


def _reference(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d energy / d x and d energy / d y, in float64 with NumPy."""
    dx = x[:, None] - x[None, :]
    dy = y[:, None, :] - y[None, :, :]
    r2 = (dy * dy).sum(axis=-1) + dx * dx + SOFTENING
    inv = r2 ** -0.5
    inv3 = r2 ** -1.5
    w = x[:, None] * x[None, :]
    # each pair appears as (i, j) and as (j, i)
    gx = 2.0 * (x[None, :] * inv).sum(axis=1) - 2.0 * (w * dx * inv3).sum(axis=1)
    gy = -2.0 * ((w * inv3)[:, :, None] * dy).sum(axis=1)
    return gx, gy


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("limit", [None, 8])
def test_adjoint_updates_match_numpy(threads, limit, monkeypatch, tmp_path) -> None:
    """``limit=8`` makes both adjoint arrays too large to copy for a team: the loop runs
    on one thread, which copies them."""
    if limit is not None:
        monkeypatch.setattr(parallel_copies, "PRIVATE_COPY_LIMIT", limit)
        monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    kd.set_num_threads(threads)
    rng = np.random.default_rng(11)
    x = rng.uniform(0.5, 1.5, 40)
    y = rng.random((40, 3))
    kernel = _pair_energy()
    g = kd.grad(kernel, (0, 1))
    gx, gy = g(x, y)
    ref_x, ref_y = _reference(x, y)
    np.testing.assert_allclose(gx, ref_x, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gy, ref_y, rtol=1e-10, atol=1e-10)
    assert np.abs(ref_y).max() > 1.0
    llvm = g.llvm_ir(x, y)
    assert "atomicrmw fadd" not in llvm  # no atomic path for the adjoints
    # the copies' memory comes from the C heap, not from the runtime's allocation hook
    assert 'call i8* @"calloc"' in llvm and 'call void @"free"' in llvm


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_repeated_calls_accumulate_nothing_stale(threads) -> None:
    """The copies are zeroed for every call, and merged once per thread."""
    kd.set_num_threads(threads)
    rng = np.random.default_rng(12)
    x = rng.uniform(0.5, 1.5, 33)
    y = rng.random((33, 3))
    g = kd.grad(_pair_energy(), (0, 1))
    first = g(x, y)
    second = g(x, y)
    ref_x, ref_y = _reference(x, y)
    for gx, gy in (first, second):
        np.testing.assert_allclose(gx, ref_x, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(gy, ref_y, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_strided_arguments_next_to_contiguous_ones(threads) -> None:
    """A strided argument's adjoint, next to a contiguous one, in one loop."""
    kd.set_num_threads(threads)
    rng = np.random.default_rng(13)
    x_every_other = rng.uniform(0.5, 1.5, 74)
    x = x_every_other[::2]
    y = rng.random((37, 3))
    assert not x.flags.c_contiguous
    gx, gy = kd.grad(_pair_energy(), (0, 1))(x, y)
    ref_x, ref_y = _reference(x, y)
    np.testing.assert_allclose(gx, ref_x, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gy, ref_y, rtol=1e-10, atol=1e-10)


@kd.kernel
def _cross_pairs(a: kd.Array[kd.f64], b: kd.Array[kd.f64]) -> kd.f64:
    total = 0.0
    for i in kd.prange(a.shape[0]):
        e = 0.0
        for j in range(b.shape[0]):
            e += kd.sin(a[i] * b[j] + 0.1 * j)
        total += e
    return total


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_one_array_for_two_arguments_through_a_tape(threads) -> None:
    """The tape passes one adjoint array for both arguments (see also
    test_tape_pipelined.py)."""
    kd.set_num_threads(threads)
    x0 = np.random.default_rng(14).random(41)
    x = kd.array(x0, requires_grad=True)
    with kd.Tape() as tape:
        energy = _cross_pairs(x, x)
    tape.backward(energy)
    expected = central_differences(lambda p: _cross_pairs.python(p, p), x0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-7, atol=1e-7)
    assert np.abs(expected).max() > 1.0

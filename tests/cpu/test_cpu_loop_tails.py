"""A heavy inner loop of a parallel region that carries sums runs its whole vectors inline
and its remainder in a tail function of the module (kdsl/codegen/loop_tails.py), which a
split compile gives to another part. The results are the kernel's own Python function's
for every length of the loop (no remainder, a remainder, no whole vector, none at all)."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, with_threads

import kdsl as kd
from kdsl.codegen import cpu, loop_tails, split_module
from kdsl.runtime import compiler


@pytest.fixture(autouse=True)
def wide_vectors(monkeypatch):
    """Tail functions wherever the suite runs: 64-byte vectors and two cores (on a host
    without them LLVM splits the wide vectors; the results do not change)."""
    monkeypatch.setattr(loop_tails, "host_vector_bytes", lambda: 64)
    monkeypatch.setattr(cpu, "usable_cores", lambda: 2)


@kd.kernel
def pair_terms(pos: kd.Array[kd.vec3], acc: kd.Array[kd.vec3], energy: kd.Array[kd.f32],
               cutoff: kd.f32):
    n = pos.shape[0]
    for i in kd.prange(n):
        a = kd.vec3(0.0)
        e = 0.0
        for j in range(n):
            if j == i:
                continue
            d = pos[i] - pos[j]
            r2 = kd.dot(d, d) + 0.01
            if r2 < cutoff * cutoff:
                inv = 1.0 / r2
                s = inv * inv * inv
                a += 24.0 * s * (2.0 * s - 1.0) * inv * d
                e += 4.0 * s * (s - 1.0)
        acc[i] = a
        energy[i] = e


@kd.kernel
def window_moments(x: kd.Array[kd.f32], width: kd.i64, out: kd.Array[kd.f32, 2]):
    for i in kd.prange(out.shape[0]):
        s = 0.0
        q = 0.0
        for j in range(i - width, i + width):
            v = x[j] - x[i]
            w = v * v + 1.0
            if w < 3.0:
                s += v / w
            q += kd.sqrt(w) * (v + 0.5) - w * 0.25
        out[i, 0] = s
        out[i, 1] = q


@kd.kernel(debug=True)
def reads_past_the_end(x: kd.Array[kd.f32], extra: kd.i64, out: kd.Array[kd.f32]):
    for i in kd.prange(out.shape[0]):
        s = 0.0
        for j in range(x.shape[0] + extra):
            v = x[j] - x[i]
            w = v * v + 1.0
            if w < 3.0:
                s += v / w
            s += kd.sqrt(w) * (v + 0.5) - w * 0.25
        out[i] = s


def _positions(n: int) -> np.ndarray:
    return np.random.default_rng(n).uniform(-2.0, 2.0, (n, 3)).astype(np.float32)


def _functions(kernel, *args) -> list[str]:
    emitted, _ = compiler.emitted_kernel(kernel.py_function, kernel.parameters(args),
                                         kernel.options, "kdsl_entry_tails")
    return [f.name for f in emitted.module.functions if f.blocks]


def test_the_remainder_runs_in_a_tail_function():
    pos = _positions(8)
    names = _functions(pair_terms, pos, np.zeros_like(pos), np.zeros(8, np.float32),
                       np.float32(1.5))
    tails = [name for name in names if split_module.TAIL_NAME.fullmatch(name)]
    assert len(tails) == 1
    assert tails[0].startswith("pair_terms.parallel.1.tail.")


@pytest.mark.parametrize("n", [1, 2, 5, 31, 32, 33, 64, 70, 97])
def test_pair_terms_run_as_their_python_function(n):
    pos = _positions(n)
    check(pair_terms, pos, np.zeros_like(pos), np.zeros(n, np.float32), np.float32(1.5),
          rtol=2e-4, atol=2e-4)


def test_pair_terms_against_numpy():
    n = 77
    pos = _positions(n)
    acc, energy = np.zeros_like(pos), np.zeros(n, np.float32)
    with_threads(2, pair_terms, pos, acc, energy, np.float32(1.5))
    d = pos[:, None, :].astype(np.float64) - pos[None, :, :]
    r2 = (d * d).sum(axis=2) + 0.01
    inv = 1.0 / r2
    s = inv ** 3
    near = (r2 < 1.5 ** 2) & ~np.eye(n, dtype=bool)
    f = np.where(near, 24.0 * s * (2.0 * s - 1.0) * inv, 0.0)
    assert np.abs(energy).max() > 1.0  # the test data has pairs inside the cutoff
    np.testing.assert_allclose(acc, (f[:, :, None] * d).sum(axis=1), rtol=2e-4, atol=2e-3)
    np.testing.assert_allclose(energy, np.where(near, 4.0 * s * (s - 1.0), 0.0).sum(axis=1),
                               rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("width", [0, 1, 7, 16, 17, 40])
def test_window_moments_run_as_their_python_function(width):
    x = np.random.default_rng(width).uniform(-2.0, 2.0, 300).astype(np.float32)
    out = np.zeros((300 - 2 * width, 2), np.float32)
    check(window_moments, x[width:] if width else x, width, out, rtol=2e-4, atol=2e-4)


def test_window_moments_have_a_tail_function():
    x = np.ones(64, np.float32)
    names = _functions(window_moments, x, 3, np.zeros((10, 2), np.float32))
    assert any(split_module.TAIL_NAME.fullmatch(name) for name in names)


def test_an_index_error_in_the_tail_is_reported():
    x = np.linspace(-1.0, 1.0, 45, dtype=np.float32)
    out = np.zeros(3, np.float32)
    check(reads_past_the_end, x, 0, out, rtol=2e-4, atol=2e-4)
    with pytest.raises(IndexError):
        reads_past_the_end(x, 1, out)


def test_a_split_compile_gives_the_tail_a_part_of_its_own():
    pos = _positions(8)
    args = (pos, np.zeros_like(pos), np.zeros(8, np.float32), np.float32(1.5))
    emitted, _ = compiler.emitted_kernel(pair_terms.py_function, pair_terms.parameters(args),
                                         pair_terms.options, "kdsl_entry_tails_plan")
    plan = split_module.plan_parts(emitted.module, 2)
    assert plan is not None
    owners = {f.name: k for k, part in enumerate(plan) for f in part}
    (tail,) = [name for name in owners if split_module.TAIL_NAME.fullmatch(name)]
    assert owners[tail] != owners["pair_terms.parallel.1"]


def test_the_debug_kernel_has_a_tail_function():
    x = np.ones(45, np.float32)
    names = _functions(reads_past_the_end, x, 0, np.zeros(3, np.float32))
    assert any(split_module.TAIL_NAME.fullmatch(name) for name in names)

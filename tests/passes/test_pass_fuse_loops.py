"""fuse-loops: adjacent parallel loops over one domain run as one loop when every
dependence between them is element-wise, and stay apart otherwise."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(11)


@kd.kernel
def kick_drift(pos: kd.Array[kd.vec3], vel: kd.Array[kd.vec3], dt: kd.f32):
    for i in kd.prange(pos.shape[0]):
        vel[i] += dt * kd.vec3(0.0, -9.8, 0.0)
    pos += dt * vel


@kd.kernel
def gather_then_scatter(pos: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    n = pos.shape[0]
    for i in kd.prange(n):
        out[i] = pos[(i + 1) % n]
    for i in kd.prange(n):
        pos[i] = out[i] * 2.0


def test_loop_and_whole_array_statement_fuse(rng):
    pos = rng.uniform(-1, 1, (50, 3)).astype(np.float32)
    vel = rng.uniform(-1, 1, (50, 3)).astype(np.float32)
    ir = kick_drift.ir(pos, vel, 0.1)
    direct_version = ir.split("} else {")[0]
    assert direct_version.count("parallel_for") == 1  # the hand-written loop joined it
    assert "array_store %vel" in direct_version and "array_store %pos" in direct_version
    p, v, pp, pv = pos.copy(), vel.copy(), pos.copy(), vel.copy()
    kick_drift(p, v, 0.1)
    kick_drift.python(pp, pv, 0.1)
    np.testing.assert_allclose(p, pp, rtol=1e-6)
    np.testing.assert_allclose(v, pv, rtol=1e-6)


def test_loops_with_a_shifted_dependence_stay_apart(rng):
    pos = rng.uniform(1, 2, 64).astype(np.float32)
    out = np.zeros_like(pos)
    ir = gather_then_scatter.ir(pos, out)
    assert ir.count("parallel_for") == 2
    p, o, pp, po = pos.copy(), out.copy(), pos.copy(), out.copy()
    gather_then_scatter(p, o)
    gather_then_scatter.python(pp, po)
    np.testing.assert_array_equal(p, pp)
    np.testing.assert_array_equal(o, po)

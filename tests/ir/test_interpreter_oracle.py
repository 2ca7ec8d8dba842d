"""The IR interpreter as an oracle: every pipeline stage computes what the compiled
kernel computes, on random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd
from kdsl.ir.interpreter import interpret
from kdsl.ir.passes.pipeline import STAGES
from kdsl.runtime.compiler import lower_and_optimize


@kd.func
def clamp_step(v: kd.f32, lo: kd.f32) -> kd.f32:
    if v < lo:
        return lo
    return v * 0.5


@kd.kernel
def mixed(x: kd.Array[kd.f32], y: kd.Array[kd.f32], h: kd.Array[kd.i64]) -> None:
    n = x.shape[0]
    total = 0.0
    for i in kd.prange(n):
        k = 0
        while k < 4:
            k += 1
            if k == 2:
                continue
            y[i] += clamp_step(x[i], 0.25) * k
        b = int(x[i] * 8)
        h[b % 8] += 1
        total += y[i]
    for i in range(n):
        if y[i] > total / n:
            break
        y[i] = -y[i]


@kd.kernel
def vectors(pos: kd.Array[kd.vec3], out: kd.Array[kd.vec3]) -> None:
    n = pos.shape[0]
    for i in kd.prange(n):
        a = kd.vec3(0.0)
        for j in range(n):
            if j == i:
                continue
            d = pos[i] - pos[j]
            r2 = kd.dot(d, d)
            if r2 < 0.5:
                a += d / (r2 + 0.01)
        out[i] = kd.cross(a, pos[i])


def _inputs(kernel: kd.Kernel, rng: np.random.Generator) -> list[np.ndarray]:
    if kernel is mixed:
        x = rng.random(50, dtype=np.float32)
        return [x, rng.random(50, dtype=np.float32), np.zeros(8, np.int64)]
    pos = rng.random((40, 3), dtype=np.float32)
    return [pos, np.zeros_like(pos)]


@pytest.mark.parametrize("kernel", [mixed, vectors], ids=["mixed", "vectors"])
@pytest.mark.parametrize("stage", [s for s in STAGES if s != "bounds-checks"])
def test_every_stage_matches_compiled_code(kernel: kd.Kernel, stage: str) -> None:
    rng = np.random.default_rng(7)
    compiled_args = _inputs(kernel, rng)
    interpreted_args = [a.copy() for a in compiled_args]
    kernel(*compiled_args)
    params = kernel.parameters(tuple(interpreted_args))
    module, _ = lower_and_optimize(kernel.py_function, params, kernel.options,
                                   None if stage == "optimized" else stage)
    interpret(module, interpreted_args)
    for got, want in zip(compiled_args, interpreted_args):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

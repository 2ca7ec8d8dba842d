"""A func with a parallel loop called in several places inlines a region per call: regions
that are the same code are compiled once (kdsl/codegen/merge_regions.py), and the kernel
gives the results of its own Python function; regions that differ stay apart."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd
from kdsl.codegen import split_module
from kdsl.codegen.merge_regions import merge_identical_regions
from kdsl.runtime import compiler


@kd.func
def forces(pos: kd.Array[kd.vec2], acc: kd.Array[kd.vec2]) -> kd.f32:
    energy = 0.0
    for i in kd.prange(pos.shape[0]):
        a = kd.vec2(0.0)
        for j in range(pos.shape[0]):
            if j == i:
                continue
            d = pos[i] - pos[j]
            r2 = kd.dot(d, d) + 0.5
            a += d / (r2 * r2)
            energy += 0.5 / r2
        acc[i] = a
    return energy


@kd.func
def drift(pos: kd.Array[kd.vec2], vel: kd.Array[kd.vec2], dt: kd.f32):
    for i in kd.prange(pos.shape[0]):
        pos[i] += dt * vel[i]


@kd.kernel
def simulate(pos: kd.Array[kd.vec2], vel: kd.Array[kd.vec2], acc: kd.Array[kd.vec2],
             dt: kd.f32, steps: kd.i32) -> kd.f32:
    energy = forces(pos, acc)
    for _ in range(steps):
        for i in kd.prange(vel.shape[0]):
            vel[i] += dt * acc[i]
        drift(pos, vel, dt)
        energy = forces(pos, acc)
        drift(pos, vel, 0.5 * dt)  # the same region as the first drift, another argument
        for i in kd.prange(vel.shape[0]):
            vel[i] = 0.99 * vel[i] + 0.5 * dt * acc[i]  # not the same code as the others
    return energy


def _inputs(n: int):
    rng = np.random.default_rng(n)
    pos = rng.uniform(-2.0, 2.0, (n, 2)).astype(np.float32)
    vel = rng.uniform(-1.0, 1.0, (n, 2)).astype(np.float32)
    return pos, vel, np.zeros_like(pos), np.float32(0.01), 3


def _regions(module) -> list[str]:
    return [f.name for f in module.functions
            if f.blocks and split_module.REGION_NAME.fullmatch(f.name)
            and "merged" not in [b.name for b in f.blocks]]


def test_identical_regions_are_merged():
    args = _inputs(16)
    emitted, _ = compiler.emitted_kernel(simulate.py_function, simulate.parameters(args),
                                         simulate.options, "kdsl_entry_simulate")
    module = emitted.module
    before = _regions(module)
    assert len(before) == 6  # forces twice, drift twice, the two updates of vel
    # the first update of vel is the same code as drift (its scalars come with the call)
    assert merge_identical_regions(module) == 3
    after = _regions(module)
    assert len(after) == 3
    text = str(module)
    for name in set(before) - set(after):  # each merged region only calls the one it equals
        assert text.count(f'@"{name}"') == 1, name


def test_a_kernel_with_merged_regions_runs_as_its_python_function():
    for n in (1, 7, 64):
        check(simulate, *_inputs(n), rtol=2e-4, atol=2e-5)

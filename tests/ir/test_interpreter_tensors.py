"""The interpreter runs whole-array ops and views, so it computes what the compiled
kernel computes at every pipeline stage, before the tensor ops are lowered as after."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd
from kdsl.ir.interpreter import InterpreterError, interpret
from kdsl.ir.passes.pipeline import STAGES
from kdsl.runtime.compiler import lower_and_optimize


@kd.kernel
def whole_arrays(a: kd.Array[kd.f32, 2], b: kd.Array[kd.f32], out: kd.Array[kd.f32, 2]):
    out[:] = kd.erf(a) * 2.0 + b - np.sqrt(np.abs(a[::-1]))
    out[1:, :] = out[:-1, :] + a[1:, None, 0]  # overlapping read: NumPy's copy semantics
    rows = np.sum(a, axis=1, keepdims=True)
    out[:, 0] = (a @ b) + rows[:, 0]
    out[0] = kd.where(a[0] > 0.5, a.T[0, 0], -1.0)
    return np.max(out), kd.mean(out[:, 1:]), np.min(a, axis=0)


@kd.kernel
def vector_arrays(p: kd.Array[kd.vec3], q: kd.Array[kd.vec3], s: kd.Array[kd.f32]):
    p[:] = p * s + q
    return kd.sum(p), kd.sum(p[1:] - q[:-1], axis=0)


def _inputs(kernel: kd.Kernel, rng: np.random.Generator) -> list[np.ndarray]:
    if kernel is whole_arrays:
        return [rng.random((5, 4), dtype=np.float32), rng.random(4, dtype=np.float32),
                np.zeros((5, 4), np.float32)]
    return [rng.random((6, 3), dtype=np.float32), rng.random((6, 3), dtype=np.float32),
            rng.random(6, dtype=np.float32)]


def _same(got: object, want: object) -> None:
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernel", [whole_arrays, vector_arrays], ids=["arrays", "vectors"])
@pytest.mark.parametrize("stage", [s for s in STAGES if s != "bounds-checks"])
def test_every_stage_matches_compiled_code(kernel: kd.Kernel, stage: str) -> None:
    rng = np.random.default_rng(11)
    compiled_args = _inputs(kernel, rng)
    interpreted_args = [a.copy() for a in compiled_args]
    expected = kernel(*compiled_args)
    params = kernel.parameters(tuple(interpreted_args))
    module, _ = lower_and_optimize(kernel.py_function, params, kernel.options,
                                   None if stage == "optimized" else stage)
    results = interpret(module, interpreted_args)
    for got, want in zip(interpreted_args, compiled_args):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert len(results) in (1, len(expected))
    _same(results if len(results) == len(expected) else results[0], expected)


@kd.kernel
def mismatched(a: kd.Array[kd.f32], b: kd.Array[kd.f32]):
    a[:] = b


def test_shape_errors_are_reported_before_lowering() -> None:
    a, b = np.zeros(3, np.float32), np.ones(4, np.float32)
    module, _ = lower_and_optimize(mismatched.py_function, mismatched.parameters((a, b)),
                                   mismatched.options, "frontend")
    with pytest.raises(InterpreterError):
        interpret(module, [a, b])

"""The whole pipeline, run with ``verify=True``, keeps the IR well formed for kernels that
use every construct: loops, if, while, break, continue, early return, prange, ndrange,
reductions, atomics, vectors, matrices and funcs; in normal and in debug mode. Each kernel
also computes what its plain-Python self computes."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd
from kdsl.frontend.function import lower_kernel
from kdsl.ir.core import Module
from kdsl.ir.passes.pipeline import PIPELINE, PassOptions, run_pipeline
from kdsl.ir.verifier import VerificationError, verify_module
from kdsl.runtime.arguments import variable_types


@kd.func
def soft_step(x: kd.f32) -> kd.f32:
    if x < 0.0:
        return 0.0
    return x * x


@kd.func
def scaled_step(x: kd.f32, s: kd.f32) -> kd.f32:
    return soft_step(x) * s


@kd.kernel
def serial_loops(x: kd.Array[kd.f64]):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(0, i, 2):
            s += x[j] * x[i]
    return s


@kd.kernel
def branches(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        v = x[i]
        if v > 2.0:
            out[i] = v
        elif v > 1.0:
            out[i] = -v
        else:
            out[i] = v * 0.5 if v > 0.0 else 0.0


@kd.kernel
def while_break_continue(x: kd.Array[kd.i64]):
    total = 0
    k = 0
    while k < x.shape[0]:
        k += 1
        if x[k - 1] % 2 == 0:
            continue
        if x[k - 1] > 7:
            break
        total += x[k - 1]
    return total, k


@kd.kernel
def early_return(x: kd.Array[kd.f64], t: kd.f64):
    for i in range(x.shape[0]):
        if x[i] > t:
            return i
    return -1


@kd.kernel
def reductions(x: kd.Array[kd.f64]):
    s = 0.0
    p = 1.0
    lo = x[0]
    hi = x[0]
    for i in kd.prange(x.shape[0]):
        s += x[i]
        p *= 1.0 + x[i] * 0.001
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    return s, p, lo, hi


@kd.kernel
def continue_in_prange(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        if x[i] < 1.5:
            continue
        out[i] = x[i] + 1.0


@kd.kernel
def atomics(v: kd.Array[kd.i64], h: kd.Array[kd.i64], acc: kd.Array[kd.i64]):
    for i in kd.prange(v.shape[0]):
        b = v[i] % h.shape[0]
        h[b] += 1
        acc[i] += v[i]
        kd.atomic_max(h, 0, v[i])


@kd.kernel
def grid(g: kd.Array[kd.f64, 2]):
    for i, j in kd.ndrange(g.shape[0], g.shape[1]):
        g[i, j] = g[i, j] * 2.0 + i - j


@kd.kernel
def vectors(p: kd.Array[kd.vec3], out: kd.Array[kd.f32]):
    for i in kd.prange(p.shape[0]):
        v = p[i]
        w = kd.cross(v, kd.vec3(0.0, 0.0, 1.0))
        w.x = w.x + 1.0
        m = kd.mat33(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0)
        u = m @ kd.normalize(v + 1.0)
        out[i] = kd.dot(u, w) + kd.length(w) + v[2]


@kd.kernel
def calls_funcs(x: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        x[i] = scaled_step(x[i], 2.0) + soft_step(x[i] - 1.0)


@kd.kernel
def nested_prange(x: kd.Array[kd.f64, 2], out: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        s = 0.0
        for j in kd.prange(x.shape[1]):
            s += x[i, j]
        out[i] = s


@kd.kernel
def time_steps(x: kd.Array[kd.f64], steps: kd.i64):
    for t in range(steps):
        for i in kd.prange(x.shape[0]):
            x[i] = x[i] * 0.5 + t


def make_args():
    rng = np.random.default_rng(7)
    f32 = (rng.random(9) * 4.0).astype(np.float32)
    return [
        (serial_loops, lambda: (rng.random(7) + 0.5,)),
        (branches, lambda: (f32.copy(), np.full(9, 9.0, np.float32))),
        (while_break_continue, lambda: (np.array([1, 2, 3, 4, 5, 9, 11, 13]),)),
        (early_return, lambda: (np.array([0.5, 1.5, 2.5]), 1.0)),
        (reductions, lambda: (rng.random(50) + 0.25,)),
        (continue_in_prange, lambda: (f32.copy(), np.full(9, -1.0, np.float32))),
        (atomics, lambda: (np.arange(3, 30, 2), np.ones(4, np.int64), np.full(14, 5, np.int64))),
        (grid, lambda: (rng.random((3, 4)) + 1.0,)),
        (vectors, lambda: ((rng.random((5, 3)) + 0.5).astype(np.float32),
                           np.zeros(5, np.float32))),
        (calls_funcs, lambda: (f32.copy() - 2.0,)),
        (nested_prange, lambda: (rng.random((4, 6)) + 1.0, np.zeros(4))),
        (time_steps, lambda: (rng.random(6) + 1.0, 3)),
    ]


CASES = make_args()


def lower(kernel, args, debug):
    params = kernel.parameters(args)
    function, context, _ = lower_kernel(kernel.py_function, variable_types(params), debug)
    return Module(function, {f.name: f for f in context.funcs.values()})


@pytest.mark.parametrize("debug", [False, True], ids=["normal", "debug"])
@pytest.mark.parametrize("kernel, make", CASES, ids=[k.__name__ for k, _ in CASES])
def test_every_stage_verifies(kernel, make, debug):
    module = lower(kernel, make(), debug)
    verify_module(module, context="frontend")
    run_pipeline(module, PassOptions(debug=debug), verify=True)
    verify_module(module, context="optimized")
    names = {op.name for op in module.kernel.walk()}
    assert "call" not in names
    assert ("raise_index_error" in names) == (debug and any(
        n in names for n in ("array_load", "array_store", "atomic_rmw")
    ))


@pytest.mark.parametrize("kernel, make", CASES, ids=[k.__name__ for k, _ in CASES])
def test_compiled_kernel_matches_python(kernel, make):
    compiled_args, python_args = make(), None
    python_args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in compiled_args)
    result = kernel(*compiled_args)
    expected = kernel.python(*python_args)
    if isinstance(expected, tuple):
        assert isinstance(result, tuple) and len(result) == len(expected)
        for r, e in zip(result, expected):
            np.testing.assert_allclose(r, e, rtol=1e-5)
    else:
        np.testing.assert_allclose(result if result is not None else 0,
                                   expected if expected is not None else 0, rtol=1e-5)
    for got, want in zip(compiled_args, python_args):
        if isinstance(got, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=1e-5)


def test_pipeline_stages_are_named():
    names = [p.name for p in PIPELINE]
    for name in ("inline", "simplify", "cse", "dce", "demote-atomics", "speculate-loads",
                 "bounds-checks"):
        assert name in names
    assert names[0] == "inline"
    assert names.index("simplify") < names.index("demote-atomics")
    debug_only = [p.name for p in PIPELINE if p.when(PassOptions(debug=True))
                  and not p.when(PassOptions(debug=False))]
    assert debug_only == ["bounds-checks"]


def test_funcs_are_verified_and_dropped_once_inlined():
    module = lower(calls_funcs, (np.linspace(-2, 2, 8).astype(np.float32),), False)
    func = next(f for f in module.funcs.values() if "scaled_step" in f.name)
    verify_module(module)
    func.body.ops.insert(0, func.body.ops[-1])  # a return before the end: broken
    with pytest.raises(VerificationError, match="'return'"):
        verify_module(module)
    func.body.ops.pop(0)
    run_pipeline(module, PassOptions(), verify=True)
    assert module.funcs == {}  # every call inlined: no func left for later passes
    assert "call" not in [op.name for op in module.kernel.walk()]

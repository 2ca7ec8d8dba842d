"""Reductions in parallel loops written as Numba users write them (API section 4):
``s = s + e`` is ``s += e``."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def spelled_out(x: kd.Array[kd.f64]):
    s = 0.0
    p = 1.0
    d = 0.0
    q = 1.0
    v = kd.vec3d(0.0)
    for i in kd.prange(x.shape[0]):
        s = s + x[i]
        p = (1.0 + x[i] * 1e-3) * p
        d = d - x[i]
        q = q / (1.0 + x[i] * 1e-3)
        v = kd.vec3d(x[i], 1.0, -x[i]) + v
    return s, p, d, q, v


def test_s_equals_s_plus_e_is_a_reduction(rng):
    x = rng.uniform(0.0, 1.0, size=1001)
    s, p, d, q, v = check(spelled_out, x, rtol=1e-12)
    assert s == pytest.approx(x.sum(), rel=1e-12) and d == pytest.approx(-x.sum(), rel=1e-12)
    assert p == pytest.approx(np.prod(1 + x * 1e-3), rel=1e-12)
    assert q == pytest.approx(1 / np.prod(1 + x * 1e-3), rel=1e-12)
    assert np.allclose(v, [x.sum(), 1001, -x.sum()], rtol=1e-12)
    assert kd.grad(spelled_out_sum)(x) == pytest.approx(np.full_like(x, 0.5))


@kd.kernel
def spelled_out_sum(x: kd.Array[kd.f64]):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s = s + x[i] * x[i] / (2.0 * x[i])
    return s


@pytest.mark.parametrize("update", ["s = x[i] - s", "s = s + x[i] * s", "s = s * 2.0 + x[i]"])
def test_other_updates_of_an_outer_local_are_still_errors(update):
    from kdsl_cpu_util import kernel_from_source

    kernel = kernel_from_source(f"""
        @kd.kernel
        def k(x: kd.Array[kd.f64]):
            s = 0.0
            for i in kd.prange(x.shape[0]):
                {update}
            return s
        """)
    with pytest.raises(kd.CompileError, match="only reductions"):
        kernel(np.ones(4))


def test_rebinding_a_shared_array_in_a_parallel_loop_is_a_located_error():
    @kd.kernel
    def k(x: kd.Array[kd.f64]):
        y = np.zeros(4)
        for i in kd.prange(x.shape[0]):
            y = y + x[i]
        return y

    with pytest.raises(kd.CompileError, match="only y \\+= e and y -= e") as info:
        k(np.ones(10))
    assert "y = y + x[i]" in str(info.value)

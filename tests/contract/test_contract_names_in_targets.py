"""Names read inside an assignment's target (``a[OFFSET] = x``, ``h[kd.randint(0, n)] += 1``)
are reads: a global constant there is a compile-time constant whose change recompiles
(the kernel kept its first value), and a draw there is part of the kernel's random stream
(it was refused as if ``kd`` were a local)."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import assert_same, module_from_source

import kdsl as kd

SOURCE = """
OFFSET = 1
CELLS = np.zeros(4)

@kd.kernel
def store_at_offset(a, v: float):
    a[OFFSET] = v
    CELLS[OFFSET + 1] += v

@kd.kernel
def scatter_draws(n: int, hist: kd.Array[kd.i64], weights: kd.Array[kd.f64]):
    for i in kd.prange(n):
        hist[kd.randint(0, hist.shape[0])] += 1
        weights[i % weights.shape[0]] += kd.random()
    for k in range(3):
        hist[kd.randint(0, 2)] -= 1
"""


def test_a_global_constant_in_a_target_recompiles_when_changed():
    module = module_from_source(SOURCE)
    a = np.zeros(4)
    module.store_at_offset(a, 5.0)
    module.OFFSET = 2
    module.store_at_offset(a, 7.0)
    assert list(a) == [0.0, 5.0, 7.0, 0.0]
    assert list(module.CELLS) == [0.0, 0.0, 5.0, 7.0]


def test_draws_in_a_target_follow_the_random_stream():
    module = module_from_source(SOURCE)
    results = []
    for run in (module.scatter_draws, module.scatter_draws.python):
        hist, weights = np.zeros(8, dtype=np.int64), np.zeros(5)
        kd.seed(11)
        run(2000, hist, weights)
        results.append((hist, weights))
    (hist, weights), (python_hist, python_weights) = results
    assert_same(hist, python_hist)
    assert_same(weights, python_weights, rtol=1e-12)
    assert hist.sum() == 2000 - 3 and hist.min() > 150

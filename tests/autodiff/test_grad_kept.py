"""What a gradient keeps: nothing for values only multiplied by constants or stored, and
no copies of scratch arrays (rebuilt each step) that no adjoint reads."""

from __future__ import annotations

import numpy as np

import kdsl as kd


@kd.kernel
def scaled_sums(x: kd.Array[kd.f64], out: kd.Array[kd.f64]) -> kd.f64:
    n = x.shape[0]
    total = 0.0
    for i in kd.prange(n):
        e = 0.0
        for j in range(n):
            if j != i:
                e += kd.sin(x[i] - x[j])
        out[i] = e
        total += 0.5 * e
    return total


def test_scaled_and_stored_sums_keep_nothing() -> None:
    x = np.random.default_rng(7).random(9)
    g = kd.grad(scaled_sums)
    g(x, np.zeros(9))
    assert g.saved_bytes <= 2 * x.nbytes  # copies of out (written in place), nothing per j
    kd.check_grad(scaled_sums, x, np.zeros(9))


@kd.kernel
def binned_steps(x: kd.Array[kd.f64], steps: kd.i32) -> kd.f64:
    n = x.shape[0]
    for _step in range(steps):
        bins = kd.empty(4, kd.i64)
        for b in kd.prange(4):
            bins[b] = 0
        for i in kd.prange(n):
            kd.atomic_add(bins, int(x[i] * 4.0) % 4, 1)
        for i in kd.prange(n):
            x[i] = x[i] + 0.01 * kd.sin(x[i] * float(bins[int(x[i] * 4.0) % 4]))
    e = 0.0
    for i in range(n):
        e += x[i] * x[i]
    return e


def test_scratch_array_rebuilt_each_step_is_not_copied() -> None:
    x = np.random.default_rng(8).random(12) * 0.9
    value, g = kd.value_and_grad(binned_steps)(x, 6)
    assert np.isclose(value, binned_steps.python(x.copy(), 6), rtol=1e-12)
    kd.check_grad(binned_steps, x, 6)
    text = kd.grad(binned_steps).ir(x, 6, stage="autodiff")
    # the bins and the arrays of the loops' bookkeeping; no copies of the bins
    assert text.count("array<i64, 1, C>") <= 5

"""Kernels with long loops shared by the checkpoint and saved-memory tests."""

from __future__ import annotations

import kdsl as kd


@kd.kernel
def long_product(x: kd.Array[kd.f64], n: kd.i32) -> kd.f64:
    p = 1.0
    for k in range(n):
        p = p * (1.0 + 0.01 * kd.sin(x[k % x.shape[0]] * p))
    return p


@kd.kernel
def long_relaxation(x: kd.Array[kd.f64], steps: kd.i32) -> kd.f64:
    n = x.shape[0]
    for _step in range(steps):
        for i in kd.prange(n):
            x[i] = x[i] * 0.99 + 0.01 * kd.cos(x[i] * float(i + 1))
    e = 0.0
    for i in range(n):
        e += x[i] * x[(i + 1) % n]
    return e

"""A local first assigned inside a loop and read after it (API.md section 2: real Python
control flow), as rejection sampling writes it (``while True: w = ...; if ok: break``):
its type comes from its assignment in the loop, vectors included (a vector was taken for
a number and refused by ``kd.normalize``)."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.func
def first_long_enough(a: kd.Array[kd.f32], threshold: kd.f32) -> kd.vec3:
    i = 0
    while True:
        w = kd.vec3(a[i], a[i + 1], a[i + 2])
        i += 3
        if kd.dot(w, w) > threshold or i + 3 > a.shape[0]:
            break
    return kd.normalize(w)


@kd.kernel
def rejection_sample(a: kd.Array[kd.f32], threshold: kd.f32):
    return first_long_enough(a, threshold)


@kd.kernel
def last_row_after_loops(m: kd.Array[kd.mat22], out: kd.Array[kd.vec2, 2]):
    for p in kd.prange(out.shape[0]):
        k = 0
        while k < m.shape[0]:
            row = m[k] @ kd.vec2(p, 1.0)
            k += 1
        for j in range(m.shape[0]):
            last = m[j]
            if last[0, 0] > 0.5:
                break
        out[p, 0] = row
        out[p, 1] = last[1]


def test_a_vector_assigned_in_while_true_is_read_after_it(rng):
    a = rng.standard_normal(30).astype(np.float32)
    for threshold in (0.5, 2.0, 100.0):
        check(rejection_sample, a, threshold, rtol=1e-6)
    w = a[:3]
    assert np.allclose(rejection_sample(a, 0.0), w / np.linalg.norm(w), rtol=1e-6)


def test_vectors_and_matrices_assigned_in_loops_are_read_after_them(rng):
    m = rng.uniform(0.0, 1.0, (4, 2, 2)).astype(np.float32)
    check(last_row_after_loops, m, np.zeros((6, 2, 2), np.float32), rtol=1e-6)

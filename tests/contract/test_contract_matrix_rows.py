"""Assigning a matrix row, ``m[r] = v`` (as NumPy, Warp and Taichi users write it), of a
local matrix or of an element of an array of matrices: ``r`` a constant or a run-time
index (negative from the end), ``v`` a vector of the row's size or one scalar."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source

import kdsl as kd


@kd.kernel
def rows_of_matrices(p: kd.Array[kd.vec3], F: kd.Array[kd.mat33], shift: kd.i64):
    for i in kd.prange(p.shape[0]):
        m = kd.mat33(0.0)
        for r in range(3):
            m[r] = p[(i + r) % p.shape[0]]
            m[r, r] += 1.0
        m[-1] = 0.5
        m[shift - 3] = m[shift - 3] * 2.0 + kd.vec3(1.0, 2.0, 3.0)
        F[i] = m @ F[i]
        F[i][shift] = p[i].zyx


@pytest.mark.parametrize("shift", [0, 2])
def test_matrix_rows_are_assigned_as_numpy(rng, shift):
    p = rng.random((7, 3)).astype(np.float32)
    F = rng.random((7, 3, 3)).astype(np.float32)
    check(rows_of_matrices, p, F, shift, rtol=1e-6)
    assert np.array_equal(F[:, shift], p[:, ::-1])


def test_a_row_of_the_wrong_size_is_a_located_error():
    kernel = kernel_from_source(
        "@kd.kernel\ndef k(a):\n    m = kd.mat33(0.0)\n    m[0] = kd.vec2(1.0, 2.0)\n"
        "    a[0] = m[0, 0]\n")
    with pytest.raises(kd.CompileError, match="a row of mat33 takes a vector of 3") as info:
        kernel(np.zeros(2, dtype=np.float32))
    assert "m[0] = kd.vec2(1.0, 2.0)" in str(info.value)

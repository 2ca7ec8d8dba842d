"""Bitwise operators on integer vectors, elementwise as NumPy: ``~iv`` (it was a
CompileError while ``&``, ``|``, ``^``, ``<<`` and ``>>`` worked), mixed with scalars."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def vector_bits(a: kd.Array[kd.ivec3], out: kd.Array[kd.ivec3]):
    for i in kd.prange(a.shape[0]):
        v = a[i]
        out[i] = (~v & 0xFF) ^ (v << 2) | (~(v >> 1))
    return ~a[0]


def test_bitwise_operators_on_integer_vectors_as_numpy(rng):
    a = rng.integers(-1000, 1000, size=(9, 3)).astype(np.int32)
    out = np.zeros_like(a)
    result = check(vector_bits, a, out)
    assert np.array_equal(out, ((~a & 0xFF) ^ (a << 2)) | ~(a >> 1))
    assert np.array_equal(result, ~a[0])

"""Angle conversions as Python and NumPy give them, bit for bit: ``math.radians`` and
``math.degrees`` (Python floats), ``np.radians``/``np.deg2rad`` and
``np.degrees``/``np.rad2deg`` in the operand's float type (float64 for integers), on
scalars, vectors and arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def angles(a, radians_out, degrees_out):
    for i in kd.prange(a.shape[0]):
        radians_out[i] = np.radians(a[i]) + np.deg2rad(a[i])
        degrees_out[i] = np.rad2deg(a[i]) - np.degrees(a[i] * 2)
    return math.radians(a[0]), math.degrees(a[1]), np.radians(a), np.degrees(a[:3])


@kd.kernel
def vector_angles(p: kd.Array[kd.vec3]):
    return np.radians(p[0]), np.rad2deg(p[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_angle_conversions_as_numpy(rng, dtype):
    a = (rng.uniform(-720, 720, size=41)).astype(dtype)
    result_dtype = np.float64 if dtype == np.int32 else dtype
    outs = [np.zeros(41, dtype=result_dtype) for _ in range(2)]
    result = check(angles, a, *outs)
    assert np.array_equal(outs[0], np.radians(a) * 2)
    assert result[2].dtype == result_dtype and isinstance(result[0], float)
    check(vector_angles, rng.uniform(-4, 4, size=(2, 3)).astype(np.float32))


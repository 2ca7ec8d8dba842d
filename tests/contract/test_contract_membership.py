"""``x in (1, 2, 3)`` and ``x not in OFFSETS`` over tuples and lists of numbers (written
in the kernel, local or global), as in Python and Numba; other right operands are a
located error."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source

import kdsl as kd

SPECIAL_CELLS = (0, 7, 13)
WEIGHTS = [0.5, 2.0]


@kd.kernel
def classify(cells: kd.Array[kd.i64], x: kd.Array[kd.f32], out: kd.Array[kd.i64]):
    for i in kd.prange(cells.shape[0]):
        c = cells[i]
        kinds = (2, 3, c - 1)
        code = 0
        if c in SPECIAL_CELLS:
            code += 1
        if c not in (1, 2, 4, 8):
            code += 10
        if c % 5 in kinds:
            code += 100
        if x[i] in WEIGHTS or x[i] in ():
            code += 1000
        out[i] = code + (c in [5, 6])


def test_membership_in_tuples_and_lists_as_python(rng):
    cells = rng.integers(-2, 16, size=200)
    x = rng.choice(np.array([0.5, 1.0, 2.0, 3.0], dtype=np.float32), size=200)
    out = np.zeros(200, dtype=np.int64)
    check(classify, cells, x, out)
    assert set(np.unique(out)) >= {0, 10, 11, 110, 1010}


def test_membership_in_an_array_is_a_located_error():
    kernel = kernel_from_source("@kd.kernel\ndef k(a, v):\n    return v in a\n")
    with pytest.raises(kd.CompileError, match="'in' in a kernel needs a tuple or list") as info:
        kernel(np.arange(3.0), 1.0)
    assert "return v in a" in str(info.value)

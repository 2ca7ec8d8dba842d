"""A Python int literal stored into an integer array, or into a local of an integer type,
that the type cannot hold is NumPy 2's OverflowError (``a[0] = 300`` with ``a`` uint8),
found while compiling as a located CompileError; compiled code wrapped it silently
(44) where ``kernel.python`` raised. Literals the type holds are stored as they are."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source

import kdsl as kd

OVERFLOWING = {
    "a store": ("    a[0] = 300\n", "a[0] = 300"),
    "a negative store": ("    a[1] = -1\n", "a[1] = -1"),
    "an augmented store": ("    a[0] += 256\n", "a[0] += 256"),
    "a local joined with the array's type": (
        "    s = 300\n    for i in range(a.shape[0]):\n        s += a[i]\n    a[0] = s\n",
        "s = 300"),
}


@pytest.mark.parametrize("case", sorted(OVERFLOWING))
def test_a_literal_the_integer_type_cannot_hold_is_an_overflow_error(case):
    body, line = OVERFLOWING[case]
    kernel = kernel_from_source(f"@kd.kernel\ndef k(a):\n{body}")
    a = np.array([200, 100, 50], dtype=np.uint8)
    with pytest.raises(kd.CompileError, match="out of bounds for uint8") as info:
        kernel(a)
    assert line in str(info.value) and isinstance(info.value, OverflowError)
    assert list(a) == [200, 100, 50]
    with pytest.raises(OverflowError):
        kernel.python(a.copy())


FITTING = """
@kd.kernel
def k(a, b):
    a[0] = 255
    a[1] = 0
    b[0] = -32768
    s = 7
    for i in range(a.shape[0]):
        s += a[i]
    b[1] = s
    b[2] = b[2] * 2 - 1
"""


def test_literals_the_type_holds_are_stored():
    kernel = kernel_from_source(FITTING)
    check(kernel, np.array([1, 2, 3], dtype=np.uint8), np.array([5, 6, 300], dtype=np.int16))

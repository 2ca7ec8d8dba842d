"""A kernel or func that returns a value on some paths must not reach its end without
one: Python would return None there, which compiled code cannot give (it gave 0, a valid
index for a search), so compiling it is a located error; every way of surely returning
still compiles."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source

import kdsl as kd

FIND_FIRST = """
@kd.kernel
def k(a, t):
    for i in kd.prange(a.shape[0]):
        if a[i] > t:
            return i
"""

FUNC_WITHOUT_ELSE = """
@kd.func
def sign_of(x):
    if x > 0:
        return 1.0
    elif x < 0:
        return -1.0

@kd.kernel
def k(a, t):
    return sign_of(a[0] - t)
"""


@pytest.mark.parametrize("source, line", [(FIND_FIRST, "for i in kd.prange(a.shape[0]):"),
                                          (FUNC_WITHOUT_ELSE, "if x > 0:")])
def test_a_value_returned_on_some_paths_only_is_a_located_error(source, line):
    kernel = kernel_from_source(source)
    with pytest.raises(kd.CompileError, match="returns a value on some paths but can reach "
                                              "its end without one") as info:
        kernel(np.array([0.5, 2.0]), 1.0)
    assert line in str(info.value)
    assert kernel.python(np.array([1.0, 0.7]), 1.0) is None  # what Python gives there


SURELY_RETURNING = """
@kd.func
def clamp_to_unit(x):
    if x > 1.0:
        return 1.0
    elif x < 0.0:
        return 0.0
    else:
        return x

@kd.func
def first_power_above(x):
    p = 1.0
    while True:
        if p > x:
            return p
        p *= 2.0

@kd.kernel
def k(a, t):
    for i in kd.prange(a.shape[0]):
        if a[i] > t:
            return i, clamp_to_unit(a[i]), first_power_above(a[i])
    return -1, 0.0, 0.0
"""


def test_functions_that_surely_return_compile(rng):
    kernel = kernel_from_source(SURELY_RETURNING)
    a = rng.uniform(-1.0, 3.0, size=50)
    check(kernel, a, 2.5)
    check(kernel, a, 5.0)

"""Conditional expressions whose branches are small enough to be computed both and
selected: the select must pick the branch the condition names, also when one branch is
the other plus something (the form rewritten to ``s + (c ? x : 0)``) and the common
term is a literal, which codegen sees as a new constant object at each use."""

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source, nonzero_floats

import kdsl as kd


@kd.kernel
def minus_one_or_shifted(c: kd.bool_, n: kd.i64):
    return -1 if c else -1 + n


@pytest.mark.parametrize("c,n,expected", [(False, 5, 4), (True, 5, -1), (False, -3, -4)])
def test_literal_common_term_is_not_taken_for_the_addend(c, n, expected):
    assert minus_one_or_shifted(c, n) == expected
    assert check(minus_one_or_shifted, c, n) == expected


@kd.kernel
def one_or_one_plus(x, out, h: kd.f64):
    for i in kd.prange(x.shape[0]):
        out[i] = 1.0 if x[i] > h else 1.0 + x[i]


def test_float_literal_common_term_in_a_parallel_loop(rng):
    x = nonzero_floats(rng, 64, np.float64)
    out = np.full(64, 9.0)
    check(one_or_one_plus, x, out, 0.5)
    np.testing.assert_array_equal(out, np.where(x > 0.5, 1.0, 1.0 + x))


@kd.kernel
def keeps_negative_zero(c: kd.bool_, x: kd.f64):
    return -0.0 if c else -0.0 + x


def test_not_taken_addend_keeps_the_sign_of_zero():
    assert np.signbit(keeps_negative_zero(True, 2.0))
    assert keeps_negative_zero(False, 2.0) == 2.0


_FORMS = [
    "a if c else a + b", "a + b if c else a", "b + a if c else a", "a if c else b + a",
    "3 if c else 3 + b", "3 + b if c else 3", "b + 3 if c else 3", "3 if c else b + 3",
    "a if c else a + 3", "a + 3 if c else a", "-2 if c else 5 + b", "b if c else b + b",
]


@pytest.mark.parametrize("form", _FORMS)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64, np.float32])
def test_every_form_of_conditional_accumulation(form, dtype, rng):
    k = kernel_from_source(f"""
        @kd.kernel
        def k(x, y, out, h):
            for i in kd.prange(x.shape[0]):
                a = x[i]
                b = y[i]
                c = x[i] > h
                out[i] = {form}
    """)
    x = (rng.integers(-20, 20, 48)).astype(dtype)
    y = (rng.integers(-20, 20, 48)).astype(dtype)
    y[y == 0] = 7
    out = np.zeros(48, dtype)
    check(k, x, y, out, 0)

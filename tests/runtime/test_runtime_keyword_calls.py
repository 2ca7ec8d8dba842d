"""Kernels and their gradients called with keyword arguments, as Python functions are."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def scaled_shift(a, out, scale: float = 2.0, shift: float = 0.5):
    for i in kd.prange(a.shape[0]):
        out[i] = a[i] * scale + shift


@kd.kernel
def weighted_energy(x, weight: float = 1.5):
    e = 0.0
    for i in kd.prange(x.shape[0]):
        e += weight * x[i] * x[i]
    return e


def reference(a, scale=2.0, shift=0.5):
    return a * scale + shift


@pytest.mark.parametrize("call", [
    lambda f, a, out: f(a, out, scale=3.0),
    lambda f, a, out: f(a, out, shift=-1.25),
    lambda f, a, out: f(out=out, a=a, shift=4.0, scale=-0.5),
    lambda f, a, out: f(a, out=out),
])
def test_keywords_bind_as_in_python(call):
    a = np.random.default_rng(3).uniform(-2.0, 2.0, 37)
    want = np.full_like(a, np.nan)
    call(scaled_shift.python, a, want)  # the kernel's own Python function
    for _ in range(2):  # the first call compiles; the second takes the compiled call path
        out = np.full_like(a, np.nan)
        call(scaled_shift, a, out)
        np.testing.assert_allclose(out, want, rtol=1e-15)
    scaled_shift(a, out)  # positional calls still take the defaults
    np.testing.assert_allclose(out, reference(a), rtol=1e-15)


def test_keyword_values_reach_the_kernel():
    a = np.linspace(-1.0, 1.0, 11)
    out = np.zeros_like(a)
    scaled_shift(a, out, shift=4.0, scale=-0.5)
    np.testing.assert_allclose(out, reference(a, scale=-0.5, shift=4.0))
    scaled_shift(a, out, 3.0, shift=1.0)
    np.testing.assert_allclose(out, reference(a, scale=3.0, shift=1.0))


@pytest.mark.parametrize("keywords, message", [
    ({"scal": 1.0}, "unexpected keyword argument 'scal'"),
    ({"a": np.ones(3)}, "multiple values for argument 'a'"),
])
def test_bad_keywords_are_type_errors_naming_them(keywords, message):
    a, out = np.ones(3), np.zeros(3)
    with pytest.raises(TypeError, match=message):
        scaled_shift(a, out, **keywords)


def test_missing_argument_is_a_type_error():
    with pytest.raises(TypeError, match="missing a required argument: 'out'"):
        scaled_shift(a=np.ones(3))


def test_gradient_takes_keywords():
    x = np.linspace(0.25, 2.0, 9)
    value = weighted_energy(x, weight=0.75)
    np.testing.assert_allclose(value, 0.75 * np.sum(x * x))
    grad = kd.grad(weighted_energy)(x, weight=0.75)
    np.testing.assert_allclose(grad, 2.0 * 0.75 * x)

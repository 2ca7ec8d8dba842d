"""A kernel's own Python function (``kernel.python``, the reference of its compiled
version) on temporaries made with kd.zeros_like and viewed as NumPy arrays are (API.md
section 7)."""

from __future__ import annotations

import numpy as np

import kdsl as kd


@kd.kernel
def reversed_transpose(a: kd.Array[kd.f64, 2]) -> kd.f64:
    t = kd.zeros_like(a)
    t[...] = a * 2.0
    u = t.T[::-1, :]  # t.T raised AttributeError in plain Python
    s = 0.0
    for i in range(u.shape[1]):
        s += u[0, i] * u[1, i]
    return kd.sum(u * u) + s


def test_a_transposed_temporary_in_plain_python(rng) -> None:
    a = rng.random((3, 4))
    u = (2.0 * a).T[::-1, :]
    expected = np.sum(u * u) + np.sum(u[0] * u[1])
    assert np.isclose(reversed_transpose.python(a), expected, rtol=1e-12)
    assert np.isclose(reversed_transpose(a), expected, rtol=1e-12)

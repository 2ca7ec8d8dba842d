"""API.md section 7 as NumPy users write it: reductions with axis and keepdims, views,
matrix products and dtype promotion, each result's values and dtype as NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def reductions_and_views(a, v):
    return (kd.sum(a), kd.sum(a, axis=0), kd.sum(a, axis=1, keepdims=True), kd.mean(a, axis=-1),
            kd.min(a, axis=0, keepdims=True), kd.max(a), kd.mean(a, keepdims=True),
            a[1:-1, ::-2] * 2, a.T @ v, v[:, None] - v[None, :], a[..., 1] + v[0])


def numpy_reductions_and_views(a, v):
    return (a.sum(), a.sum(0), a.sum(1, keepdims=True), a.mean(-1), a.min(0, keepdims=True),
            a.max(), a.mean(keepdims=True), a[1:-1, ::-2] * 2, a.T @ v, v[:, None] - v[None, :],
            a[..., 1] + v[0])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_reductions_views_and_promotion_as_numpy(rng, dtype) -> None:
    a = (rng.random((5, 4)) * 100).astype(dtype)
    v = (rng.random(5) * 10).astype(dtype)
    got = reductions_and_views(a, v)
    want = numpy_reductions_and_views(a, v)
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert np.asarray(g).dtype == w.dtype, (k, np.asarray(g).dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, err_msg=f"result {k}")


@kd.kernel
def over_two_axes(a):
    return kd.sum(a, axis=(0, 1))


def test_a_tuple_of_axes_is_a_located_error() -> None:
    with pytest.raises(kd.CompileError, match="axis must be one integer or None") as caught:
        over_two_axes(np.ones((2, 3)))
    assert caught.value.lineno == over_two_axes.py_function.__code__.co_firstlineno + 2

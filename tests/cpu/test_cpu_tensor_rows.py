"""Row-fused reductions (kdsl/ir/passes/tensor_rows.py): softmax, layer norm and
``x / kd.sum(x, axis=1, keepdims=True)`` become one parallel loop over the rows with no
temporary array; against NumPy and ``kernel.python``, including the cases that must keep
the general lowering (a value needed elsewhere, a write in between, an in-place update)."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import nonzero_floats, positive_floats
from kdsl_tensor_util import against_numpy, in_layout

import kdsl as kd


@kd.kernel
def softmax(x, out):
    m = kd.max(x, axis=1, keepdims=True)
    e = kd.exp(x - m)
    out[:] = e / kd.sum(e, axis=1, keepdims=True)


@kd.kernel
def layer_norm(x, gamma, beta, out):
    mu = kd.mean(x, axis=-1, keepdims=True)
    d = x - mu
    var = kd.mean(d * d, axis=-1, keepdims=True)
    out[:] = d / kd.sqrt(var + 1e-5) * gamma + beta


@kd.kernel
def normalise(x, out):
    out[:] = x / kd.sum(x, axis=1, keepdims=True)


@kd.kernel
def softmax_returning(x):
    e = kd.exp(x - kd.max(x, axis=1, keepdims=True))
    out = kd.empty(x.shape, dtype=kd.f32)
    out[:] = e / kd.sum(e, axis=1, keepdims=True)
    return out


def np_softmax(x, out):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    out[:] = e / np.sum(e, axis=1, keepdims=True)


def np_layer_norm(x, gamma, beta, out):
    d = x - np.mean(x, axis=-1, keepdims=True)
    out[:] = d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + 1e-5) * gamma + beta


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(37, 45), (5, 1), (1, 17), (64, 128)], ids=str)
def test_softmax_layer_norm_and_normalise(dtype, shape, rng):
    tol = dict(rtol=2e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    x = nonzero_floats(rng, shape, dtype) * 4
    against_numpy(softmax, (x, np.zeros(shape, dtype)), np_softmax, **tol)
    gamma, beta = nonzero_floats(rng, shape[1:], dtype), nonzero_floats(rng, shape[1:], dtype)
    against_numpy(layer_norm, (x, gamma, beta, np.zeros(shape, dtype)), np_layer_norm,
                  rtol=tol["rtol"] * 20, atol=tol["atol"] * 20)
    p = positive_floats(rng, shape, dtype)

    def np_normalise(x, out):
        out[:] = x / np.sum(x, axis=1, keepdims=True)

    against_numpy(normalise, (p, np.zeros(shape, dtype)), np_normalise, **tol)


def test_lowered_to_one_row_loop_without_temporaries(rng):
    x = nonzero_floats(rng, (8, 16), np.float32)
    for kernel, args in ((softmax, (x, x.copy())),
                         (layer_norm, (x, x[0].copy(), x[1].copy(), x.copy()))):
        text = kernel.ir(*args)
        assert "array_new" not in text
        assert text.count("parallel_for") == 2  # same-shape and broadcasting versions
    # e is stored in out's row by the sum's loop: one exp per element in the same-shape
    # version, two in the broadcasting one; 1 / sum once per row, then multiplications
    text = softmax.ir(x, x.copy())
    assert text.count(" exp ") == 3
    assert text.count(" div ") == 2


def test_row_reciprocal_is_not_folded_back_into_a_division(rng):
    # x * (1 / s) with 1 / s computed once per row: reassociation would make it x / s again,
    # a vector division per element (the slowest vector operation)
    from kdsl.codegen import cpu

    x = nonzero_floats(rng, (8, 64), np.float32)
    for kernel, args in ((softmax, (x, x.copy())),
                         (layer_norm, (x, x[0].copy(), x[1].copy(), x.copy()))):
        optimised = str(cpu.optimize(kernel.llvm_ir(*args)))
        assert not [line for line in optimised.splitlines() if "fdiv" in line and " x " in line]


@kd.kernel(fastmath=False)
def softmax_exact(x, out):
    e = kd.exp(x - kd.max(x, axis=1, keepdims=True))
    out[:] = e / kd.sum(e, axis=1, keepdims=True)


def test_without_fastmath_divisions_stay(rng):
    x = nonzero_floats(rng, (13, 40), np.float64) * 3
    against_numpy(softmax_exact, (x, np.zeros_like(x)), np_softmax, rtol=1e-14, atol=1e-16)
    assert softmax_exact.ir(x, x.copy()).count(" div ") == 2  # one per version


def test_layouts_broadcasting_and_three_axes(rng):
    for layout in ("transposed", "strided"):
        x = in_layout(lambda s: nonzero_floats(rng, s, np.float64), (9, 13), layout)
        against_numpy(softmax, (x, np.zeros((9, 13))), np_softmax, rtol=1e-12, atol=1e-14)
    x = nonzero_floats(rng, (3, 4, 10), np.float64)
    gamma, beta = nonzero_floats(rng, 10, np.float64), nonzero_floats(rng, (4, 1), np.float64)
    against_numpy(layer_norm, (x, gamma, beta, np.zeros((3, 4, 10))), np_layer_norm,
                  rtol=1e-11, atol=1e-12)
    one_row = nonzero_floats(rng, (1, 6), np.float64)  # broadcast over the destination
    against_numpy(normalise, (one_row, np.zeros((5, 6))),
                  lambda x, out: out.__setitem__(slice(None), x / np.sum(x, axis=1, keepdims=True)),
                  rtol=1e-13)


def test_returned_array(rng):
    x = nonzero_floats(rng, (6, 33), np.float32)
    got = softmax_returning(x)
    want = np.zeros_like(x)
    np_softmax(x.astype(np.float64), want)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7)


@kd.kernel
def shared_value(x, out, rows):
    e = kd.exp(x - kd.max(x, axis=1, keepdims=True))
    s = kd.sum(e, axis=1, keepdims=True)
    out[:] = e / s
    rows[:] = s  # s is needed here too: lowered on its own
    return e  # and e here


@kd.kernel
def write_in_between(x, out):
    s = kd.sum(x, axis=1, keepdims=True)
    x[0, 0] = 100.0  # s was computed before this write
    out[:] = x / s


@kd.kernel
def in_place(x):
    x[:] = x / kd.sum(x, axis=1, keepdims=True)


def test_values_used_elsewhere_writes_in_between_and_in_place(rng):
    x = nonzero_floats(rng, (7, 9), np.float64)

    def np_shared(x, out, rows):
        e = np.exp(x - np.max(x, axis=1, keepdims=True))
        s = np.sum(e, axis=1, keepdims=True)
        out[:] = e / s
        rows[:] = s
        return e

    against_numpy(shared_value, (x, np.zeros((7, 9)), np.zeros((7, 1))), np_shared, rtol=1e-13)

    def np_write(x, out):
        s = np.sum(x, axis=1, keepdims=True)
        x[0, 0] = 100.0
        out[:] = x / s

    against_numpy(write_in_between, (x.copy(), np.zeros((7, 9))), np_write, rtol=1e-13)

    def np_in_place(x):
        x[:] = x / np.sum(x, axis=1, keepdims=True)

    against_numpy(in_place, (positive_floats(rng, (7, 9), np.float64),), np_in_place, rtol=1e-13)


def test_empty_rows_and_columns():
    against_numpy(normalise, (np.zeros((0, 4)), np.zeros((0, 4))), lambda x, out: None)
    with pytest.raises(ValueError, match="zero-size"):
        softmax(np.zeros((3, 0), np.float32), np.zeros((3, 0), np.float32))


def test_shape_mismatch_is_a_value_error():
    with pytest.raises(ValueError):
        softmax(np.ones((3, 4), np.float32), np.zeros((3, 5), np.float32))


@kd.kernel
def softmax_expression_returned(x):
    e = kd.exp(x - kd.max(x, axis=1, keepdims=True))
    return e / kd.sum(e, axis=1, keepdims=True)


@kd.kernel
def layer_norm_returned(x, gamma, beta):
    d = x - kd.mean(x, axis=1, keepdims=True)
    return d / kd.sqrt(kd.mean(d * d, axis=1, keepdims=True) + 1e-5) * gamma + beta


def test_returned_expressions_are_row_fused(rng):
    x = nonzero_floats(rng, (11, 19), np.float64) * 3
    gamma, beta = nonzero_floats(rng, 19, np.float64), nonzero_floats(rng, 19, np.float64)
    want = np.zeros_like(x)
    np_softmax(x, want)
    np.testing.assert_allclose(softmax_expression_returned(x), want, rtol=1e-13)
    np_layer_norm(x, gamma, beta, want)
    np.testing.assert_allclose(layer_norm_returned(x, gamma, beta), want, rtol=1e-11, atol=1e-12)
    for kernel, args in ((softmax_expression_returned, (x,)),
                         (layer_norm_returned, (x, gamma, beta))):
        text = kernel.ir(*args)
        assert text.count("array_new") == 1  # the result only
        assert text.count("parallel_for") == 2

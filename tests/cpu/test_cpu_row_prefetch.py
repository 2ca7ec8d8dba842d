"""The prefetch of the next row in row-fused tensor assignments (kdsl/codegen/row_prefetch.py):
the forms that take it, and results against NumPy and ``kernel.python`` where its
addresses leave the row (the last row, rows longer than it covers, negative and non-unit
strides, rows along several axes), plus the golden form of layer norm's row loop."""

from __future__ import annotations

import platform
import re

import numpy as np
import pytest
from kdsl_cpu_util import nonzero_floats
from kdsl_tensor_util import against_numpy, in_layout

import kdsl as kd
from kdsl.codegen import cpu
from kdsl.codegen.row_prefetch import PREFETCH_MAX_BYTES


@kd.kernel
def layer_norm(x, gamma, beta, out):
    d = x - kd.mean(x, axis=-1, keepdims=True)
    out[:] = d / kd.sqrt(kd.mean(d * d, axis=-1, keepdims=True) + 1e-5) * gamma + beta


@kd.kernel
def layer_norm_returned(x, gamma, beta):
    d = x - kd.mean(x, axis=-1, keepdims=True)
    return d / kd.sqrt(kd.mean(d * d, axis=-1, keepdims=True) + 1e-5) * gamma + beta


@kd.kernel
def softmax(x, out):
    e = kd.exp(x - kd.max(x, axis=-1, keepdims=True))
    out[:] = e / kd.sum(e, axis=-1, keepdims=True)


@kd.kernel
def scale(x, out):
    out[:] = x * 2.0


def np_layer_norm(x, gamma, beta, out=None):
    d = x - np.mean(x, axis=-1, keepdims=True)
    result = d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + 1e-5) * gamma + beta
    if out is None:
        return result
    out[:] = result


def np_softmax(x, out):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    out[:] = e / np.sum(e, axis=-1, keepdims=True)


def _tolerance(dtype) -> dict[str, float]:
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("layout, dtype", [
    ("C", np.float32), ("reversed", np.float32), ("strided", np.float32),
    ("transposed", np.float32), ("C", np.float64), ("reversed", np.float64),
], ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_layouts_against_numpy(layout, dtype, rng):
    shape = (23, 517)  # rows not a multiple of the vector width nor of a cache line
    x = in_layout(lambda s: nonzero_floats(rng, s, dtype) * 3 + 1, shape, layout)
    gamma, beta = nonzero_floats(rng, shape[1], dtype), nonzero_floats(rng, shape[1], dtype)
    against_numpy(layer_norm, (x, gamma, beta, np.zeros(shape, dtype)), np_layer_norm,
                  **_tolerance(dtype))
    against_numpy(softmax, (x, np.zeros(shape, dtype)), np_softmax, **_tolerance(dtype))


def test_rows_longer_than_the_prefetch_and_along_three_axes(rng):
    cols = PREFETCH_MAX_BYTES // 4 + 37  # f32: past what one row's prefetch covers
    x = nonzero_floats(rng, (5, cols), np.float32) * 2 + 3
    gamma, beta = nonzero_floats(rng, cols, np.float32), nonzero_floats(rng, cols, np.float32)
    against_numpy(layer_norm, (x, gamma, beta, np.zeros_like(x)), np_layer_norm, rtol=1e-4,
                  atol=1e-4)
    # the next row of the last row of a plane is the first row of the next plane (and
    # past the array's end for the very last one): a prefetch there does nothing
    x3 = nonzero_floats(rng, (3, 4, 129), np.float64)
    gamma, beta = nonzero_floats(rng, 129, np.float64), nonzero_floats(rng, 129, np.float64)
    against_numpy(layer_norm, (x3, gamma, beta, np.zeros_like(x3)), np_layer_norm, rtol=1e-11,
                  atol=1e-11)
    np.testing.assert_allclose(layer_norm_returned(x3, gamma, beta), np_layer_norm(x3, gamma, beta),
                               rtol=1e-11, atol=1e-11)


def test_one_row_and_a_view_ending_at_its_buffer(rng):
    x = nonzero_floats(rng, (1, 300), np.float32)
    gamma, beta = nonzero_floats(rng, 300, np.float32), nonzero_floats(rng, 300, np.float32)
    against_numpy(layer_norm, (x, gamma, beta, np.zeros_like(x)), np_layer_norm, rtol=1e-4,
                  atol=1e-4)
    big = nonzero_floats(rng, (40, 300), np.float32)
    tail = big[-7:]  # its next row past the last is past the whole buffer
    np.testing.assert_allclose(layer_norm_returned(tail, gamma, beta),
                               np_layer_norm(tail.astype(np.float64), gamma, beta),
                               rtol=1e-4, atol=1e-4)


def test_forms_that_prefetch(rng):
    x = nonzero_floats(rng, (8, 64), np.float32)
    gamma, beta = x[0].copy(), x[1].copy()
    # the same-shape version's row loop (not the broadcasting one, nor plain elementwise)
    assert layer_norm.ir(x, gamma, beta, x.copy()).count("prefetch_next_row = True") == 1
    assert softmax.ir(x, x.copy()).count("prefetch_next_row = True") == 1
    assert layer_norm_returned.ir(x, gamma, beta).count("prefetch_next_row = True") == 1
    assert "prefetch_next_row" not in scale.ir(x, x.copy())
    optimised = str(cpu.optimize(layer_norm.llvm_ir(x, gamma, beta, x.copy())))
    calls = re.findall(r"call void @llvm\.prefetch\.p0\(ptr [^,]+, i32 0, i32 3, i32 1\)",
                       optimised)
    on_x86 = platform.machine().lower() in ("x86_64", "amd64")
    assert len(calls) == (1 if on_x86 else 0)  # x only: gamma and beta are the same each row
    # softmax's last loop rescales out in place: the array it writes is not prefetched
    optimised = str(cpu.optimize(softmax.llvm_ir(x, x.copy())))
    assert "@llvm.prefetch" not in optimised


def test_golden_layer_norm_row_loop(rng):
    """Layer norm's chosen form: per row, one pass for the mean and the sum of squares
    (a second pass about the mean only when the shift was far off), then one loop that
    prefetches the next row and writes the row (streaming stores where large)."""
    x = nonzero_floats(rng, (8, 64), np.float32)
    text = layer_norm.ir(x, x[0].copy(), x[1].copy(), x.copy())
    direct = text[text.index("parallel_for"):text.index("parallel_for", text.index("parallel_for") + 1)]
    loops = re.findall(r"^\s*(?:%[\w, %]+ = )?for .*$", direct, re.M)
    assert len(loops) == 3, loops
    moments, squares, store = loops
    assert re.search(r"= for [^:]* : f32, f32 \(", moments), moments  # two sums at once
    assert re.search(r"= for .* : f32 \(", squares), squares
    assert "{prefetch_next_row = True, stream_stores = True}" in store, store
    assert direct.count("array_load %x") == 8 + 3  # the shift's 8 samples, then 3 loops
    assert "array_new" not in text

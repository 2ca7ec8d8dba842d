"""Streaming (non-temporal) stores of a row-fused assignment to a large destination
(kdsl/codegen/streaming_stores.py): results against NumPy for destinations large enough to
take them (odd row lengths, rows not a multiple of the vector width, a destination that
starts off a line boundary, a strided one that must not take them, short rows), nothing
written outside the destination, and the forms that take them and those that do not."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kdsl_cpu_util import nonzero_floats, positive_floats

import kdsl as kd
from kdsl.codegen import cpu
from kdsl.codegen.streaming_stores import STREAM_MIN_BYTES, mark_streaming_stores


@kd.kernel
def layer_norm(x, gamma, beta, out):
    d = x - kd.mean(x, axis=1, keepdims=True)
    out[:] = d / kd.sqrt(kd.mean(d * d, axis=1, keepdims=True) + 1e-5) * gamma + beta


@kd.kernel
def layer_norm_returned(x, gamma, beta):
    d = x - kd.mean(x, axis=1, keepdims=True)
    return d / kd.sqrt(kd.mean(d * d, axis=1, keepdims=True) + 1e-5) * gamma + beta


@kd.kernel
def normalise(x, out):
    out[:] = x / kd.sum(x, axis=1, keepdims=True)


@kd.kernel
def softmax(x, out):
    e = kd.exp(x - kd.max(x, axis=1, keepdims=True))
    out[:] = e / kd.sum(e, axis=1, keepdims=True)


@kd.kernel
def scale(x, out):
    out[:] = x * 2.0


def np_layer_norm(x, gamma, beta):
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(axis=1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * gamma + beta


def _rows_for(cols: int, dtype: type) -> int:
    """Enough rows of ``cols`` elements for the destination to take streaming stores."""
    return -(-STREAM_MIN_BYTES // (cols * np.dtype(dtype).itemsize)) + 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("cols, offset", [(1031, 1), (1024, 0), (1024, 3), (161, 5)],
                         ids=lambda v: str(v))
def test_large_destination_against_numpy(dtype, cols, offset, rng):
    rows = _rows_for(cols, dtype)
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(dtype)
    gamma, beta = nonzero_floats(rng, cols, dtype), nonzero_floats(rng, cols, dtype)
    want = np_layer_norm(x, gamma, beta)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    # the destination starts ``offset`` elements past the allocation: off a line boundary,
    # and so is every row when the row length is odd; the sentinels around it stay put
    sentinel = dtype(-7.5)
    storage = np.full((rows, cols + offset + 5), sentinel, dtype)
    out = storage[:, offset:offset + cols]
    layer_norm(x, gamma, beta, out)
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    assert (storage[:, :offset] == sentinel).all() and (storage[:, offset + cols:] == sentinel).all()
    np.testing.assert_allclose(layer_norm_returned(x, gamma, beta), want, rtol=tol, atol=tol)


def test_strided_and_short_rows_keep_plain_stores_and_agree(rng):
    x = nonzero_floats(rng, (_rows_for(1000, np.float32), 1000), np.float32)
    gamma, beta = nonzero_floats(rng, 1000, np.float32), nonzero_floats(rng, 1000, np.float32)
    strided = np.zeros((x.shape[0], 2000), np.float32)
    layer_norm(x, gamma, beta, strided[:, ::2])
    np.testing.assert_allclose(strided[:, ::2], np_layer_norm(x, gamma, beta), rtol=1e-4, atol=1e-4)
    assert (strided[:, 1::2] == 0).all()
    short = positive_floats(rng, (_rows_for(21, np.float32), 21), np.float32)
    out = np.zeros_like(short)
    normalise(short, out)
    np.testing.assert_allclose(out, short / short.astype(np.float64).sum(axis=1, keepdims=True),
                               rtol=1e-5)


def test_small_destination_against_numpy(rng):
    x = nonzero_floats(rng, (37, 300), np.float64)
    gamma, beta = nonzero_floats(rng, 300, np.float64), nonzero_floats(rng, 300, np.float64)
    out = np.zeros_like(x)
    layer_norm(x, gamma, beta, out)
    np.testing.assert_allclose(out, np_layer_norm(x, gamma, beta), rtol=1e-10, atol=1e-10)
    expected = np.zeros_like(x)
    layer_norm.python(x, gamma, beta, expected)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)


def _nontemporal_stores(kernel, *args) -> list[str]:
    optimised = str(cpu.optimize(kernel.llvm_ir(*args)))
    return [line.strip() for line in optimised.splitlines() if "!nontemporal" in line]


def test_streaming_form_only_where_it_pays(rng):
    x = nonzero_floats(rng, (8, 64), np.float32)
    gamma, beta = x[0].copy(), x[1].copy()
    # the same-shape version of the row loop that writes its destination once
    assert layer_norm.ir(x, gamma, beta, x.copy()).count("stream_stores = True") == 1
    assert normalise.ir(x, x.copy()).count("stream_stores = True") == 1
    # softmax writes exp(x - max) into the destination's row and reads it back: plain
    assert "stream_stores" not in softmax.ir(x, x.copy())
    assert "stream_stores" not in scale.ir(x, x.copy())
    stores = _nontemporal_stores(layer_norm, x, gamma, beta, x.copy())
    vector = [s for s in stores if s.startswith("store <")]
    assert vector, stores
    for line in stores:  # never an under-aligned one (x86 faults on those)
        lanes, kind, align = re.match(
            r"store (?:<(\d+) x )?(float|double)>? .*, align (\d+)", line).groups()
        assert int(align) >= int(lanes or 1) * (4 if kind == "float" else 8), line
    assert not _nontemporal_stores(softmax, x, x.copy())
    assert not _nontemporal_stores(scale, x, x.copy())


_TAGGED = """\
define void @f(ptr %p, ptr %q, <16 x float> %v) {
  store <16 x float> %v, ptr %p, align 64, !alias.scope !0
  store <16 x float> %v, ptr %q, align 4, !alias.scope !0
  store float 1.0, ptr %q, align 4, !alias.scope !0
  store <16 x float> %v, ptr %q, align 64
  ret void
}
!0 = !{!1}
!1 = !{!"kdsl.stream.scope", !2}
!2 = !{!"kdsl.stream"}
"""


def test_only_tagged_stores_aligned_to_their_size_are_marked():
    lines = mark_streaming_stores(_TAGGED).splitlines()
    assert lines[1].endswith("align 64, !nontemporal !3, !alias.scope !0")
    assert "!nontemporal" not in lines[2]  # under-aligned vector store
    assert lines[3].endswith("align 4, !nontemporal !3, !alias.scope !0")
    assert "!nontemporal" not in lines[4]  # not tagged
    assert lines[-1] == "!3 = !{i32 1}"
    assert mark_streaming_stores(_TAGGED.replace("kdsl.stream", "other")) == \
        _TAGGED.replace("kdsl.stream", "other")

"""kd.searchsorted into a CUDA array, as np.searchsorted: the result has v's shape (an
int64 for a scalar v), and both sides are compared in NumPy's common type of the two."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@pytest.mark.parametrize("side", ["left", "right"])
def test_result_has_the_shape_of_v(emulated_device, side):
    rng = np.random.default_rng(5)
    a = np.sort(rng.normal(size=300).astype(np.float32))
    a[-7:] = np.nan
    v = rng.normal(size=(4, 5)).astype(np.float32)
    v[0, :3] = [np.nan, -0.0, np.inf]
    d_a = kd.array(a, device="cuda")
    for values, host in ((v, v), (kd.array(v, device="cuda"), v), (v[1], v[1])):
        found = kd.searchsorted(d_a, values, side=side)
        assert found.device == "cuda" and found.dtype == np.int64
        np.testing.assert_array_equal(found.numpy(), np.searchsorted(a, host, side=side))
    scalar = kd.searchsorted(d_a, np.float32(0.25), side=side)
    assert isinstance(scalar, np.int64) and scalar == np.searchsorted(a, np.float32(0.25), side=side)


def test_values_are_promoted_not_truncated(emulated_device):
    a = np.arange(-5, 10, dtype=np.int32)
    d_a = kd.array(a, device="cuda")
    v = np.array([2.5, -1.5, 9.5, 100.25, -7.0])
    for side in ("left", "right"):
        expected = np.searchsorted(a, v, side=side)
        np.testing.assert_array_equal(kd.searchsorted(d_a, v, side=side).numpy(), expected)
        on_device = kd.array(v, device="cuda")
        np.testing.assert_array_equal(kd.searchsorted(d_a, on_device, side=side).numpy(), expected)
        assert kd.searchsorted(d_a, 2.5, side=side) == np.searchsorted(a, 2.5, side=side)
    floats = kd.array(np.array([0.5, 1.5, 2.5]), device="cuda")
    ints = kd.array(np.array([1, 2, 3], np.int64), device="cuda")
    np.testing.assert_array_equal(kd.searchsorted(floats, ints).numpy(), [1, 2, 3])


def test_host_and_cuda_arrays_mixed_are_a_value_error_naming_them(emulated_device):
    on_device = kd.array(np.array([3.0, 1.0, 2.0]), device="cuda")
    host = np.array([3.0, 1.0, 2.0])
    calls = [
        (lambda: kd.argsort(on_device, out=np.zeros(3, np.int64)), "'keys' on cuda, 'out' on the cpu"),
        (lambda: kd.argsort(host, out=kd.zeros(3, kd.i64, device="cuda")), "'out' on cuda"),
        (lambda: kd.sort_by_key(host, on_device), "'keys' on the cpu, 'values' on cuda"),
        (lambda: kd.segment_sum(on_device, host), "'values' on the cpu"),
        (lambda: kd.searchsorted(np.sort(host), on_device), "'a' on the cpu, 'v' on cuda"),
    ]
    for call, words in calls:
        with pytest.raises(ValueError, match="arrays on different devices: .*" + words):
            call()
    assert host.tolist() == [3.0, 1.0, 2.0]

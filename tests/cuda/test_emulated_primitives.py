"""The parallel primitives called from Python on CUDA arrays, run on the emulated device
(or a GPU), against NumPy."""

from __future__ import annotations

import numpy as np

import kdsl as kd


def test_primitives_on_cuda_arrays(emulated_device):
    rng = np.random.default_rng(17)
    keys = rng.standard_normal(3000).astype(np.float32)
    keys[::9] = np.nan
    ints = rng.integers(-50, 50, 3000).astype(np.int32)
    values = rng.standard_normal(3000)

    d_keys = kd.array(keys, device="cuda")
    np.testing.assert_array_equal(kd.argsort(d_keys).numpy(), np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(kd.cumsum(kd.array(ints, device="cuda")).numpy(),
                                  np.cumsum(ints))
    exclusive = kd.cumsum(kd.array(ints.reshape(30, 100), device="cuda"), exclusive=True)
    np.testing.assert_array_equal(exclusive.numpy()[1:], np.cumsum(ints)[:-1])

    kd.sort(d_keys)
    np.testing.assert_array_equal(d_keys.numpy(), np.sort(keys))
    found = kd.searchsorted(d_keys, np.array([0.0, np.nan, -1.0], np.float32), side="right")
    np.testing.assert_array_equal(found.numpy(), np.searchsorted(
        np.sort(keys), np.array([0.0, np.nan, -1.0], np.float32), side="right"))

    d_ints, d_values = kd.array(ints, device="cuda"), kd.array(values, device="cuda")
    kd.sort_by_key(d_ints, d_values)
    order = np.argsort(ints, kind="stable")
    np.testing.assert_array_equal(d_ints.numpy(), ints[order])
    np.testing.assert_array_equal(d_values.numpy(), values[order])
    unique, sums = kd.segment_sum(d_ints, d_values)
    expected_keys, starts = np.unique(ints[order], return_index=True)
    np.testing.assert_array_equal(unique.numpy(), expected_keys)
    np.testing.assert_allclose(sums.numpy(), np.add.reduceat(values[order], starts), rtol=1e-12)

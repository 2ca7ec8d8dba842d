"""CUDA kernels run end to end on kdsl's emulated device (the NVVM IR of the device
kernels compiled for the CPU): what the differential tests in tests/cpu do not reach.
Every result is compared with the CPU backend or NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


def on_device(*arrays):
    return [kd.array(a, device="cuda") for a in arrays]


@kd.kernel
def total_and_extremes(x: kd.Array[kd.f64]):
    s = 0.0
    lo = 1e300
    hi = -1e300
    for i in kd.prange(x.shape[0]):
        s += x[i]
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    return s, lo, hi


@pytest.mark.parametrize("n", [1, 255, 257, 300_000])  # 300k: more blocks than a launch has
def test_reductions_over_any_number_of_blocks(emulated_device, n):
    x = np.random.default_rng(n).normal(size=n)
    (dx,) = on_device(x)
    s, lo, hi = total_and_extremes(dx)
    assert s == pytest.approx(x.sum(), rel=1e-12, abs=1e-9)
    assert (lo, hi) == (x.min(), x.max())


@kd.kernel
def row_sums_2d(a: kd.Array[kd.i32, 2]):
    total = 0
    count = 0
    for i, j in kd.ndrange(a.shape[0], a.shape[1]):
        total += a[i, j]
        if a[i, j] > 0:
            count += 1
    return total, count


def test_two_dimensional_reduction_with_many_rows(emulated_device):
    a = np.random.default_rng(1).integers(-100, 100, size=(700, 5)).astype(np.int32)
    (da,) = on_device(a)
    assert row_sums_2d(da) == (int(a.sum()), int((a > 0).sum()))


@kd.kernel
def any_all(x: kd.Array[kd.f32]):
    found = False
    every = True
    for i in kd.prange(x.shape[0]):
        found = max(found, x[i] > 3.5)
        every = min(every, x[i] > -10.0)
    return found, every


def test_boolean_reductions(emulated_device):
    x = np.linspace(-2, 3, 1000, dtype=np.float32)
    (dx,) = on_device(x)
    assert any_all(dx) == (False, True)
    x[777] = 4.0
    (dx,) = on_device(x)
    assert any_all(dx) == (True, True)


@kd.kernel
def float_extremes_by_bin(v: kd.Array[kd.f32], bins: kd.Array[kd.i64], lo: kd.Array[kd.f32],
                          hi: kd.Array[kd.f32], total: kd.Array[kd.f64]):
    for i in kd.prange(v.shape[0]):
        kd.atomic_min(lo, bins[i], v[i])
        kd.atomic_max(hi, bins[i], v[i])
        total[bins[i]] += kd.f64(v[i])


def test_float_atomics(emulated_device):
    rng = np.random.default_rng(7)
    v = rng.normal(size=5000).astype(np.float32)
    bins = rng.integers(0, 6, 5000)
    lo, hi, total = np.full(6, np.inf, np.float32), np.full(6, -np.inf, np.float32), np.zeros(6)
    device = on_device(v, bins, lo, hi, total)
    float_extremes_by_bin(*device)
    for b in range(6):
        assert device[2].numpy()[b] == v[bins == b].min()
        assert device[3].numpy()[b] == v[bins == b].max()
        assert device[4].numpy()[b] == pytest.approx(v[bins == b].astype(np.float64).sum(), rel=1e-12)


@kd.kernel
def heat(u: kd.Array[kd.f64, 2], tmp: kd.Array[kd.f64, 2], steps: int, alpha: float):
    """A whole simulation in one call: a serial time loop around parallel loops."""
    for _ in range(steps):
        for i, j in kd.ndrange(u.shape[0] - 2, u.shape[1] - 2):
            tmp[i + 1, j + 1] = u[i + 1, j + 1] + alpha * (
                u[i, j + 1] + u[i + 2, j + 1] + u[i + 1, j] + u[i + 1, j + 2] - 4.0 * u[i + 1, j + 1])
        u, tmp = tmp, u
    energy = 0.0
    for i, j in kd.ndrange(u.shape[0], u.shape[1]):
        energy += u[i, j] * u[i, j]
    return energy


def test_time_loop_matches_the_cpu(emulated_device):
    u = np.zeros((40, 70))
    u[10:20, 30:50] = np.random.default_rng(3).uniform(1, 2, size=(10, 20))
    cpu_u, cpu_tmp = u.copy(), u.copy()
    expected = heat(cpu_u, cpu_tmp, 25, 0.2)
    du, dtmp = on_device(u, u)
    assert heat(du, dtmp, 25, 0.2) == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(du.numpy(), cpu_u, rtol=1e-12)


@kd.kernel
def local_arrays(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        window = kd.zeros(3, kd.f32)  # made in device code: the device heap
        for k in range(3):
            window[k] = x[min(i + k, x.shape[0] - 1)]
        out[i] = window[0] + 2.0 * window[1] + window[2]


def test_arrays_made_inside_device_code(emulated_device):
    x = np.arange(600, dtype=np.float32)
    out = np.zeros_like(x)
    local_arrays(x, out)
    dx, dout = on_device(x, np.zeros_like(x))
    local_arrays(dx, dout)
    np.testing.assert_array_equal(dout.numpy(), out)


@kd.kernel
def scaled_copy(x: kd.Array[kd.f32], s: float):
    y = kd.empty(x.shape[0], kd.f32)
    for i in kd.prange(x.shape[0]):
        y[i] = s * x[i]
    return y, x[1:]


def test_returned_arrays_stay_on_the_device(emulated_device):
    x = np.arange(10, dtype=np.float32)
    (dx,) = on_device(x)
    y, tail = scaled_copy(dx, 3.0)
    assert y.device == "cuda" and tail.device == "cuda"
    np.testing.assert_array_equal(y.numpy(), 3 * x)
    np.testing.assert_array_equal(tail.numpy(), x[1:])


@kd.kernel(debug=True)
def gather(x: kd.Array[kd.f32], idx: kd.Array[kd.i64], out: kd.Array[kd.f32]):
    for i in kd.prange(idx.shape[0]):
        out[i] = x[idx[i]]


def test_device_bounds_errors_name_the_line(emulated_device):
    x, idx = np.arange(10, dtype=np.float32), np.arange(100) % 10
    idx[57] = 10
    dx, didx, dout = on_device(x, idx, np.zeros(100, np.float32))
    with pytest.raises(IndexError, match=r"index 10 is out of bounds .* size 10"):
        gather(dx, didx, dout)
    idx[57] = 3
    dx, didx, dout = on_device(x, idx, np.zeros(100, np.float32))
    gather(dx, didx, dout)  # the device is usable after the error
    np.testing.assert_array_equal(dout.numpy(), x[idx])


@kd.kernel
def shout(x: kd.Array[kd.i64]):
    for i in kd.prange(x.shape[0]):
        if x[i] == 3:
            print("found", x[i], "at", i, kd.f64(x[i]) / 2.0, x[i] > 2)


def test_print_in_device_code(emulated_device, capsys):
    (dx,) = on_device(np.arange(5))
    shout(dx)
    assert capsys.readouterr().out == "found 3 at 3 1.5 True\n"


@kd.kernel
def shout_with_separator(x: kd.Array[kd.i64]):
    for i in kd.prange(x.shape[0]):
        if x[i] == 3:
            print("found", x[i], i, sep="|")


def test_print_sep_in_device_code(emulated_device, capsys):
    (dx,) = on_device(np.arange(5))
    shout_with_separator(dx)
    assert capsys.readouterr().out == "found|3|3\n"


def test_device_name_says_emulated(emulated_device):
    assert "emulator" in emulated_device.device_name()
    assert emulated_device.launch_count >= 0

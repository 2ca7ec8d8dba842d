"""The host side of CUDA kernels, against a fake driver (see conftest.py): which device
kernels launch, in what order and on what grids; how block partials, serial results and
device errors come back; what bad input raises. No PTX runs here."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import kdsl as kd
from kdsl.codegen import nvvm
from kdsl.codegen.abi import ErrorCode

try:
    nvvm.nvvm_version()
    HAVE_NVVM = True
except nvvm.NvvmUnavailable:
    HAVE_NVVM = False

pytestmark = pytest.mark.skipif(not HAVE_NVVM, reason="libNVVM or cuda-python not installed")
rng = np.random.default_rng(11)


def write_slots(address: int, values: list, dtype) -> None:
    data = np.asarray(values, dtype=dtype)
    slots = np.zeros(len(values), np.int64)
    slots.view(np.uint8).reshape(len(values), 8)[:, :data.itemsize] = \
        data.view(np.uint8).reshape(len(values), data.itemsize)
    ctypes.memmove(address, slots.ctypes.data, slots.nbytes)


@kd.kernel
def steps(x: kd.Array[kd.f32], n: int):
    for _ in range(n):
        for i in kd.prange(x.shape[0]):
            x[i] = x[i] * 0.5
        for i in kd.prange(x.shape[0] // 2):
            x[i] += 1.0


def test_a_serial_loop_launches_its_parallel_loops_in_order(fake_driver):
    x = kd.array(rng.random(1000).astype(np.float32), device="cuda")
    steps(x, 3)
    names = [launch.name for launch in fake_driver.launches]
    assert len(names) == 6
    assert names[0::2] == [names[0]] * 3 and names[1::2] == [names[1]] * 3
    assert names[0] != names[1]
    first, second = fake_driver.launches[0], fake_driver.launches[1]
    assert first.block == 256 and first.grid == (4, 1)  # ceil(1000 / 256) blocks
    assert second.grid == (2, 1)  # ceil(500 / 256)
    assert first.parameter(2, ctypes.c_int64) == 1000  # the extent


@kd.kernel
def total(x: kd.Array[kd.f64]):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i]
    return s


@pytest.mark.parametrize("n", [1000, 1 << 20])
def test_block_partials_are_combined_on_the_host(fake_driver, n):
    def partials(launch):  # block b's partial is b + 1
        blocks = launch.grid[0] * launch.grid[1]
        write_slots(launch.parameter(1), [b + 1.0 for b in range(blocks)], np.float64)
        return 0

    fake_driver.effects["parallel"] = partials
    x = kd.array(rng.random(n), device="cuda")
    result = total(x)
    blocks = fake_driver.launches[-1].grid[0]
    assert blocks == min((n + 255) // 256, 1024)  # at most 1024 partials per launch
    assert result == blocks * (blocks + 1) / 2


@kd.kernel
def extremes(x: kd.Array[kd.i32, 2]):
    lo = 1 << 30
    count = 0
    for i, j in kd.ndrange(x.shape[0], x.shape[1]):
        lo = min(lo, x[i, j])
        count += 1
    return lo, count


def test_two_dimensional_reductions_use_both_grid_axes(fake_driver):
    def partials(launch):
        blocks = launch.grid[0] * launch.grid[1]
        values = []
        for b in range(blocks):
            values += [100 - b, 2]  # (min, count) per block
        write_slots(launch.parameter(1), values, np.int64)
        return 0

    fake_driver.effects["parallel"] = partials
    x = kd.array(rng.integers(0, 50, (300, 700)).astype(np.int32), device="cuda")
    lo, count = extremes(x)
    gx, gy = fake_driver.launches[-1].grid
    assert gy == 64 and gx == min(3, 1024 // 64)
    assert lo == 100 - (gx * gy - 1)
    assert count == 2 * gx * gy


@kd.kernel
def first_element(a: kd.Array[kd.f32, 2]):
    for i, j in kd.ndrange(a.shape[0], a.shape[1]):
        a[i, j] = a[i, j] + 1.0
    return a[0, 0] * 2.0


def test_serial_memory_access_is_a_one_thread_kernel_whose_results_come_back(fake_driver):
    def result(launch):
        write_slots(launch.parameter(1), [3.25], np.float32)
        return 0

    fake_driver.effects["serial"] = result
    a = kd.array(rng.random((8, 8)).astype(np.float32), device="cuda")
    assert first_element(a) == np.float32(6.5)
    serial = [launch for launch in fake_driver.launches if "serial" in launch.name]
    assert len(serial) == 1 and serial[0].grid == (1, 1) and serial[0].block == 1
    assert "parallel" in fake_driver.launches[0].name  # in program order


def test_a_failed_launch_raises_and_the_next_call_works(fake_driver):
    x = kd.array(rng.random(100).astype(np.float32), device="cuda")
    fake_driver.fail_with = 700
    with pytest.raises(RuntimeError, match="CUDA_ERROR_ILLEGAL_ADDRESS.*steps"):
        steps(x, 2)
    assert len(fake_driver.launches) == 1  # the host program stopped at the failure
    fake_driver.fail_with = 0
    steps(x, 2)
    assert len(fake_driver.launches) == 5


@kd.kernel(debug=True)
def shifted(x: kd.Array[kd.f32], k: int):
    for i in kd.prange(x.shape[0]):
        x[i + k] = 1.0


def test_device_errors_are_raised_after_the_launch(fake_driver):
    def out_of_bounds(launch):
        status = launch.parameter(0)
        site = 0
        np.ctypeslib.as_array((ctypes.c_int64 * 4).from_address(status))[:] = \
            [ErrorCode.INDEX, site, 12, 10]
        return 0

    fake_driver.effects["parallel"] = out_of_bounds
    x = kd.array(rng.random(10).astype(np.float32), device="cuda")
    with pytest.raises(IndexError, match=r"index 12 is out of bounds .* size 10"):
        shifted(x, 2)
    fake_driver.effects.clear()
    shifted(x, 0)  # the status is cleared before each call


@kd.kernel
def make(like: kd.Array[kd.f32], n: int):
    out = kd.zeros(n, kd.f32)
    for i in kd.prange(n):
        out[i] = like[0] * i
    return out


def test_arrays_made_by_a_kernel_are_device_arrays(fake_driver):
    out = make(kd.zeros(1, kd.f32, device="cuda"), 37)
    assert out.device == "cuda" and out.shape == (37,) and out.dtype == np.float32
    np.testing.assert_array_equal(out.numpy(), np.zeros(37, np.float32))  # no PTX ran


@kd.kernel
def view_of(a: kd.Array[kd.f32]):
    return a[2:]


def test_returned_views_share_device_memory(fake_driver):
    a = kd.array(np.arange(10, dtype=np.float32), device="cuda")
    v = view_of(a)
    assert v.device == "cuda" and v.shape == (8,)
    assert v.ptr == a.ptr + 8
    np.testing.assert_array_equal(v.numpy(), np.arange(2, 10, dtype=np.float32))


def test_mixing_devices_names_the_parameters(fake_driver):
    x = kd.array(rng.random(10).astype(np.float32), device="cuda")
    y = rng.random(10).astype(np.float32)

    @kd.kernel
    def add(a: kd.Array[kd.f32], b: kd.Array[kd.f32]):
        for i in kd.prange(a.shape[0]):
            a[i] += b[i]

    with pytest.raises(ValueError, match="'a' on cuda, 'b' on the cpu"):
        add(x, y)


def test_ptx_is_loaded_once_per_specialisation(fake_driver):
    x = kd.array(rng.random(64).astype(np.float32), device="cuda")
    steps(x, 1)
    steps(x, 1)
    assert len(fake_driver.modules) <= 1  # loaded in an earlier test, or once here

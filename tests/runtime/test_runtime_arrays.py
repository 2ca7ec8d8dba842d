"""kdsl arrays (API section 5): ``kd.array/zeros/ones/empty/full`` on ``device="cpu"``,
their ``.numpy()``, ``.to()``, ``.shape``, ``.dtype``, ``.device``; passed to kernels
without copies; ``device="cuda"`` is a clear error in this CPU-only build."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def add_index(a: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        a[i] = a[i] + i


@kd.kernel
def lengths(p: kd.Array[kd.vec3], out: kd.Array[kd.f32]):
    for i in kd.prange(p.shape[0]):
        out[i] = kd.length(p[i])


@kd.kernel
def any_array_sum(a):
    s = 0
    for i in range(a.shape[0]):
        s += a[i]
    return s


def test_zeros():
    z = kd.zeros(4)
    assert isinstance(z, kd.DeviceArray)
    assert z.shape == (4,) and z.dtype == np.float32 and z.device == "cpu"
    np.testing.assert_array_equal(z.numpy(), np.zeros(4, np.float32))


def test_ones_full_empty_with_dtypes_and_shapes():
    o = kd.ones((2, 3), dtype=kd.f64)
    assert o.shape == (2, 3) and o.dtype == np.float64
    np.testing.assert_array_equal(o.numpy(), np.ones((2, 3)))
    f = kd.full(5, 2.5, dtype=kd.f32)
    assert f.shape == (5,) and f.dtype == np.float32
    np.testing.assert_array_equal(f.numpy(), np.full(5, 2.5, np.float32))
    i = kd.full((2, 2), -7, dtype=kd.i32)
    assert i.dtype == np.int32 and i.numpy().tolist() == [[-7, -7], [-7, -7]]
    e = kd.empty((3,), dtype=kd.i64)
    assert e.shape == (3,) and e.dtype == np.int64 and e.device == "cpu"


def test_vector_dtype_adds_trailing_axes():
    v = kd.zeros(4, dtype=kd.vec3)
    assert v.shape == (4, 3) and v.dtype == np.float32
    m = kd.ones((2,), dtype=kd.mat22)
    assert m.shape == (2, 2, 2) and m.dtype == np.float32


def test_array_from_data():
    a = kd.array([1, 2, 3], dtype=kd.i32)
    assert a.dtype == np.int32 and a.numpy().tolist() == [1, 2, 3] and a.device == "cpu"
    b = kd.array([[1.0, 2.0, 3.0]], dtype=kd.vec3)
    assert b.shape == (1, 3) and b.dtype == np.float32
    c = kd.array(np.arange(3.0))
    assert c.dtype == np.float64
    with pytest.raises(ValueError):
        kd.array([[1.0, 2.0]], dtype=kd.vec3)


def test_to_cpu_is_the_same_array():
    a = kd.ones(3)
    b = a.to("cpu")
    assert b.device == "cpu"
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    b.numpy()[0] = 5.0
    assert a.numpy()[0] == 5.0


def test_kernel_writes_are_visible():
    a = kd.full(4, 1.5)
    add_index(a)
    np.testing.assert_array_equal(a.numpy(), [1.5, 2.5, 3.5, 4.5])
    view = a.numpy()
    add_index(a)
    np.testing.assert_array_equal(view, [1.5, 3.5, 5.5, 7.5])


def test_vector_arrays_in_kernels():
    p = kd.array([[3.0, 4.0, 0.0], [1.0, 2.0, 2.0]], dtype=kd.vec3)
    out = kd.zeros(2)
    lengths(p, out)
    np.testing.assert_allclose(out.numpy(), [5.0, 3.0], rtol=1e-6)


def test_kd_arrays_and_numpy_arrays_mix():
    p = np.array([[0.0, 0.0, 2.0]], np.float32)
    out = kd.zeros(1)
    lengths(p, out)
    assert out.numpy()[0] == 2.0


def test_unannotated_parameter_takes_kd_arrays():
    assert any_array_sum(kd.array([1, 2, 3], dtype=kd.i64)) == 6
    assert any_array_sum(kd.array([0.5, 0.25], dtype=kd.f64)) == 0.75


def test_wrong_dtype_kd_array_is_a_type_error():
    with pytest.raises(TypeError) as info:
        add_index(kd.zeros(3, dtype=kd.f64))
    assert "'a'" in str(info.value) and "float64" in str(info.value)


@pytest.mark.parametrize("make", [
    lambda: kd.zeros(3, device="cuda"),
    lambda: kd.ones(3, device="cuda"),
    lambda: kd.empty(3, device="cuda"),
    lambda: kd.full(3, 1.0, device="cuda"),
    lambda: kd.array([1.0], device="cuda"),
    lambda: kd.zeros(3).to("cuda"),
], ids=["zeros", "ones", "empty", "full", "array", "to"])
def test_cuda_is_a_clear_error(make):
    from kdsl.runtime.cuda.driver import current_driver, is_available

    if current_driver() is not None or is_available():
        pytest.skip("a CUDA device (or a fake driver) is present")
    with pytest.raises(ValueError) as info:
        make()
    message = str(info.value)
    assert "cuda" in message and "cpu" in message


def test_unknown_device_is_an_error():
    with pytest.raises(ValueError) as info:
        kd.zeros(3, device="tpu")
    assert "'tpu'" in str(info.value)

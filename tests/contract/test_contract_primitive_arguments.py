"""What the parallel primitives and the array constructors do with arguments NumPy users
pass: in-place primitives refuse what they could only sort into a lost copy (a list) or
cannot write (a read-only array) and sort other libraries' CPU tensors in place; shapes
are integers, and kd.array holds numbers."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@pytest.mark.parametrize("call", [
    lambda: kd.sort([3.0, 1.0, 2.0]),
    lambda: kd.sort_by_key([3, 1, 2], np.arange(3.0)),
    lambda: kd.sort_by_key(np.array([3, 1, 2]), (0.0, 1.0, 2.0)),
    lambda: kd.argsort(np.array([3, 1, 2]), out=[0, 0, 0]),
])
def test_a_list_to_write_in_place_is_a_type_error(call):
    with pytest.raises(TypeError, match="in place, so it must be an array; got (list|tuple)"):
        call()


def test_a_read_only_array_to_sort_is_an_error_naming_it():
    keys = np.array([3.0, 1.0, 2.0])
    keys.flags.writeable = False
    with pytest.raises(ValueError, match="sort writes 'a' in place, but it is read-only"):
        kd.sort(keys)
    with pytest.raises(ValueError, match="sort_by_key writes 'keys'"):
        kd.sort_by_key(keys, np.zeros(3))
    assert keys.tolist() == [3.0, 1.0, 2.0]


def test_views_and_kd_arrays_are_sorted_in_place(rng):
    keys = rng.normal(size=(6, 40)).astype(np.float32)
    expected = keys.copy()
    expected[:, ::3] = np.sort(expected[:, ::3], axis=-1)
    kd.sort(keys[:, ::3])
    np.testing.assert_array_equal(keys, expected)
    held = kd.array(rng.integers(-9, 9, 50).astype(np.int32))
    order = np.argsort(held.numpy(), kind="stable")
    values = kd.array(np.arange(50.0))
    kd.sort_by_key(held, values)
    np.testing.assert_array_equal(values.numpy(), order.astype(np.float64))


def test_torch_cpu_tensors_are_sorted_in_place(rng):
    torch = pytest.importorskip("torch")
    data = rng.normal(size=300).astype(np.float32)
    data[::7] = np.nan
    keys = torch.from_numpy(data.copy())
    values = torch.arange(300, dtype=torch.float64)
    kd.sort_by_key(keys, values)
    np.testing.assert_array_equal(values.numpy(), np.argsort(data, kind="stable"))
    np.testing.assert_array_equal(keys.numpy(), np.sort(data))
    strided = torch.from_numpy(data.copy())[::2]
    kd.sort(strided)
    np.testing.assert_array_equal(strided.numpy(), np.sort(data[::2]))
    out = torch.zeros(300, dtype=torch.int64)
    assert kd.argsort(torch.from_numpy(data), out=out) is out
    np.testing.assert_array_equal(out.numpy(), np.argsort(data, kind="stable"))


@pytest.mark.parametrize("make", [kd.zeros, kd.ones, kd.empty, lambda s: kd.full(s, 2.0)])
def test_a_float_shape_is_a_type_error(make):
    with pytest.raises(TypeError, match="shape must be an integer"):
        make(2.5)
    with pytest.raises(TypeError, match="shape must be an integer"):
        make((3, 2.0))
    assert make(np.int64(3)).shape == (3,)
    assert make((np.int32(2), 3)).shape == (2, 3)


@pytest.mark.parametrize("obj", [["a", "b"], [object()], np.array(["x"])])
def test_kd_array_of_non_numbers_is_a_type_error(obj):
    with pytest.raises(TypeError, match="kd.array holds numbers or bools"):
        kd.array(obj)


def test_kd_array_dtypes_follow_numpy():
    assert kd.array([1, 2, 2**40]).dtype == np.int64
    assert kd.array([True, False]).dtype == np.bool_
    assert kd.array([1, 2]).numpy().tolist() == [1, 2]
    assert kd.array([1.5, 2]).dtype == np.float64
    assert kd.array([1.7, -1.7], dtype=kd.i32).numpy().tolist() == [1, -1]
    assert kd.array(np.ones(3, np.float16)).dtype == np.float16     # held; kernels refuse it
    assert kd.array([[1, 2, 3]], dtype=kd.vec3).dtype == np.float32

"""Arrays of other libraries passed straight to kernels (API section 5): a DLPack
producer (a PyTorch or JAX array) or an object with ``__cuda_array_interface__`` (CuPy,
Numba) is shared, never copied, so the kernel's writes reach it."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


class HostTensor:
    """What a PyTorch CPU tensor offers kdsl: DLPack, over memory it owns."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __dlpack__(self, **kwargs):
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()


class DeviceTensor:
    """What a CuPy array offers kdsl: ``__cuda_array_interface__``."""

    def __init__(self, data) -> None:
        self.data = data

    @property
    def __cuda_array_interface__(self):
        return self.data.__cuda_array_interface__


@kd.kernel
def scale(a: kd.Array[kd.f32], s: kd.f32):
    for i in kd.prange(a.shape[0]):
        a[i] *= s
    return kd.sum(a)


def test_a_dlpack_tensor_is_shared_with_the_kernel():
    data = np.arange(6, dtype=np.float32)
    tensor = HostTensor(data)
    assert scale(tensor, 2.0) == 30.0
    assert scale(tensor, 2.0) == 60.0  # the second call takes the same path
    assert data.tolist() == [0, 4, 8, 12, 16, 20]


def test_a_foreign_array_of_the_wrong_dtype_names_the_parameter():
    with pytest.raises(TypeError, match="argument 'a': expected f32 array"):
        scale(HostTensor(np.ones(3)), 2.0)


def test_an_object_with_the_cuda_array_interface_is_shared(emulated_cuda):
    device = kd.array(np.arange(4, dtype=np.float32), device="cuda")
    assert scale(DeviceTensor(device), 3.0) == 18.0
    assert device.numpy().tolist() == [0, 3, 6, 9]


@pytest.fixture
def emulated_cuda():
    from kdsl.runtime.cuda import driver
    from kdsl.runtime.cuda.emulator import EmulatedDriver

    previous = driver.current_driver()
    driver.set_driver(EmulatedDriver())
    yield
    driver.set_driver(previous)


@kd.kernel
def squared_norm(x: kd.Array[kd.f32]):
    return kd.sum(x * x)


def test_gradients_with_respect_to_a_foreign_array():
    grad = kd.grad(squared_norm)(HostTensor(np.arange(3, dtype=np.float32)))
    assert np.array_equal(np.asarray(grad.numpy() if hasattr(grad, "numpy") else grad),
                          [0.0, 2.0, 4.0])


@kd.kernel
def bump_and_return(a, b):
    a[0] += 1.0
    return b, a[0], a


def test_a_returned_kd_array_argument_is_the_same_object():
    a, b = kd.zeros(3), kd.ones(2)
    for call in range(3):  # the first call, then the compiled call path
        first, value, last = bump_and_return(a, b)
        assert first is b and last is a and value == call + 1
    x = np.zeros(3)
    assert bump_and_return(x, x)[0] is x

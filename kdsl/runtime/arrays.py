"""kdsl arrays: ``kd.array``, ``kd.zeros`` and friends, on a device.

On the CPU a kdsl array wraps a NumPy array (no copies in or out of kernels); NumPy
arrays can be passed to kernels directly too. Only ``device="cpu"`` exists in this build.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kdsl import types as T

_DEVICES = ("cpu",)


def _check_device(device: str) -> str:
    if device == "cuda":
        raise ValueError("device='cuda' is not available in this build of kdsl; use device='cpu'")
    if device not in _DEVICES:
        raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")
    return device


def _numpy_dtype(dtype: Any) -> tuple[np.dtype, tuple[int, ...]]:
    """The NumPy dtype and trailing shape backing a kdsl element type."""
    if dtype is None:
        return np.dtype(np.float32), ()
    if isinstance(dtype, (T.VectorType, T.MatrixType)):
        return dtype.element.numpy_dtype, dtype.shape
    if isinstance(dtype, T.ScalarType):
        return dtype.numpy_dtype, ()
    return np.dtype(dtype), ()


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)


class DeviceArray(np.lib.mixins.NDArrayOperatorsMixin):
    """An array on a device; on the CPU, a view of a NumPy array shared with kernels.
    Arithmetic works as on NumPy arrays (and gives NumPy arrays)."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        def plain(x: Any) -> Any:
            return x._data if isinstance(x, DeviceArray) else x

        inputs = tuple(plain(x) for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(plain(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __init__(self, data: np.ndarray, device: str = "cpu") -> None:
        self._data = data
        self.device = _check_device(device)

    def __kdsl_array__(self) -> np.ndarray:
        return self._data

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def __len__(self) -> int:
        return len(self._data)

    def numpy(self) -> np.ndarray:
        """The contents as a NumPy array (on the CPU, the same memory)."""
        return self._data

    def to(self, device: str) -> DeviceArray:
        _check_device(device)
        return self

    def __getitem__(self, index: Any) -> Any:
        return self._data[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        self._data[index] = value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __repr__(self) -> str:
        return f"kd.array({self._data!r}, device={self.device!r})"


def array(obj: Any, dtype: Any = None, device: str = "cpu") -> DeviceArray:
    _check_device(device)
    if dtype is None:
        return DeviceArray(np.array(obj), device)
    np_dtype, trailing = _numpy_dtype(dtype)
    data = np.array(obj, dtype=np_dtype)
    if trailing and tuple(data.shape[data.ndim - len(trailing):]) != trailing:
        raise ValueError(f"an array of {dtype} needs trailing axes {trailing}, got shape {data.shape}")
    return DeviceArray(data, device)


def empty(shape: Any, dtype: Any = T.f32, device: str = "cpu") -> DeviceArray:
    np_dtype, trailing = _numpy_dtype(dtype)
    return DeviceArray(np.empty(_shape(shape) + trailing, dtype=np_dtype), _check_device(device))


def zeros(shape: Any, dtype: Any = T.f32, device: str = "cpu") -> DeviceArray:
    np_dtype, trailing = _numpy_dtype(dtype)
    return DeviceArray(np.zeros(_shape(shape) + trailing, dtype=np_dtype), _check_device(device))


def ones(shape: Any, dtype: Any = T.f32, device: str = "cpu") -> DeviceArray:
    np_dtype, trailing = _numpy_dtype(dtype)
    return DeviceArray(np.ones(_shape(shape) + trailing, dtype=np_dtype), _check_device(device))


def full(shape: Any, fill_value: Any, dtype: Any = T.f32, device: str = "cpu") -> DeviceArray:
    np_dtype, trailing = _numpy_dtype(dtype)
    return DeviceArray(np.full(_shape(shape) + trailing, fill_value, dtype=np_dtype),
                       _check_device(device))


def zeros_like(a: Any, dtype: Any = None, device: str | None = None) -> DeviceArray:
    data = a.numpy() if isinstance(a, DeviceArray) else np.asarray(a)
    if dtype is None:
        return DeviceArray(np.zeros_like(data), _check_device(device or "cpu"))
    np_dtype, trailing = _numpy_dtype(dtype)
    return DeviceArray(np.zeros(data.shape + trailing, dtype=np_dtype), _check_device(device or "cpu"))

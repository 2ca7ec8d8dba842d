"""kdsl arrays: ``kd.array``, ``kd.zeros`` and friends, on a device.

On the CPU a kdsl array wraps a NumPy array (no copies in or out of kernels); NumPy
arrays can be passed to kernels directly too. ``device="cuda"`` gives a ``CudaArray``
(kdsl/runtime/cuda/device_array.py) in device memory; copies between host and device are
always explicit (``.numpy()``, ``.to()``, ``kd.array``), and CUDA arrays of other libraries
(``__cuda_array_interface__``, DLPack) are taken without copies.
"""

from __future__ import annotations

import importlib
import operator
from typing import Any

import numpy as np

from kdsl import types as T

_DEVICES = ("cpu", "cuda")


def _check_device(device: Any) -> str:
    """``"cpu"`` or ``"cuda"`` (``"cuda:0"`` and device objects printing so are accepted)."""
    name = device if isinstance(device, str) else str(device)
    if name in _DEVICES:
        return name
    if name == "cuda:0":
        return "cuda"
    if name.startswith("cuda:"):
        raise ValueError(f"device {device!r}: kdsl uses CUDA device 0 only ('cuda' or 'cuda:0')")
    raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")


# the array module of each device other than the CPU, imported on first use: the CPU
# array is the base class of the others and never imports them by name
_DEVICE_MODULES = {"cuda": "kdsl.runtime.cuda.device_array"}


def _cuda() -> Any:
    """The CUDA array module (it never imports cuda-python)."""
    return importlib.import_module(_DEVICE_MODULES["cuda"])


def _as_cuda_array(obj: Any) -> Any:
    """A zero-copy CudaArray view of ``obj`` when it lives in CUDA memory, else None."""
    if type(obj) in (np.ndarray, list, tuple, int, float, bool, DeviceArray):
        return None
    return _cuda().as_cuda_array(obj)


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
    """``shape`` as a tuple of ints; as in NumPy, a float is a TypeError, not truncated."""
    try:
        if np.ndim(shape) == 0:
            return (operator.index(shape),)
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"shape must be an integer or a sequence of integers, got {shape!r}") \
            from None


def _numeric(data: np.ndarray) -> np.ndarray:
    """``data``, whose elements must be numbers or bools (kernels take nothing else)."""
    if data.dtype.kind not in "biufc" or data.dtype.fields is not None:
        raise TypeError(f"kd.array holds numbers or bools, not {data.dtype} elements")
    return data


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
        if _check_device(device) != "cpu":
            raise ValueError("a DeviceArray of host data is on device 'cpu'; make CUDA arrays "
                             "with kd.array(data, device='cuda')")
        self._data = data
        self.device = "cpu"
        self.requires_grad = False
        self.grad: DeviceArray | None = None  # filled by kd.Tape.backward

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

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides."""
        return tuple(self._data.strides)

    @property
    def size(self) -> int:
        return int(self._data.size)

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    def __len__(self) -> int:
        return len(self._data)

    def numpy(self) -> np.ndarray:
        """The contents as a NumPy array (on the CPU, the same memory)."""
        return self._data

    def to(self, device: str) -> DeviceArray:
        """This array on ``device``: itself on the CPU, a copy in device memory for CUDA."""
        if _check_device(device) == "cuda":
            return _cuda().CudaArray.from_host(self._data)
        return self

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def __getitem__(self, index: Any) -> Any:
        return self._data[index]

    @property
    def T(self) -> np.ndarray:  # noqa: N802  (NumPy's name)
        """The transposed view (a NumPy array, as indexing gives)."""
        return self._data.T

    def __setitem__(self, index: Any, value: Any) -> None:
        self._data[index] = value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __repr__(self) -> str:
        return f"kd.array({self._data!r}, device={self.device!r})"


def _check_trailing(data: Any, dtype: Any, trailing: tuple[int, ...]) -> None:
    if trailing and tuple(data.shape[data.ndim - len(trailing):]) != trailing:
        raise ValueError(f"an array of {dtype} needs trailing axes {trailing}, got shape {data.shape}")


def requiring_grad(a: DeviceArray, requires_grad: bool) -> DeviceArray:
    """``a``, marked for ``kd.Tape`` to fill its ``.grad`` (floating-point arrays only)."""
    if requires_grad:
        if np.dtype(a.dtype).kind != "f":
            raise TypeError(f"requires_grad=True needs a floating-point array, got {a.dtype}: "
                            "gradients are taken with respect to floating-point values only")
        a.requires_grad = True
    return a


def array(obj: Any, dtype: Any = None, device: str | None = None,
          requires_grad: bool = False) -> DeviceArray:
    """A kdsl array of ``obj``'s data on ``device`` (default: where ``obj`` is, else the
    CPU). Host data is copied; data already in CUDA memory (a CUDA array of kdsl, CuPy,
    PyTorch, Numba... through ``__cuda_array_interface__`` or DLPack) is shared when it
    stays on CUDA with the same dtype. ``requires_grad=True``: ``kd.Tape`` fills its
    ``.grad`` (a new array object when ``obj`` is a kdsl array, sharing its memory)."""
    if requires_grad:
        made = array(obj, dtype, device)
        if made is obj:  # a view of the same memory: the flag is the new object's own
            made = _same_memory(made)
        return requiring_grad(made, True)
    on_cuda = _as_cuda_array(obj)
    if device is None:
        device = "cpu" if on_cuda is None else "cuda"
    if _check_device(device) == "cuda":
        return _cuda_array(obj, on_cuda, dtype)
    if on_cuda is not None:
        obj = on_cuda.numpy()
    if dtype is None:
        return DeviceArray(_numeric(np.array(obj)), device)
    np_dtype, trailing = _numpy_dtype(dtype)
    data = _numeric(np.array(obj, dtype=np_dtype))
    _check_trailing(data, dtype, trailing)
    return DeviceArray(data, device)


def _same_memory(a: DeviceArray) -> DeviceArray:
    if a.device == "cuda":
        return _cuda().CudaArray.from_pointer(a.ptr, a.shape, a.strides, a.dtype,  # type: ignore[attr-defined]
                                              owner=a)
    return DeviceArray(a.numpy(), "cpu")


def _cuda_array(obj: Any, on_cuda: Any, dtype: Any) -> DeviceArray:
    CudaArray = _cuda().CudaArray
    if on_cuda is not None:
        if dtype is None:
            return on_cuda  # type: ignore[no-any-return]
        np_dtype, trailing = _numpy_dtype(dtype)
        if on_cuda.dtype != np_dtype:
            on_cuda = CudaArray.from_host(on_cuda.numpy().astype(np_dtype))
        _check_trailing(on_cuda, dtype, trailing)
        return on_cuda  # type: ignore[no-any-return]
    if isinstance(obj, DeviceArray):
        obj = obj.numpy()
    if dtype is None:
        return CudaArray.from_host(np.asarray(obj))  # type: ignore[no-any-return]
    np_dtype, trailing = _numpy_dtype(dtype)
    data = np.asarray(obj, dtype=np_dtype)
    _check_trailing(data, dtype, trailing)
    return CudaArray.from_host(data)  # type: ignore[no-any-return]


def _is_positive_zero(value: Any) -> bool:
    """Whether ``value`` is a scalar whose elements are all-zero bytes (not -0.0)."""
    if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return False
    return bool(value == 0 and not np.signbit(value))


def _filled_cuda(shape: tuple[int, ...], np_dtype: np.dtype, fill: Any) -> DeviceArray:
    """A new CUDA array: uninitialised (``fill`` None), zeros (0) or filled with ``fill``."""
    CudaArray = _cuda().CudaArray
    if fill is None or _is_positive_zero(fill):
        result = CudaArray.allocate(shape, np_dtype)
        if fill is not None:
            from kdsl.runtime.cuda.driver import get_driver

            get_driver().memset(result.ptr, result.nbytes, 0)
        return result  # type: ignore[no-any-return]
    return CudaArray.from_host(np.full(shape, fill, dtype=np_dtype))  # type: ignore[no-any-return]


def empty(shape: Any, dtype: Any = T.f32, device: str = "cpu",
          requires_grad: bool = False) -> DeviceArray:
    return requiring_grad(_filled(shape, dtype, device, None), requires_grad)


def zeros(shape: Any, dtype: Any = T.f32, device: str = "cpu",
          requires_grad: bool = False) -> DeviceArray:
    return requiring_grad(_filled(shape, dtype, device, 0), requires_grad)


def ones(shape: Any, dtype: Any = T.f32, device: str = "cpu",
         requires_grad: bool = False) -> DeviceArray:
    return requiring_grad(_filled(shape, dtype, device, 1), requires_grad)


def full(shape: Any, fill_value: Any, dtype: Any = T.f32, device: str = "cpu",
         requires_grad: bool = False) -> DeviceArray:
    return requiring_grad(_filled(shape, dtype, device, fill_value), requires_grad)


def _filled(shape: Any, dtype: Any, device: str, fill: Any) -> DeviceArray:
    """A new array on ``device``: uninitialised (``fill`` None), zeros, or ``fill``."""
    np_dtype, trailing = _numpy_dtype(dtype)
    full_shape = _shape(shape) + trailing
    if _check_device(device) == "cuda":
        return _filled_cuda(full_shape, np_dtype, fill)
    if fill is None:
        return DeviceArray(np.empty(full_shape, dtype=np_dtype), device)
    if _is_positive_zero(fill):  # calloc'd pages, zeroed as they are first touched
        return DeviceArray(np.zeros(full_shape, dtype=np_dtype), device)
    return DeviceArray(np.full(full_shape, fill, dtype=np_dtype), device)


def zeros_like(a: Any, dtype: Any = None, device: str | None = None,
               requires_grad: bool = False) -> DeviceArray:
    """Zeros of ``a``'s shape (and dtype, unless given) on ``device`` (default: ``a``'s)."""
    return requiring_grad(_zeros_like(a, dtype, device), requires_grad)


def _zeros_like(a: Any, dtype: Any = None, device: str | None = None) -> DeviceArray:
    on_cuda = _as_cuda_array(a)
    if on_cuda is None and _check_device(device or "cpu") == "cpu":
        data = a.numpy() if isinstance(a, DeviceArray) else np.asarray(a)
        if dtype is None:
            return DeviceArray(np.zeros_like(data), "cpu")
        np_dtype, trailing = _numpy_dtype(dtype)
        return DeviceArray(np.zeros(data.shape + trailing, dtype=np_dtype), "cpu")
    source = on_cuda if on_cuda is not None else np.asarray(a)
    target = _check_device(device or ("cpu" if on_cuda is None else "cuda"))
    if dtype is None:
        return zeros(source.shape, source.dtype, target)
    np_dtype, trailing = _numpy_dtype(dtype)
    return zeros(tuple(source.shape) + trailing, np_dtype, target)


def synchronize() -> None:
    """Waits until all CUDA work kdsl queued has finished (nothing to do if CUDA was never
    used)."""
    from kdsl.runtime.cuda.driver import current_driver

    driver = current_driver()
    if driver is not None:
        driver.synchronize()


def from_dlpack(obj: Any) -> DeviceArray:
    """A kdsl array sharing the memory of a DLPack producer (``__dlpack__`` and
    ``__dlpack_device__``): a CPU array for host tensors, a CUDA array for CUDA ones."""
    return _cuda().from_dlpack(obj)  # type: ignore[no-any-return]


def shared_foreign_array(obj: Any) -> Any:
    """A kernel's argument: an array of another library (a PyTorch, JAX or CuPy array, a
    Numba device array) as a kdsl array sharing its memory, so writes reach it; anything
    else unchanged."""
    t = type(obj)
    if t is np.ndarray or t in (float, int, bool) or isinstance(obj, (np.ndarray, np.generic)) \
            or hasattr(obj, "__kdsl_array__") or getattr(t, "__kdsl_cuda__", False):
        return obj
    try:
        if hasattr(obj, "__cuda_array_interface__"):
            return array(obj)
        if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
            return from_dlpack(obj)
    except (TypeError, ValueError, BufferError):
        pass  # the argument checks name what is wrong with it
    return obj


# how kernels recognise the allocators (kdsl/frontend/calls.py), without importing this module
_ALLOCATOR_KINDS: tuple[tuple[Any, str], ...] = (
    (empty, "empty"), (zeros, "zeros"), (ones, "ones"), (full, "full"), (zeros_like, "zeros_like"))
for _allocator, _kind in _ALLOCATOR_KINDS:
    _allocator.__kdsl_allocator__ = _kind

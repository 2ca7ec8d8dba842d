"""CUDA arrays: device memory with a shape, byte strides and a NumPy dtype.

A ``CudaArray`` either owns its memory (``CudaArray.allocate``; freed when the array is
collected) or views memory another object keeps alive (``CudaArray.from_pointer``; its
``base``). Moving data between host and device is always explicit (``.numpy()``,
``.to()``, ``kd.array``). CUDA arrays implement ``__cuda_array_interface__`` (version 3)
and DLPack, and consume both without copying.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from kdsl.runtime.arrays import DeviceArray, _check_device
from kdsl.runtime.cuda import dlpack
from kdsl.runtime.cuda.driver import get_driver

CAI_LEGACY_DEFAULT_STREAM = 1  # the legacy default stream in the CAI and DLPack protocols
CAI_PER_THREAD_DEFAULT_STREAM = 2
_REPR_MAX_BYTES = 1 << 24

_NO_IMPLICIT_COPY = ("kdsl CUDA arrays are not converted to host arrays implicitly: call "
                     ".numpy() (or .to('cpu')) to copy the contents to the host")
_NO_ARITHMETIC = ("arithmetic on kdsl CUDA arrays is not supported outside kernels: compute "
                  "in a kernel, or copy to the host with .numpy()")


def check_cuda_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a NumPy dtype CUDA arrays can hold (numeric, native byte order)."""
    dt = np.dtype(dtype)
    if dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None:
        raise TypeError(f"CUDA arrays hold numeric elements, not {dt}")
    if not dt.isnative:
        raise TypeError(f"CUDA arrays hold native (little-endian) elements, not {dt.str}")
    return dt


def c_contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    return dlpack.c_contiguous_strides(shape, itemsize)


def _is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    if any(n == 0 for n in shape):
        return True
    step = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


class CudaArray(DeviceArray):
    """An array in CUDA device memory (device 0).

    ``ptr`` is the device address of element 0, ``strides`` are in bytes, ``base`` is the
    object keeping the memory alive (None when the array owns it). Basic indexing (ints,
    slices, ``None``, ``...``) gives views; indexing one element copies it to the host.
    """

    __kdsl_cuda__ = True  # kernels take it as a device array
    __kdsl_array__ = None  # type: ignore[assignment]  # no host memory to unwrap

    def __init__(self, ptr: int, shape: Any, strides: Any, dtype: Any,
                 owner: Any = None) -> None:
        dt = check_cuda_dtype(dtype)
        shp = tuple(operator.index(n) for n in shape)
        if any(n < 0 for n in shp):
            raise ValueError(f"negative dimensions are not allowed: {shp}")
        if strides is None:
            st = c_contiguous_strides(shp, dt.itemsize)
        else:
            st = tuple(operator.index(s) for s in strides)
            if len(st) != len(shp):
                raise ValueError(f"strides {st} do not match shape {shp}")
        self._ptr = int(ptr)
        self._shape = shp
        self._strides = st
        self._dtype = dt
        self._base = owner
        self.device = "cuda"
        self.requires_grad = False
        self.grad: DeviceArray | None = None  # filled by kd.Tape.backward

    # --- construction ---------------------------------------------------------------

    @classmethod
    def from_pointer(cls, ptr: int, shape: Any, strides: Any, dtype: Any,
                     owner: Any = None) -> CudaArray:
        """A view of existing device memory at ``ptr`` (byte ``strides``, None for
        C-contiguous); ``owner`` is kept alive as the view's ``base``."""
        return cls(ptr, shape, strides, dtype, owner)

    @classmethod
    def allocate(cls, shape: Any, dtype: Any) -> CudaArray:
        """A new C-contiguous array owning uninitialised device memory, freed when the
        array (and every view of it) is collected."""
        dt = check_cuda_dtype(dtype)
        shp = tuple(operator.index(n) for n in shape)
        if any(n < 0 for n in shp):
            raise ValueError(f"negative dimensions are not allowed: {shp}")
        driver = get_driver()
        nbytes = int(np.prod(shp, dtype=np.int64)) * dt.itemsize if shp else dt.itemsize
        ptr = driver.alloc(nbytes)
        array = cls(ptr, shp, None, dt)
        finalizer = weakref.finalize(array, driver.free, ptr)
        finalizer.atexit = False
        return array

    @classmethod
    def from_host(cls, data: Any) -> CudaArray:
        """A new CUDA array with a copy of host data (anything ``np.asarray`` takes)."""
        host = np.asarray(data)
        if not host.flags.c_contiguous:
            host = host.copy(order="C")
        array = cls.allocate(host.shape, host.dtype)
        get_driver().copy_to_device(array.ptr, host)
        return array

    # --- attributes -----------------------------------------------------------------

    @property
    def ptr(self) -> int:
        return self._ptr

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        return self._strides

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def base(self) -> Any:
        return self._base

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    @property
    def flags_c_contiguous(self) -> bool:
        return _is_c_contiguous(self._shape, self._strides, self._dtype.itemsize)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d CUDA array")
        return self._shape[0]

    def _extent(self) -> tuple[int, int]:
        """The byte range [low, high) the elements span, relative to ``ptr``."""
        low = sum(min(0, (n - 1) * s) for n, s in zip(self._shape, self._strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(self._shape, self._strides))
        return low, high + self._dtype.itemsize

    # --- copies ---------------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """A host copy of the contents (a new C-contiguous NumPy array)."""
        out = np.empty(self._shape, self._dtype)
        if out.size == 0:
            return out
        driver = get_driver()
        if self.flags_c_contiguous:
            driver.copy_to_host(out, self._ptr)
            return out
        low, high = self._extent()
        span = np.empty(high - low, np.uint8)
        driver.copy_to_host(span, self._ptr + low)
        out[...] = np.ndarray(self._shape, self._dtype, buffer=span, offset=-low,
                              strides=self._strides)
        return out

    def copy(self) -> CudaArray:
        """A new C-contiguous CUDA array with the same contents."""
        if not self.flags_c_contiguous:
            return CudaArray.from_host(self.numpy())
        result = CudaArray.allocate(self._shape, self._dtype)
        get_driver().copy_device(result.ptr, self._ptr, self.nbytes)
        return result

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles (and ``copy.copy``) through a host copy, never the device address."""
        return (CudaArray.from_host, (self.numpy(),))

    def to(self, device: str) -> DeviceArray:
        """This array on ``device``: itself for ``"cuda"``, a host copy for ``"cpu"``."""
        if _check_device(device) == "cuda":
            return self
        return DeviceArray(self.numpy())

    # --- indexing -------------------------------------------------------------------

    def __getitem__(self, index: Any) -> Any:
        items = index if isinstance(index, tuple) else (index,)
        ellipses = sum(1 for item in items if item is Ellipsis)
        if ellipses > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        consuming = sum(1 for item in items if item is not None and item is not Ellipsis)
        if consuming > self.ndim:
            raise IndexError(f"too many indices for a {self.ndim}-d CUDA array: {consuming}")
        scalar = ellipses == 0 and consuming == self.ndim and not any(
            item is None or isinstance(item, slice) for item in items)
        if ellipses == 0:
            items = items + (Ellipsis,)
        offset, shape, strides, axis = 0, [], [], 0
        for item in items:
            if item is Ellipsis:
                for _ in range(self.ndim - consuming):
                    shape.append(self._shape[axis])
                    strides.append(self._strides[axis])
                    axis += 1
                continue
            if item is None:
                shape.append(1)
                strides.append(0)
                continue
            n, stride = self._shape[axis], self._strides[axis]
            if isinstance(item, slice):
                if item.step == 0:
                    raise ValueError("slice step cannot be zero")
                start, stop, step = item.indices(n)
                shape.append(len(range(start, stop, step)))
                strides.append(stride * step)
                offset += start * stride if shape[-1] else 0
            else:
                if isinstance(item, (bool, np.bool_)):
                    raise TypeError("CUDA arrays do not support boolean indexing; copy to the "
                                    "host with .numpy() first")
                try:
                    i = operator.index(item)
                except TypeError:
                    raise TypeError(
                        f"CUDA arrays support basic indexing only (ints, slices, None, ...), "
                        f"not {type(item).__name__}; copy to the host with .numpy() for "
                        f"other indexing") from None
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
                offset += (i % n) * stride
            axis += 1
        if scalar:
            host = np.empty((), self._dtype)
            get_driver().copy_to_host(host, self._ptr + offset)
            return host[()]
        owner = self if self._base is None else self._base
        return CudaArray(self._ptr + offset, shape, strides, self._dtype, owner)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError("CUDA arrays do not support item assignment: write them in a kernel, "
                        "or edit a host copy (.numpy()) and copy it back with "
                        "kd.array(host, device='cuda')")

    # --- no implicit host copies ----------------------------------------------------

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(_NO_IMPLICIT_COPY)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        raise TypeError(_NO_ARITHMETIC)

    def __repr__(self) -> str:
        """The contents (a host copy) for arrays up to 16 MiB, else a description."""
        described = f"<kdsl CudaArray shape={self._shape} dtype={self._dtype} ptr={self._ptr:#x}>"
        if self.nbytes > _REPR_MAX_BYTES:
            return described
        try:
            contents = repr(self.numpy())
        except Exception:  # memory that cannot be read
            return described
        return f"kd.array({contents}, device='cuda')"

    # --- interchange ----------------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface (version 3); work on the array is queued on the
        legacy default stream (``"stream": 1``)."""
        return {
            "shape": self._shape,
            "typestr": self._dtype.str,
            "descr": [("", self._dtype.str)],
            "data": (self._ptr, False),
            "strides": None if self.flags_c_contiguous else self._strides,
            "version": 3,
            "stream": CAI_LEGACY_DEFAULT_STREAM,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.KDL_CUDA, 0)

    def __dlpack__(self, stream: Any = None, *, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A DLPack capsule of this array; the consumer's work on ``stream`` (None or 1:
        the legacy default stream, 2: per-thread default, -1: no ordering) is ordered
        after the work queued on the array."""
        if dl_device is not None and tuple(dl_device) != (dlpack.KDL_CUDA, 0):
            raise BufferError(f"a CUDA array cannot be exported to DLPack device {dl_device}")
        if stream == 0:
            raise ValueError("DLPack stream 0 is ambiguous for CUDA: use 1 (legacy default "
                             "stream), 2 (per-thread default stream) or a stream handle")
        if stream is not None and stream not in (-1, CAI_LEGACY_DEFAULT_STREAM):
            get_driver().stream_wait(int(stream), 0)
        source = self.copy() if copy else self
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dlpack.export_capsule(source.ptr, source.shape, source.strides, source.dtype,
                                     source, versioned=versioned)


def _stream_order(stream: Any) -> None:
    """Orders kdsl's stream (the legacy default one) after work on a CAI ``stream``."""
    if stream is None or stream == CAI_LEGACY_DEFAULT_STREAM:
        return
    if stream == 0:
        raise ValueError("__cuda_array_interface__ stream 0 is not allowed (version 3)")
    get_driver().stream_wait(0, int(stream))


def from_cuda_array_interface(obj: Any, interface: dict[str, Any] | None = None) -> CudaArray:
    """A view of the memory of an object with ``__cuda_array_interface__`` (keeps ``obj``
    alive as its base)."""
    cai = obj.__cuda_array_interface__ if interface is None else interface
    if cai.get("mask") is not None:
        raise TypeError("masked __cuda_array_interface__ arrays are not supported")
    dtype = check_cuda_dtype(np.dtype(cai["typestr"]))
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    ptr = int(cai["data"][0] or 0)
    _stream_order(cai.get("stream"))
    return CudaArray(ptr, shape, strides, dtype, obj)


def from_dlpack(obj: Any) -> DeviceArray:
    """A kdsl array sharing the memory of a DLPack producer: a CPU ``DeviceArray`` for host
    tensors, a ``CudaArray`` for CUDA ones (device 0)."""
    device_of = getattr(obj, "__dlpack_device__", None)
    if device_of is None or not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} does not implement DLPack "
                        f"(__dlpack__ and __dlpack_device__)")
    device_type, device_id = (int(x) for x in device_of())
    if device_type in (dlpack.KDL_CPU, dlpack.KDL_CUDA_HOST):
        return DeviceArray(np.from_dlpack(obj))
    if device_type not in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED):
        raise ValueError(f"DLPack device type {device_type} is not supported "
                         f"(CPU and CUDA are)")
    if device_id != 0:
        raise ValueError(f"the tensor is on CUDA device {device_id}; kdsl uses device 0")
    try:
        capsule = obj.__dlpack__(stream=CAI_LEGACY_DEFAULT_STREAM,
                                 max_version=dlpack.DLPACK_VERSION)
    except TypeError:  # a producer older than DLPack 1.0
        capsule = obj.__dlpack__(stream=CAI_LEGACY_DEFAULT_STREAM)
    tensor = dlpack.consume_capsule(capsule)
    if tensor.device[0] not in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED) or tensor.device[1]:
        tensor.owner.release()
        raise BufferError(f"__dlpack_device__ said CUDA device {device_id}, but the tensor is "
                          f"on DLPack device {tensor.device}")
    return CudaArray(tensor.ptr, tensor.shape, tensor.strides, tensor.dtype, tensor.owner)


def as_cuda_array(obj: Any) -> CudaArray | None:
    """``obj`` as a CudaArray without copying when it lives in CUDA memory (a CudaArray,
    an object with ``__cuda_array_interface__``, a CUDA DLPack producer), else None."""
    if isinstance(obj, CudaArray):
        return obj
    if isinstance(obj, (np.ndarray, DeviceArray, list, tuple, int, float, complex, bool)):
        return None
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        cai = None
    if cai is not None:
        return from_cuda_array_interface(obj, cai)
    device_of = getattr(obj, "__dlpack_device__", None)
    if device_of is not None and hasattr(obj, "__dlpack__"):
        try:
            device_type = int(device_of()[0])
        except Exception:
            return None
        if device_type in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED):
            result = from_dlpack(obj)
            assert isinstance(result, CudaArray)
            return result
    return None

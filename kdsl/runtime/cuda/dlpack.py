"""DLPack in pure ctypes: exporting memory as ``dltensor`` capsules and importing them.

Both the classic ``DLManagedTensor`` (capsule ``"dltensor"``) and the versioned
``DLManagedTensorVersioned`` (``"dltensor_versioned"``, DLPack 1.x) are read and written.
Strides in DLPack count elements; NULL strides mean C-contiguous.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import numpy as np

from kdsl.records import dataclass

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13

_KDL_INT, _KDL_UINT, _KDL_FLOAT, _KDL_COMPLEX, _KDL_BOOL = 0, 1, 2, 5, 6
DLPACK_VERSION = (1, 0)
FLAG_READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


# --- dtypes ---------------------------------------------------------------------------

_DLPACK_CODES = {"b": _KDL_BOOL, "i": _KDL_INT, "u": _KDL_UINT, "f": _KDL_FLOAT,
                 "c": _KDL_COMPLEX}
_TO_DLPACK: dict[np.dtype, tuple[int, int]] = {
    np.dtype(name): (_DLPACK_CODES[np.dtype(name).kind], np.dtype(name).itemsize * 8)
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64", "complex64", "complex128")
}
_FROM_DLPACK = {code_bits: dtype for dtype, code_bits in _TO_DLPACK.items()}


def dlpack_dtype(dtype: np.dtype) -> tuple[int, int]:
    """The DLPack ``(code, bits)`` of a NumPy dtype; BufferError for others."""
    try:
        return _TO_DLPACK[np.dtype(dtype)]
    except KeyError:
        raise BufferError(f"DLPack export of {dtype} arrays is not supported") from None


def numpy_dtype(code: int, bits: int, lanes: int = 1) -> np.dtype:
    """The NumPy dtype of a DLPack ``(code, bits, lanes)``; TypeError for others."""
    dtype = _FROM_DLPACK.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise TypeError(f"DLPack tensors of dtype code {code}, {bits} bits, {lanes} lanes "
                        f"are not supported (bool, int8-64, uint8-64, float16-64, complex64/128 are)")
    return dtype


# --- the Python C API, with our own prototypes (not pythonapi's shared ones) -----------

_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _api))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
# Used from the capsule destructor, on an object being deallocated: raw pointers only.
_raw_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_raw_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", _api))


def _forever(obj: Any) -> Any:
    """Keeps ``obj`` alive until the process ends (C code may use it during shutdown)."""
    _incref(obj)
    return obj


_NAME = _forever(ctypes.create_string_buffer(b"dltensor"))
_NAME_VERSIONED = _forever(ctypes.create_string_buffer(b"dltensor_versioned"))
_USED_NAME = _forever(ctypes.create_string_buffer(b"used_dltensor"))
_USED_NAME_VERSIONED = _forever(ctypes.create_string_buffer(b"used_dltensor_versioned"))

_DELETER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _call_deleter(deleter: int, managed: int) -> None:
    if deleter:
        _DELETER_TYPE(deleter)(managed)


# --- export ---------------------------------------------------------------------------

_exports: dict[int, tuple[Any, ...]] = {}  # managed tensor address -> what it keeps alive
_exports_lock = threading.Lock()


def _release_export(managed: int | None) -> None:
    """The deleter of the tensors we export: drops what the export kept alive."""
    if managed:
        with _exports_lock:
            _exports.pop(managed, None)


_EXPORT_DELETER = _forever(_DELETER_TYPE(_release_export))
_EXPORT_DELETER_ADDRESS = ctypes.cast(_EXPORT_DELETER, ctypes.c_void_p).value


def _destroy_capsule(capsule: int | None) -> None:
    """The capsule destructor: a capsule never consumed calls its tensor's deleter."""
    if not capsule:
        return
    for name, struct_type in ((_NAME, DLManagedTensor),
                              (_NAME_VERSIONED, DLManagedTensorVersioned)):
        if _raw_capsule_is_valid(capsule, name):
            managed = _raw_capsule_get_pointer(capsule, name)
            if managed:
                m = struct_type.from_address(managed)
                _call_deleter(m.deleter or 0, managed)
            return


_CAPSULE_DESTRUCTOR = _forever(ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(_destroy_capsule))
_CAPSULE_DESTRUCTOR_ADDRESS = ctypes.cast(_CAPSULE_DESTRUCTOR, ctypes.c_void_p).value


def export_capsule(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...],
                   dtype: np.dtype, owner: Any, device: tuple[int, int] = (KDL_CUDA, 0),
                   versioned: bool = False, read_only: bool = False) -> Any:
    """A DLPack capsule of the memory at ``ptr`` (byte ``strides``); ``owner`` stays alive
    until the consumer calls the deleter (or the capsule is dropped unconsumed)."""
    dtype = np.dtype(dtype)
    code, bits = dlpack_dtype(dtype)
    itemsize = dtype.itemsize
    if any(s % itemsize for s in strides):
        raise BufferError(f"strides {strides} are not multiples of the item size {itemsize}")
    ndim = len(shape)
    shape_array = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_array = (ctypes.c_int64 * max(ndim, 1))(*(s // itemsize for s in strides))
    managed: Any
    if versioned:
        managed = DLManagedTensorVersioned()
        managed.version = DLPackVersion(*DLPACK_VERSION)
        managed.flags = FLAG_READ_ONLY if read_only else 0
    else:
        managed = DLManagedTensor()
    tensor = managed.dl_tensor
    tensor.data = ptr or None
    tensor.device = DLDevice(*device)
    tensor.ndim = ndim
    tensor.dtype = DLDataType(code, bits, 1)
    tensor.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.cast(strides_array, ctypes.POINTER(ctypes.c_int64))
    tensor.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _EXPORT_DELETER_ADDRESS
    address = ctypes.addressof(managed)
    with _exports_lock:
        _exports[address] = (managed, shape_array, strides_array, owner)
    try:
        return _capsule_new(address, _NAME_VERSIONED if versioned else _NAME,
                            _CAPSULE_DESTRUCTOR_ADDRESS)
    except BaseException:
        _release_export(address)
        raise


def live_exports() -> int:
    """How many exported tensors their consumers have not released yet."""
    return len(_exports)


# --- import ---------------------------------------------------------------------------


@dataclass
class ImportedTensor:
    """A consumed DLPack tensor: where its memory is and how to release it."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: np.dtype
    device: tuple[int, int]
    read_only: bool
    owner: DLPackOwner


class DLPackOwner:
    """Keeps imported DLPack memory alive; calls the producer's deleter when collected."""

    def __init__(self, managed: int, deleter: int) -> None:
        self.managed = managed
        self._finalizer = weakref.finalize(self, _call_deleter, deleter, managed)
        self._finalizer.atexit = False

    def release(self) -> None:
        """Calls the deleter now (once)."""
        self._finalizer()


def consume_capsule(capsule: Any) -> ImportedTensor:
    """Reads a ``dltensor`` or ``dltensor_versioned`` capsule and marks it used (renamed
    ``used_dltensor``); the result's ``owner`` calls the deleter when collected."""
    if _capsule_is_valid(capsule, _NAME):
        managed = _capsule_get_pointer(capsule, _NAME)
        m: Any = DLManagedTensor.from_address(managed)
        read_only, used_name = False, _USED_NAME
    elif _capsule_is_valid(capsule, _NAME_VERSIONED):
        managed = _capsule_get_pointer(capsule, _NAME_VERSIONED)
        m = DLManagedTensorVersioned.from_address(managed)
        if m.version.major > DLPACK_VERSION[0]:
            raise BufferError(f"DLPack version {m.version.major}.{m.version.minor} "
                              f"is newer than the supported {DLPACK_VERSION[0]}.x")
        read_only, used_name = bool(m.flags & FLAG_READ_ONLY), _USED_NAME_VERSIONED
    else:
        raise TypeError("expected a DLPack capsule named 'dltensor' or 'dltensor_versioned' "
                        "(not yet consumed)")
    tensor = m.dl_tensor
    try:
        dtype = numpy_dtype(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
        ndim = int(tensor.ndim)
        shape = tuple(int(tensor.shape[i]) for i in range(ndim))
        if tensor.strides:
            strides = tuple(int(tensor.strides[i]) * dtype.itemsize for i in range(ndim))
        else:
            strides = c_contiguous_strides(shape, dtype.itemsize)
        ptr = (tensor.data or 0) + int(tensor.byte_offset)
        device = (int(tensor.device.device_type), int(tensor.device.device_id))
    except BaseException:
        _capsule_set_name(capsule, used_name)  # the deleter runs once, here
        _call_deleter(m.deleter or 0, managed)
        raise
    _capsule_set_name(capsule, used_name)
    owner = DLPackOwner(managed, m.deleter or 0)
    return ImportedTensor(ptr, shape, strides, dtype, device, read_only, owner)


def c_contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array of ``shape``."""
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))

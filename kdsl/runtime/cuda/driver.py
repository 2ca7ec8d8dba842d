"""A thin wrapper over the CUDA driver API (``cuda.bindings.driver``) for kdsl.

``get_driver()`` creates it on first use: it initialises CUDA, retains the primary context
of device 0 and makes it current (in every thread, before each call). All work goes to the
legacy default stream (stream 0), so operations run in the order they are issued.
``cuda.bindings`` is imported only here, and only when a CUDA device is first used.

Errors: CUDA missing (no cuda-python, no driver, no GPU) is ``CudaUnavailableError`` (a
``RuntimeError``), running out of device memory is ``MemoryError``, any other failure is
``CudaError`` naming the ``CUresult``.
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading
from typing import Any

import numpy as np

from kdsl.runtime.cuda.errors import CudaError

DEVICE_ORDINAL = 0
LEGACY_DEFAULT_STREAM = 0  # the NULL stream of the driver API (CU_STREAM_LEGACY is 1)

# Entry points of libcuda that compiled host code may call directly.
_REQUIRED_C_FUNCTIONS = ("cuLaunchKernel", "cuMemcpyDtoH_v2")
_OPTIONAL_C_FUNCTIONS = (
    "cuMemcpyHtoD_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD8Async", "cuMemAllocAsync",
    "cuMemFreeAsync", "cuMemAlloc_v2", "cuMemFree_v2", "cuStreamSynchronize",
    "cuCtxSynchronize", "cuCtxSetCurrent", "cuGetErrorName", "cuGetErrorString",
)


class CudaUnavailableError(RuntimeError, ValueError):
    """CUDA cannot be used here (cuda-python missing, no driver or no GPU).

    Also a ``ValueError``: asking for ``device="cuda"`` where there is none is a bad value.
    """


def _import_bindings() -> Any:
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        try:  # cuda-python < 12.6
            from cuda import cuda as cu  # type: ignore[attr-defined,no-redef]
        except ImportError:
            raise CudaUnavailableError(
                "CUDA is not available: install kdsl[cuda] (the cuda-python package, "
                "cuda.bindings) to use device='cuda', or use device='cpu'"
            ) from None
    return cu


class Driver:
    """The CUDA driver for device 0 (its primary context, the legacy default stream)."""

    def __init__(self) -> None:
        cu = _import_bindings()
        self._cu = cu
        self._success = cu.CUresult.CUDA_SUCCESS
        self._local = threading.local()
        self._libcuda: ctypes.CDLL | None = None
        try:
            self._unavailable_check(cu.cuInit(0), "cuInit")
            self.device = self._unavailable_check(cu.cuDeviceGet(DEVICE_ORDINAL), "cuDeviceGet")
            self.context = self._unavailable_check(
                cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        except CudaUnavailableError:
            raise
        except Exception as error:  # the driver library itself could not be loaded
            raise CudaUnavailableError(
                f"CUDA is not available: the CUDA driver (libcuda.so.1) could not be loaded "
                f"({type(error).__name__}: {error}); device='cuda' needs an NVIDIA GPU and "
                f"its driver, or use device='cpu'"
            ) from error
        self.make_current()
        attribute = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
        self._async_alloc = bool(self._call("cuDeviceGetAttribute", attribute, self.device))

    # --- errors ---------------------------------------------------------------------

    def _error(self, result: Any, call: str, nbytes: int | None = None) -> Exception:
        name = getattr(result, "name", None) or f"CUresult {int(result)}"
        description = ""
        try:
            err, text = self._cu.cuGetErrorString(result)
            if err == self._success and text:
                description = text.decode() if isinstance(text, bytes) else str(text)
        except Exception:
            pass
        if name == "CUDA_ERROR_OUT_OF_MEMORY":
            size = f" of {nbytes} bytes" if nbytes is not None else ""
            return MemoryError(f"CUDA out of memory: {call}{size} failed with {name}")
        return CudaError(name, int(result), call, description)

    def _unavailable_check(self, result: tuple, call: str) -> Any:
        if result[0] != self._success:
            name = getattr(result[0], "name", None) or f"CUresult {int(result[0])}"
            raise CudaUnavailableError(
                f"CUDA is not available: {call} failed with {name}; device='cuda' needs an "
                f"NVIDIA GPU and its driver, or use device='cpu'"
            )
        return result[1] if len(result) == 2 else None

    def _call(self, name: str, *args: Any, nbytes: int | None = None) -> Any:
        """Calls ``cuda.bindings.driver.<name>`` in the context; the result(s) after the
        status, or the mapped exception."""
        self.make_current()
        result = getattr(self._cu, name)(*args)
        if result[0] != self._success:
            raise self._error(result[0], name, nbytes)
        if len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    def make_current(self) -> None:
        """Makes the primary context current in the calling thread (once per thread)."""
        if getattr(self._local, "current", False):
            return
        result = self._cu.cuCtxSetCurrent(self.context)
        if result[0] != self._success:
            raise self._error(result[0], "cuCtxSetCurrent")
        self._local.current = True

    # --- memory ---------------------------------------------------------------------

    def alloc(self, nbytes: int) -> int:
        """A device allocation of ``nbytes`` (at least one byte), ordered on stream 0."""
        nbytes = max(int(nbytes), 1)
        try:
            return self._alloc(nbytes)
        except MemoryError:
            gc.collect()  # arrays only garbage keeps alive
            self.synchronize()  # frees queued on the stream complete
            return self._alloc(nbytes)

    def _alloc(self, nbytes: int) -> int:
        if self._async_alloc:
            try:
                return int(self._call("cuMemAllocAsync", nbytes, LEGACY_DEFAULT_STREAM,
                                      nbytes=nbytes))
            except CudaError as error:
                if error.name != "CUDA_ERROR_NOT_SUPPORTED":
                    raise
                self._async_alloc = False
        return int(self._call("cuMemAlloc", nbytes, nbytes=nbytes))

    def free(self, ptr: int) -> None:
        """Frees an allocation of ``alloc`` (after the work queued on stream 0)."""
        if self._async_alloc:
            self._call("cuMemFreeAsync", int(ptr), LEGACY_DEFAULT_STREAM)
        else:
            self._call("cuMemFree", int(ptr))

    def copy_to_device(self, dst_ptr: int, src: np.ndarray) -> None:
        """Copies a C-contiguous host array to device memory at ``dst_ptr``."""
        if not src.flags.c_contiguous:
            raise ValueError("copy_to_device needs a C-contiguous host array")
        if src.nbytes:
            self._call("cuMemcpyHtoD", int(dst_ptr), src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: np.ndarray, src_ptr: int) -> None:
        """Copies ``dst.nbytes`` bytes from device memory at ``src_ptr`` into a writable
        C-contiguous host array; returns when the copy is complete."""
        if not (dst.flags.c_contiguous and dst.flags.writeable):
            raise ValueError("copy_to_host needs a writable C-contiguous host array")
        if dst.nbytes:
            self._call("cuMemcpyDtoH", dst.ctypes.data, int(src_ptr), dst.nbytes)

    def copy_device(self, dst_ptr: int, src_ptr: int, nbytes: int) -> None:
        """Copies ``nbytes`` bytes between device allocations, on stream 0."""
        if nbytes:
            self._call("cuMemcpyDtoDAsync", int(dst_ptr), int(src_ptr), int(nbytes),
                       LEGACY_DEFAULT_STREAM)

    def memset(self, ptr: int, nbytes: int, byte_value: int) -> None:
        """Sets ``nbytes`` bytes at ``ptr`` to ``byte_value``, on stream 0."""
        if nbytes:
            self._call("cuMemsetD8Async", int(ptr), int(byte_value) & 0xFF, int(nbytes),
                       LEGACY_DEFAULT_STREAM)

    # --- ordering -------------------------------------------------------------------

    def synchronize(self) -> None:
        """Waits until all work queued in the context has finished."""
        self._call("cuCtxSynchronize")

    def stream_synchronize(self, stream: int) -> None:
        """Waits until the work queued so far on ``stream`` (a handle; 1 and 2 are the
        legacy and per-thread default streams) has finished."""
        self._call("cuStreamSynchronize", int(stream))

    def stream_wait(self, waiting: int, on: int) -> None:
        """Work queued on stream ``waiting`` from now on runs after the work queued so far
        on stream ``on`` (an event; the host does not wait)."""
        if int(waiting) == int(on):
            return
        flags = int(self._cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        event = self._call("cuEventCreate", flags)
        try:
            self._call("cuEventRecord", event, int(on))
            self._call("cuStreamWaitEvent", int(waiting), event, 0)
        finally:
            self._call("cuEventDestroy", event)

    # --- code -----------------------------------------------------------------------

    def load_module(self, image: bytes | str) -> Any:
        """Loads PTX text (NUL-terminated here if needed), a cubin or a fatbin; returns the
        ``CUmodule``."""
        if isinstance(image, str):
            image = image.encode()
        binary = image.startswith(b"\x7fELF") or image[:4] == b"\x50\xed\x55\xba"
        if not binary and not image.endswith(b"\0"):
            image += b"\0"
        return self._call("cuModuleLoadData", image)

    def unload_module(self, module: Any) -> None:
        self._call("cuModuleUnload", module)

    def get_function(self, module: Any, name: str) -> int:
        """The ``CUfunction`` called ``name`` in ``module``, as an int."""
        return int(self._call("cuModuleGetFunction", module, name.encode()))

    # --- device ---------------------------------------------------------------------

    def compute_capability(self) -> tuple[int, int]:
        attrs = self._cu.CUdevice_attribute
        major = self._call("cuDeviceGetAttribute",
                           attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device)
        minor = self._call("cuDeviceGetAttribute",
                           attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device)
        return int(major), int(minor)

    def driver_version(self) -> int:
        """The driver's CUDA version, ``1000 * major + 10 * minor`` (13000 for 13.0)."""
        return int(self._call("cuDriverGetVersion"))

    def device_name(self) -> str:
        name = self._call("cuDeviceGetName", 256, self.device)
        text = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        return text.split("\0", 1)[0].strip()

    def c_function_addresses(self) -> dict[str, int]:
        """The C addresses in libcuda.so.1 of ``cuLaunchKernel``, ``cuMemcpyDtoH_v2`` and a
        few more entry points (those this driver exports) for compiled host code."""
        if self._libcuda is None:
            try:
                self._libcuda = ctypes.CDLL("libcuda.so.1")
            except OSError as error:
                raise CudaUnavailableError(
                    f"CUDA is not available: libcuda.so.1 could not be loaded ({error})"
                ) from error
        addresses: dict[str, int] = {}
        for name in _REQUIRED_C_FUNCTIONS + _OPTIONAL_C_FUNCTIONS:
            try:
                address = ctypes.cast(getattr(self._libcuda, name), ctypes.c_void_p).value
            except AttributeError:
                if name in _REQUIRED_C_FUNCTIONS:
                    raise CudaError("CUDA_ERROR_NOT_FOUND", 500, name,
                                    "not exported by libcuda.so.1") from None
                continue
            if address:
                addresses[name] = int(address)
        return addresses


_lock = threading.Lock()
_driver: Any = None


def get_driver() -> Driver:
    """The process's CUDA driver, created on first use (thread-safe)."""
    driver = _driver
    if driver is not None:
        return driver  # type: ignore[no-any-return]
    return _create_driver()


def _create_driver() -> Driver:
    global _driver
    with _lock:
        if _driver is None:
            if os.environ.get("KDSL_CUDA_EMULATOR", "") not in ("", "0"):
                from kdsl.runtime.cuda.emulator import EmulatedDriver

                _driver = EmulatedDriver()
            else:
                _driver = Driver()
        return _driver  # type: ignore[no-any-return]


def current_driver() -> Driver | None:
    """The driver if one was created or installed, else None (creates nothing)."""
    return _driver  # type: ignore[no-any-return]


def set_driver(driver: Any) -> None:
    """Installs ``driver`` (any object with ``Driver``'s methods) as the process's driver."""
    global _driver
    with _lock:
        _driver = driver


def reset_driver() -> None:
    """Forgets the current driver; the next ``get_driver()`` creates a real one. Arrays
    keep the driver that allocated them."""
    set_driver(None)


def is_available() -> bool:
    """Whether a CUDA device can be used (creates the driver when it can)."""
    try:
        get_driver()
    except CudaUnavailableError:
        return False
    return True

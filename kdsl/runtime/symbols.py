"""The runtime's services for compiled code: print, the OpenMP runtime (or a serial
stand-in where libgomp is not installed) and the requested thread count.

Compiled modules receive these as a table of pointers through their init function.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import warnings
from typing import Any

import numpy as np

from kdsl.runtime.native_pool import DEFAULT_LIMIT
from kdsl.runtime.native_pool import SLOTS as POOL_SLOTS
from kdsl.runtime.threads import SETTINGS, run_serially_after_fork

_PRINT_T = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.POINTER(ctypes.c_int8),
                            ctypes.POINTER(ctypes.c_int64))
_REGION_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PARALLEL_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                               ctypes.c_uint32)
_INT_T = ctypes.CFUNCTYPE(ctypes.c_int32)
_RELEASE_T = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)
_ALLOCATE_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_int32,
                               ctypes.POINTER(ctypes.c_int64), ctypes.c_int32, ctypes.c_double)
_keep_alive: list[Any] = []
_table: list[Any] = []


def _format(kind: int, bits: int) -> str:
    if kind == 0:
        return str(bits)
    if kind == 1:
        return str(bits & 0xFFFFFFFFFFFFFFFF)
    if kind in (2, 3):
        value = struct.unpack("<d", struct.pack("<q", bits))[0]
        return str(np.float32(value)) if kind == 3 else repr(value)
    if kind == 4:
        return "True" if bits else "False"
    if kind == 5:
        return ctypes.string_at(bits & 0xFFFFFFFFFFFFFFFF).decode("utf-8")
    return "[" if kind == 6 else "]"


def _print(n: int, kinds: Any, payload: Any) -> None:
    out = []
    in_vector = first_in_vector = False
    for k in range(n):
        kind, bits = kinds[k], payload[k]
        if kind == 6:
            in_vector = first_in_vector = True
            out.append("[")
            continue
        if kind == 7:
            in_vector = False
            out.append("]")
            continue
        if in_vector and not first_in_vector:
            out.append(", ")
        first_in_vector = False
        out.append(_format(kind, bits))
    sys.stdout.write("".join(out) + "\n")


class Allocations:
    """Arrays a kernel call made, by call token, until the call returns and claims them."""

    def __init__(self) -> None:
        self.by_call: dict[int, dict[int, Any]] = {}  # NumPy arrays, or CUDA arrays
        self.lock = threading.Lock()

    def claim(self, token: int) -> dict[int, Any]:
        with self.lock:
            return self.by_call.pop(token, {})


ALLOCATIONS = Allocations()
_FILLS = {0: np.empty, 1: np.zeros, 2: np.ones}


class TemporaryPool:
    """Memory of the large arrays calls make, kept for the next calls' arrays of the same
    byte size once nothing uses it any more (a temporary at the end of its call, a
    returned array once the caller drops it): a kernel called again and again touches no
    fresh pages (no page faults, no zeroing by the OS). Up to ``limit`` bytes are kept,
    the oldest given back first; arrays under ``smallest`` bytes are left to NumPy.

    The pool itself is machine code (``native_pool``), so that compiled calls take and
    give back memory without running Python; this is its Python face. Where that code
    cannot be built for this NumPy, arrays are NumPy's own and nothing is kept."""

    smallest = 1 << 16

    def __init__(self) -> None:
        self._limit = DEFAULT_LIMIT
        self._functions: list[Any] = []

    def _native(self) -> list[Any] | None:
        if not self._functions:
            from kdsl.runtime.native_allocation import native_helper

            code = native_helper()
            if code is None:
                return None
            py_call = ctypes.PYFUNCTYPE  # the GIL stays held: it guards the pool
            self._functions[:] = [
                py_call(ctypes.py_object, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p,
                        ctypes.c_int32)(code["kdsl_pool_array"]),
                py_call(None)(code["kdsl_pool_clear"]),
                py_call(None, ctypes.c_int64)(code["kdsl_pool_set_limit"]),
                py_call(None, ctypes.c_void_p)(code["kdsl_pool_state"]),
            ]
        return self._functions

    @property
    def limit(self) -> int:
        """The most bytes the pool keeps."""
        return self._limit

    @limit.setter
    def limit(self, nbytes: int) -> None:
        self._limit = int(nbytes)
        native = self._native()
        if native is not None:
            native[2](self._limit)

    def _state(self) -> list[int]:
        state = (ctypes.c_int64 * (1 + 3 * POOL_SLOTS))()
        native = self._native()
        if native is not None:
            native[3](ctypes.addressof(state))
        return list(state)

    @property
    def bytes(self) -> int:
        """The bytes kept now."""
        return self._state()[0]

    def entries(self) -> list[tuple[int, int]]:
        """The buffers kept now, oldest first: (address, bytes)."""
        state = self._state()
        slots = [state[1 + 3 * k: 4 + 3 * k] for k in range(POOL_SLOTS)]
        return [(address, size) for size, address, _ in sorted(slots, key=lambda s: s[2])
                if address]

    def clear(self) -> None:
        """Gives every buffer kept back to the system."""
        native = self._native()
        if native is not None:
            native[1]()

    def array(self, dims: tuple[int, ...], type_code: int, zeroed: bool) -> np.ndarray | None:
        """A new C-contiguous array of pool memory (zeroed or not), or None where the pool
        cannot make it (its size out of the pool's range, or no memory)."""
        from kdsl.types import SCALAR_TYPES

        nbytes = np.dtype(SCALAR_TYPES[type_code].numpy_dtype).itemsize
        for d in dims:
            nbytes *= d
        native = self._native()
        if nbytes < self.smallest or nbytes > self._limit or native is None:
            return None
        shape = (ctypes.c_int64 * max(len(dims), 1))(*dims)
        made = native[0](type_code, len(dims), ctypes.addressof(shape), int(zeroed))
        return made


TEMPORARIES = TemporaryPool()


def recycle(made: dict[int, Any]) -> None:
    """Drops the call's references to the arrays it made: the pooled memory of those
    nothing else holds (not returned, and no view of them returned) goes back to the
    pool; ``made`` is emptied."""
    made.clear()


def _new_array(dims: tuple[int, ...], type_code: int, fill: int, value: float) -> np.ndarray:
    """A new array; one of the pool's sizes takes pooled memory, given back once nothing
    uses it."""
    from kdsl.types import SCALAR_TYPES

    array = TEMPORARIES.array(dims, type_code, zeroed=fill == 1)
    if array is None:
        dtype = SCALAR_TYPES[type_code].numpy_dtype
        if fill == 3:
            return np.full(dims, value, dtype=dtype)
        return _FILLS[fill](dims, dtype=dtype)
    if fill >= 2:
        array.fill(value if fill == 3 else fill - 1)
    return array


def allocate_object(type_code: int, ndim: int, shape_address: int, fill: int,
                    value: float) -> np.ndarray | None:
    """A new array for compiled code (``shape_address``: ``ndim`` int64 sizes), or None
    where it cannot be made."""
    from kdsl.types import SCALAR_TYPES

    try:
        dims = tuple((ctypes.c_int64 * ndim).from_address(shape_address))
        if any(d < 0 for d in dims):
            return None
        array = _new_array(dims, type_code, fill, value)
        if array.size == 0:
            array = np.empty(dims, dtype=SCALAR_TYPES[type_code].numpy_dtype)
    except (MemoryError, ValueError, OverflowError):
        return None
    return array


def _allocate(token: int, type_code: int, ndim: int, shape: Any, fill: int, value: float) -> int:
    array = allocate_object(type_code, ndim, ctypes.addressof(shape.contents), fill, value)
    if array is None:
        return 0
    pointer = int(array.ctypes.data)
    with ALLOCATIONS.lock:
        ALLOCATIONS.by_call.setdefault(token, {})[pointer] = array
    return pointer


def _release(token: int, pointer: int) -> None:
    released: dict[int, Any] = {}
    with ALLOCATIONS.lock:
        released[0] = ALLOCATIONS.by_call.get(token, {}).pop(pointer or 0, None)
    recycle(released)


def _serial_parallel(fn: int, data: int, n: int, flags: int) -> None:
    _REGION_T(fn)(data)


def _address(fn: Any) -> int:
    return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)


# How long an idle OpenMP thread spins before it sleeps (libgomp's GOMP_SPINCOUNT, in
# pause instructions, about 25 ns each): some 25 us, long enough to keep back-to-back
# parallel loops at about 1-2 us each, short enough that a waiting thread soon gives its
# core to whatever else runs (other processes, another threading runtime in this process)
# and, asleep, is woken promptly when its turn comes. libgomp's default (300,000, some
# ms) makes loops on busy cores wait for whole time slices; 1,000 is what it uses itself
# when it runs more threads than there are cores.
SPIN_COUNT = 1_000
_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _loaded_libgomp() -> str | None:
    """The file of the libgomp this process has loaded already (another library's: Numba's
    OpenMP threading layer), or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "/" in line and os.path.basename(path).startswith("libgomp.so"):
                    return path
    except OSError:
        pass
    return None


def _load_with_wait_policy(name: str) -> ctypes.CDLL:
    """Loads libgomp, which reads its wait policy once, when it is first loaded: a
    setting of the user's wins. Where another library loaded it already with its default
    policy (threads spin for milliseconds at a team's end), kdsl loads a copy of its own,
    a second runtime with its own threads: with the long spin, a team's last thread can
    wait behind the spinning first one for a whole time slice whenever the cores are
    shared (a product of 256^3 took 20 ms instead of 0.2 ms after NumPy and Numba)."""
    if any(v in os.environ for v in _WAIT_VARIABLES):
        return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    loaded = _loaded_libgomp()
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    try:
        if loaded is not None:
            private = _load_private_copy(loaded)
            if private is not None:
                return private
        return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    finally:
        del os.environ["GOMP_SPINCOUNT"]  # not inherited by child processes


def _load_private_copy(path: str) -> ctypes.CDLL | None:
    """libgomp loaded again from a copy of its file (the dynamic loader maps a file of
    another name and inode as a library of its own, as PyTorch's bundled copy is), its
    symbols kept local; the copy is deleted once mapped. None where it cannot be made."""
    import shutil
    import tempfile

    copy = None
    try:
        descriptor, copy = tempfile.mkstemp(prefix="kdsl-libgomp-", suffix=".so")
        with os.fdopen(descriptor, "wb") as target, open(path, "rb") as source:
            shutil.copyfileobj(source, target)
        return ctypes.CDLL(copy, mode=ctypes.RTLD_LOCAL)
    except OSError:
        return None
    finally:
        if copy is not None:
            try:
                os.unlink(copy)
            except OSError:
                pass


_preloaded: list[ctypes.CDLL] = []


def preload_openmp() -> None:
    """Loads libgomp (by its usual name) with kdsl's wait policy when kdsl is imported,
    if no other library has loaded it yet: a library that loads it later (Numba's OpenMP
    threading layer, at its first parallel call) then shares it, threads and policy, rather
    than kdsl needing a copy of its own beside one whose threads spin for milliseconds.
    Starts no threads (libgomp makes them at the first parallel loop); about 0.2 ms."""
    if _preloaded or _loaded_libgomp() is not None or any(v in os.environ for v in _WAIT_VARIABLES):
        return
    try:
        _preloaded.append(_load_with_wait_policy("libgomp.so.1"))
    except OSError:
        pass


def _openmp() -> list[int] | None:
    try:  # the usual soname first: find_library runs ldconfig (milliseconds)
        lib = _preloaded[0] if _preloaded else _load_with_wait_policy("libgomp.so.1")
    except OSError:
        import ctypes.util

        name = ctypes.util.find_library("gomp")
        if name is None:
            return None
        try:
            lib = _load_with_wait_policy(name)
        except OSError:
            return None
    _keep_alive.append(lib)
    # libgomp's threads do not survive fork(): a child (a multiprocessing Pool started
    # with fork) runs its parallel loops serially instead of waiting for them forever
    os.register_at_fork(after_in_child=run_serially_after_fork)
    return [_address(lib.GOMP_parallel), _address(lib.omp_get_thread_num),
            _address(lib.omp_get_num_threads)]


def hook_table() -> ctypes.Array:
    """Pointers in the order of codegen.abi.HOOK_ORDER."""
    if _table:
        return _table[0]
    printer = _PRINT_T(_print)
    _keep_alive.append(printer)
    openmp = _openmp()
    if openmp is None:
        warnings.warn("libgomp (the OpenMP runtime) was not found: parallel loops run serially",
                      RuntimeWarning, stacklevel=3)
        fallbacks = [_PARALLEL_T(_serial_parallel), _INT_T(lambda: 0), _INT_T(lambda: 1)]
        _keep_alive.extend(fallbacks)
        openmp = [_address(f) for f in fallbacks]
    allocator = _ALLOCATE_T(_allocate)
    releaser = _RELEASE_T(_release)
    _keep_alive.extend([allocator, releaser])
    from kdsl.runtime.gemm_library import gemm_slots

    pointers = [_address(printer), *openmp, ctypes.addressof(SETTINGS), _address(allocator),
                _address(releaser), 0, 0, 0,  # no CUDA hooks on the CPU
                gemm_slots()]
    table = (ctypes.c_void_p * len(pointers))(*pointers)
    _table.append(table)
    return table


preload_openmp()

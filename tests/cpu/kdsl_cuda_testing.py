"""The differential tests on CUDA: each kernel that ``check`` runs on the CPU also runs
on device copies of its arguments, compared with the same reference.

``KDSL_TEST_CUDA`` chooses the device: ``gpu`` (the real driver; an error where there is
none), ``emulator`` (kdsl's CPU emulation of the device, ``kdsl.runtime.cuda.emulator``),
``off``; by default (``auto``) a GPU where one is present, else the emulator.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

import kdsl as kd


@functools.cache
def _mode() -> str:
    mode = os.environ.get("KDSL_TEST_CUDA", "auto").lower()
    if mode in ("0", "off", "no", "false", ""):
        return "off"
    from kdsl.runtime.cuda import driver

    if mode == "gpu":
        driver.get_driver()  # raises where there is no GPU
        return "gpu"
    if mode == "auto" and os.environ.get("KDSL_CUDA_EMULATOR", "") in ("", "0") \
            and driver.is_available():
        return "gpu"
    return "emulator"


_cpu_only = threading.local()


def enabled() -> bool:
    return _mode() != "off" and not getattr(_cpu_only, "active", False)


@contextlib.contextmanager
def cpu_only() -> Iterator[None]:
    """Checks of CPU-only behaviour (say, the order a serial loop takes atomics in)."""
    _cpu_only.active = True
    try:
        yield
    finally:
        _cpu_only.active = False


@contextlib.contextmanager
def on_device() -> Iterator[None]:
    """The CUDA device of these tests installed as the process's driver."""
    from kdsl.runtime.cuda import driver

    previous = driver.current_driver()
    driver.set_driver(_driver())
    try:
        yield
    finally:
        driver.set_driver(previous)


def _driver() -> Any:
    from kdsl.runtime.cuda import driver

    if _mode() == "gpu":
        return driver.get_driver()
    global _EMULATOR
    if _EMULATOR is None:
        from kdsl.runtime.cuda.emulator import EmulatedDriver

        _EMULATOR = EmulatedDriver()
    return _EMULATOR


_EMULATOR: Any = None


def to_device(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(to_device(v) for v in x)
    if type(x) is np.ndarray and x.ndim > 0:
        return kd.array(x, device="cuda")
    return x


def device_arguments(kernel: Any, args: tuple) -> tuple:
    """``args`` with the arrays bound to array parameters moved to the device (vectors,
    matrices and scalars are values the host passes)."""
    from kdsl import types as T
    from kdsl.frontend.annotations import parameter_annotations

    annotations = parameter_annotations(kernel.py_function)
    return tuple(a if isinstance(t, (T.VectorType, T.MatrixType, T.ScalarType)) else to_device(a)
                 for a, t in zip(args, annotations))


def to_host(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(to_host(v) for v in x)
    if getattr(x, "device", None) == "cuda":
        return x.numpy()
    return x


def _assert_close(actual: Any, expected: Any, rtol: float, atol: float, what: str) -> None:
    """As ``assert_same``, with floats allowed the rounding of a different order of
    summation (block reductions) and of contracted multiply-adds (the GPU's FMAs)."""
    from kdsl_cpu_util import assert_same

    if isinstance(expected, tuple) and isinstance(actual, tuple) and len(actual) == len(expected):
        for k, (a, e) in enumerate(zip(actual, expected)):
            _assert_close(a, e, rtol, atol, f"{what}[{k}]")
        return
    e = np.asarray(expected) if expected is not None else None
    if e is not None and e.dtype.kind == "f" and e.size:
        tol = 2e-5 if e.dtype.itemsize <= 4 else 1e-12
        finite = np.abs(e[np.isfinite(e)])
        scale = float(finite.max()) if finite.size else 0.0
        rtol, atol = max(rtol, tol), max(atol, tol * scale)
    assert_same(actual, expected, rtol, atol, what)


def check_on_device(kernel: Any, args: tuple, expected: Any, expected_args: tuple,
                    rtol: float, atol: float) -> None:
    """``kernel`` on device copies of ``args``: its result and its arguments afterwards
    equal ``expected`` and ``expected_args``."""
    with on_device():
        device_args = device_arguments(kernel, args)
        actual = to_host(kernel(*device_args))
        _assert_close(actual, expected, rtol, atol, what="result on CUDA")
        for k, (a, e) in enumerate(zip(device_args, expected_args)):
            if isinstance(e, np.ndarray):
                _assert_close(to_host(a), e, rtol, atol, what=f"argument {k} after the call on CUDA")

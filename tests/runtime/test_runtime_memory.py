"""Compiled kernels give their memory back: once nothing can call a specialisation (its
kernel was deleted or redefined), its machine code is unloaded (the shared library
closed, or the JIT engine disposed), also for CUDA kernels on the emulated device. The
tests count live code objects and watch weak references; no memory timings."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import kdsl as kd
from kdsl.codegen import cpu, native_code

COUNT = 12


def define_kernel(factor: int):
    """A kernel with its own source (a new specialisation, never loaded before)."""
    namespace = {"kd": kd}
    text = (f"def scaled_{factor}(x, out):\n"
            f"    for i in kd.prange(x.shape[0]):\n"
            f"        out[i] = x[i] * {factor}.0 + kd.sin(x[i])\n")
    filename = f"<generated kernel {factor}>"
    import linecache

    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)
    return kd.kernel(namespace[f"scaled_{factor}"])


def define_call_delete(start: int, device: str = "cpu") -> list[weakref.ref]:
    x = np.linspace(-1.0, 2.0, 33)
    refs = []
    for factor in range(start, start + COUNT):
        k = define_kernel(factor)
        out = np.zeros_like(x)
        expected = np.zeros_like(x)
        k.python(x, expected)
        if device == "cpu":
            k(x, out)
        else:
            result = kd.zeros(x.shape, dtype=kd.f64, device="cuda")
            k(kd.array(x, device="cuda"), result)
            out = result.numpy()
        np.testing.assert_allclose(out, expected, rtol=1e-12)
        (compiled,) = k._specialisations.values()
        refs.append(weakref.ref(compiled.keep_alive if device == "cpu" else compiled.cpu.keep_alive))
        refs.append(weakref.ref(k))
        del k, compiled
    gc.collect()
    return refs


def test_deleted_kernels_unload_their_shared_libraries():
    gc.collect()
    before = native_code.live_count()
    refs = define_call_delete(1000)
    assert [r for r in refs if r() is not None] == []
    assert native_code.live_count() == before


def test_deleted_kernels_dispose_their_jit_engines(monkeypatch):
    monkeypatch.setattr(cpu, "linker", lambda: None)  # no linker: code goes into JIT engines
    gc.collect()
    before = native_code.live_count()
    refs = define_call_delete(2000)
    assert [r for r in refs if r() is not None] == []
    assert native_code.live_count() == before


def test_live_kernels_keep_their_code_and_share_it():
    gc.collect()
    before = native_code.live_count()
    first, again = define_kernel(3000), define_kernel(3000)
    x = np.arange(5.0)
    a, b = np.zeros(5), np.zeros(5)
    first(x, a)
    again(x, b)  # the same source in another kernel object: the same loaded code
    assert native_code.live_count() == before + 1
    del first
    gc.collect()
    again(x, b)
    np.testing.assert_array_equal(a, b)
    assert native_code.live_count() == before + 1
    del again
    gc.collect()
    assert native_code.live_count() == before


@pytest.fixture
def emulated_cuda():
    """A fresh emulated CUDA device installed as the driver."""
    from kdsl.runtime.cuda import driver
    from kdsl.runtime.cuda.emulator import EmulatedDriver

    previous = driver.current_driver()
    device = EmulatedDriver()
    driver.set_driver(device)
    yield device
    driver.set_driver(previous)


def test_deleted_cuda_kernels_unload_host_code_and_device_modules(emulated_cuda):
    gc.collect()
    before = native_code.live_count()
    modules_before = len(emulated_cuda.modules)
    refs = define_call_delete(4000, device="cuda")
    assert [r for r in refs if r() is not None] == []
    assert native_code.live_count() == before
    assert len(emulated_cuda.modules) == modules_before

"""Helpers of the CPU differential tests: run a kernel compiled and as plain Python on
identical copies of its arguments and compare everything that comes out (the return
value and every array argument, which kernels write in place).

Also builds kernels from source text (written to a temporary module and imported, since
kdsl reads a kernel's source with ``inspect``), used by table-driven tests and by the
random-program generator.
"""

from __future__ import annotations

import atexit
import importlib.util
import itertools
import os
import shutil
import sys
import tempfile
import textwrap
from typing import Any

import kdsl_cuda_testing as cuda_testing
import numpy as np

import kdsl as kd

_SOURCE_DIR: str | None = None
_COUNTER = itertools.count()

HEADER = "import math\nimport numpy as np\nimport kdsl as kd\n\n"


def module_from_source(src: str, prefix: str = "gen") -> Any:
    """Writes ``src`` (after a header importing math, numpy and kdsl) to a new module file
    in a temporary folder and imports it."""
    global _SOURCE_DIR
    if _SOURCE_DIR is None:
        _SOURCE_DIR = tempfile.mkdtemp(prefix="kdsl_cpu_tests_")
        atexit.register(shutil.rmtree, _SOURCE_DIR, ignore_errors=True)
    name = f"kdsl_cpu_{prefix}_{os.getpid()}_{next(_COUNTER)}"
    path = os.path.join(_SOURCE_DIR, name + ".py")
    with open(path, "w") as f:
        f.write(HEADER + textwrap.dedent(src))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def kernel_from_source(src: str, name: str = "k", prefix: str = "gen") -> Any:
    return getattr(module_from_source(src, prefix), name)


# --- data ------------------------------------------------------------------------------


def nonzero_floats(rng: np.random.Generator, shape: Any, dtype: Any = np.float32,
                   lo: float = 0.25, hi: float = 4.0) -> np.ndarray:
    """Random floats with magnitudes in [lo, hi) and random signs (never zero)."""
    mag = rng.uniform(lo, hi, size=shape)
    sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(dtype)


def positive_floats(rng: np.random.Generator, shape: Any, dtype: Any = np.float32,
                    lo: float = 0.25, hi: float = 4.0) -> np.ndarray:
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def nonzero_ints(rng: np.random.Generator, shape: Any, dtype: Any = np.int64,
                 lo: int = -50, hi: int = 50) -> np.ndarray:
    """Random integers in [lo, hi] without 0."""
    values = rng.integers(lo, hi, size=shape, endpoint=True)
    values[values == 0] = 1
    return values.astype(dtype)


# --- copies that keep the layout -------------------------------------------------------


def clone(x: Any) -> Any:
    """A deep copy; an array keeps its exact strides (including negative ones)."""
    if isinstance(x, tuple):
        return tuple(clone(v) for v in x)
    if isinstance(x, list):
        return [clone(v) for v in x]
    if type(x) is not np.ndarray:
        return x.copy() if isinstance(x, np.ndarray) else x
    if x.size == 0 or x.flags.c_contiguous:
        return x.copy()
    lo = sum(min(0, (n - 1) * s) for n, s in zip(x.shape, x.strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(x.shape, x.strides)) + x.itemsize
    buffer = np.zeros(hi - lo, dtype=np.uint8)
    out = np.ndarray(x.shape, dtype=x.dtype, buffer=buffer, offset=-lo, strides=x.strides)
    out[...] = x
    assert out.strides == x.strides
    return out


# --- comparisons -----------------------------------------------------------------------


def _kind_matches(actual: Any, expected: Any) -> bool:
    a = np.asarray(actual).dtype
    if isinstance(expected, (np.ndarray, np.generic)):
        return a == np.asarray(expected).dtype
    if isinstance(expected, bool):
        return a.kind == "b"
    if isinstance(expected, int):
        return a.kind in "iu"
    if isinstance(expected, float):
        return a.kind == "f"
    return True


def assert_same(actual: Any, expected: Any, rtol: float = 0.0, atol: float = 0.0,
                what: str = "result") -> None:
    """``actual`` equals ``expected`` (exactly, or within rtol/atol), with the same
    structure, shape and dtype (Python scalars match any dtype of their kind)."""
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple), f"{what}: expected a tuple, got {type(actual)}"
        assert len(actual) == len(expected), f"{what}: tuple lengths differ"
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, rtol, atol, f"{what}[{k}]")
        return
    if expected is None:
        assert actual is None, f"{what}: expected None, got {actual!r}"
        return
    assert actual is not None, f"{what}: expected {expected!r}, got None"
    a, e = np.asarray(actual), np.asarray(expected)
    assert _kind_matches(actual, expected), (
        f"{what}: dtype {a.dtype} differs from the reference's {e.dtype} ({expected!r})"
    )
    assert a.shape == e.shape, f"{what}: shape {a.shape} differs from {e.shape}"
    if rtol == 0 and atol == 0 or e.dtype.kind not in "fc":
        np.testing.assert_array_equal(a, e, err_msg=what, strict=False)
    else:
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True, err_msg=what)


def check(kernel: Any, *args: Any, rtol: float = 0.0, atol: float = 0.0) -> Any:
    """Runs ``kernel`` as plain Python on copies of ``args`` (same layouts) and compiled on
    ``args`` themselves; asserts that the results and all arguments afterwards agree.
    Where the suite runs CUDA (see ``cuda_testing``), the kernel also runs on device
    copies of ``args``, compared the same way. Returns the compiled result (the compiled
    writes stay in ``args``)."""
    python_args = clone(args)
    device_args = clone(args) if cuda_testing.enabled() else None
    with np.errstate(all="ignore"):  # integer wrap-around warns in NumPy scalar code
        expected = kernel.python(*python_args)
    compiled_args = args
    actual = kernel(*compiled_args)
    assert_same(actual, expected, rtol, atol)
    for k, (a, e) in enumerate(zip(compiled_args, python_args)):
        if isinstance(e, np.ndarray):
            assert_same(a, e, rtol, atol, what=f"argument {k} after the call")
    if device_args is not None:
        cuda_testing.check_on_device(kernel, device_args, expected, python_args, rtol, atol)
    return actual


def with_threads(n: int, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with ``n`` threads for parallel loops."""
    previous = kd.get_num_threads()
    kd.set_num_threads(n)
    try:
        return fn(*args, **kwargs)
    finally:
        kd.set_num_threads(previous)


def fuzz_settings(examples: int) -> Any:
    """Hypothesis settings of these tests: deterministic and modest by default (every new
    kernel costs a compile). ``KDSL_FUZZ_EXAMPLES=500`` runs that many random examples
    per test instead, with a fresh seed each time, to hunt for bugs."""
    from hypothesis import HealthCheck, settings

    override = os.environ.get("KDSL_FUZZ_EXAMPLES")
    return settings(
        max_examples=int(override) if override else examples,
        derandomize=not override,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much],
    )

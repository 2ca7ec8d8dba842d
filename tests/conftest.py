"""Fixtures of the whole suite: a private disk cache for the session (so no run reads
another's entries), the thread count restored after every test, and parallel loops that
start a team of threads however small they are (so that the small inputs of tests
exercise the parallel code; tests/cpu/test_cpu_parallel_policy.py tests the default)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

import kdsl as kd
from kdsl.runtime.threads import set_min_parallel_work


@pytest.fixture(scope="session", autouse=True)
def _private_kernel_cache():
    """Compiled code goes to a fresh temporary cache, removed at the end of the session."""
    directory = tempfile.mkdtemp(prefix="kdsl_test_cache_")
    previous = os.environ.get("KDSL_CACHE_DIR")
    os.environ["KDSL_CACHE_DIR"] = directory
    yield directory
    if previous is None:
        os.environ.pop("KDSL_CACHE_DIR", None)
    else:
        os.environ["KDSL_CACHE_DIR"] = previous
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def _restore_num_threads():
    previous = kd.get_num_threads()
    yield
    kd.set_num_threads(previous)


@pytest.fixture(autouse=True)
def _small_parallel_loops_use_threads():
    previous = set_min_parallel_work(0)
    yield
    set_min_parallel_work(previous)


def _ptx_checks_enabled() -> bool:
    """Every kernel the suite compiles is also compiled to PTX and assembled by ptxas,
    where libNVVM and ptxas are installed (KDSL_TEST_PTX=0 turns this off)."""
    if os.environ.get("KDSL_TEST_PTX", "1") in ("0", "", "false", "no", "off"):
        return False
    from kdsl.codegen import nvvm

    if nvvm.ptxas() is None:
        return False
    try:
        nvvm.nvvm_version()
    except nvvm.NvvmUnavailable:
        return False
    return True


PTX_CHECKED: dict[str, str] = {}  # cache key -> kernel name


@pytest.fixture(scope="session", autouse=True)
def _check_ptx_of_every_kernel():
    if not _ptx_checks_enabled():
        yield
        return
    from kdsl.codegen.nvvm import check_with_ptxas
    from kdsl.runtime import compiler

    original = compiler.compile_kernel

    def compile_and_check_ptx(fn, name, params, deps, options):
        compiled = original(fn, name, params, deps, options)
        key = compiler.cache_key(deps, params, options)
        if key not in PTX_CHECKED:
            PTX_CHECKED[key] = name
            check_with_ptxas(compiler.ptx_text(fn, params, options, f"kdsl_entry_{name}"))
        return compiled

    compiler.compile_kernel = compile_and_check_ptx
    yield
    compiler.compile_kernel = original


def pytest_terminal_summary(terminalreporter):
    if PTX_CHECKED:
        terminalreporter.write_line(
            f"PTX of {len(PTX_CHECKED)} kernel specialisations generated and assembled by ptxas")

"""Fixtures of the whole suite: a private disk cache for the run (so no run reads
another's entries), the thread count restored after every test, and parallel loops that
start a team of threads however small they are (so that the small inputs of tests
exercise the parallel code; tests/cpu/test_cpu_parallel_policy.py tests the default).

Under pytest-xdist (``-n 2``) the workers share the run's cache folder (entries are
written atomically) and its record of the kernels whose PTX ptxas has accepted, so a
kernel two workers compile is built and checked once.

The property tests (hypothesis) draw the same examples on every run, so that a run
passes or fails on the code alone; ``HYPOTHESIS_PROFILE=explore`` draws new ones each
run (with ``KDSL_FUZZ_EXAMPLES`` for how many), to look for bugs."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

import kdsl as kd
from kdsl.runtime.threads import set_min_parallel_work

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

RUN_FOLDER = "KDSL_TEST_RUN_DIR"  # set by the controlling process, read by xdist workers
_SAVED_ENVIRONMENT = pytest.StashKey[dict[str, "str | None"]]()


def pytest_configure(config: pytest.Config) -> None:
    """The run's folder: made by the controlling process (a plain run or xdist's
    controller) before any worker starts; workers inherit its name in the environment."""
    if hasattr(config, "workerinput"):
        return
    root = Path(tempfile.mkdtemp(prefix="kdsl_test_run_"))
    (root / "cache").mkdir()
    (root / "ptx_checked").mkdir()
    config.stash[_SAVED_ENVIRONMENT] = {name: os.environ.get(name)
                                        for name in (RUN_FOLDER, "KDSL_CACHE_DIR")}
    os.environ[RUN_FOLDER] = str(root)
    os.environ["KDSL_CACHE_DIR"] = str(root / "cache")


def pytest_unconfigure(config: pytest.Config) -> None:
    saved = config.stash.get(_SAVED_ENVIRONMENT, None)
    if saved is None:
        return
    root = os.environ.get(RUN_FOLDER)
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if root:
        shutil.rmtree(root, ignore_errors=True)


def _run_folder() -> Path:
    return Path(os.environ[RUN_FOLDER])


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


@pytest.fixture(scope="session", autouse=True)
def _check_ptx_of_every_kernel():
    if not _ptx_checks_enabled():
        yield
        return
    from kdsl.codegen.nvvm import check_with_ptxas
    from kdsl.runtime import compiler

    original = compiler.compile_kernel
    checked = _run_folder() / "ptx_checked"  # one empty file per accepted cache key

    def compile_and_check_ptx(fn, name, params, deps, options):
        compiled = original(fn, name, params, deps, options)
        mark = checked / compiler.cache_key(deps, params, options)
        if not mark.exists():
            check_with_ptxas(compiler.ptx_text(fn, params, options, f"kdsl_entry_{name}"))
            mark.touch()
        return compiled

    compiler.compile_kernel = compile_and_check_ptx
    yield
    compiler.compile_kernel = original


def pytest_terminal_summary(terminalreporter):
    if hasattr(terminalreporter.config, "workerinput") or RUN_FOLDER not in os.environ:
        return
    count = sum(1 for _ in (_run_folder() / "ptx_checked").iterdir())
    if count:
        terminalreporter.write_line(
            f"PTX of {count} kernel specialisations generated and assembled by ptxas")

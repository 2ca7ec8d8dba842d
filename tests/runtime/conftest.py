"""Fixtures of the runtime tests: a private disk cache for the session, the thread count
restored after every test, and a runner of fresh Python processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_kernel_cache():
    """Compiled code goes to a fresh temporary cache, so no run reads another's entries."""
    directory = tempfile.mkdtemp(prefix="kdsl_runtime_cache_")
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
    import kdsl as kd

    previous = kd.get_num_threads()
    yield
    kd.set_num_threads(previous)


REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_python():
    """Runs ``code`` in a fresh interpreter with ``env`` on top of a clean environment
    (no inherited KDSL_* settings) and ``path`` importable; returns the finished process."""

    def run(code: str, env: dict[str, str] | None = None, path: Path | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("KDSL_")}
        python_path = [str(REPOSITORY)] + ([str(path)] if path is not None else [])
        environment["PYTHONPATH"] = os.pathsep.join(python_path)
        environment.update(env or {})
        result = subprocess.run([sys.executable, "-c", code], env=environment,
                                capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"the subprocess failed ({result.returncode}):\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    return run

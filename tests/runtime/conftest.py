"""Fixtures of the runtime tests: a runner of fresh Python processes (the private cache and
the thread-count restore come from tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def kdsl_snapshot(tmp_path_factory) -> Path:
    """A folder holding a copy of kdsl taken when the session starts, which the fresh
    interpreters import. The size and modification time of kdsl's files are part of every
    cache key (a changed compiler never reuses old code), so a checkout edited while the
    suite runs (a merge, a rebase) would otherwise change the key between two processes
    of one test, and a process would compile anew where the test expects a cache hit."""
    root = tmp_path_factory.mktemp("kdsl_snapshot")
    shutil.copytree(REPOSITORY / "kdsl", root / "kdsl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture
def run_python(kdsl_snapshot):
    """Runs ``code`` in a fresh interpreter with ``env`` on top of a clean environment
    (no inherited KDSL_* settings), kdsl as the session started with it, and ``path``
    importable; returns the finished process."""

    def run(code: str, env: dict[str, str] | None = None, path: Path | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("KDSL_")}
        python_path = [str(kdsl_snapshot)] + ([str(path)] if path is not None else [])
        environment["PYTHONPATH"] = os.pathsep.join(python_path)
        environment.update(env or {})
        # run from the snapshot's folder: ``python -c`` puts the working folder first on
        # sys.path, where a checkout's kdsl would be found before the snapshot
        result = subprocess.run([sys.executable, "-c", code], env=environment, cwd=kdsl_snapshot,
                                capture_output=True, text=True, timeout=600)
        if check and result.returncode != 0:
            raise AssertionError(f"the subprocess failed ({result.returncode}):\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    return run

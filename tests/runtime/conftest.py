"""Fixtures of the runtime tests: a runner of fresh Python processes (the private cache and
the thread-count restore come from tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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

"""Fixtures of the whole suite: a private disk cache for the session (so no run reads
another's entries) and the thread count restored after every test."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

import kdsl as kd


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

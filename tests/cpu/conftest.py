"""Fixtures of the CPU differential tests: a private disk cache for the session, the
thread count restored after every test, and a seeded random generator."""

from __future__ import annotations

import os
import shutil
import tempfile
import zlib

import numpy as np
import pytest

import kdsl as kd


@pytest.fixture(scope="session", autouse=True)
def _private_kernel_cache():
    """Compiled code goes to a fresh temporary cache, so no run reads another's entries."""
    directory = tempfile.mkdtemp(prefix="kdsl_cpu_cache_")
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


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: reproducible, different per test."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)

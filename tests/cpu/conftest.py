"""Fixtures of the CPU differential tests: a seeded random generator (the private cache and
the thread-count restore come from tests/conftest.py)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: reproducible, different per test."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)

"""Fixtures of the contract tests (programs written as users of NumPy, Numba, Taichi and
Warp write them, checked against API.md): the differential helpers of tests/cpu and a
seeded random generator."""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu"))


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: reproducible, different per test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))

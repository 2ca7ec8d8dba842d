"""The gradient tests share the differential helpers of tests/cpu (kdsl_cpu_util)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu"))

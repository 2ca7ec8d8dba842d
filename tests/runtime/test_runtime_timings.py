"""KDSL_TIMINGS=1 prints where each specialisation's compile time went."""

from __future__ import annotations

import re

PROGRAM = """
import numpy as np
import kdsl as kd

@kd.kernel
def affine(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * 2.0 + 1.0

a, out = np.arange(6.0), np.zeros(6)
affine(a, out)
affine(a, out)
affine(a.astype(np.float32), out.astype(np.float32))
print(out.tolist())
"""



def run_program(run_python, tmp_path, env):
    (tmp_path / "timed_program.py").write_text(PROGRAM)
    return run_python("import timed_program", env=env, path=tmp_path)


STAGES = ("dependencies", "frontend", "passes", "codegen", "llvm optimize", "llvm emit")


def test_each_compile_reports_its_stages(run_python, tmp_path):
    env = {"KDSL_TIMINGS": "1", "KDSL_CACHE_DIR": str(tmp_path / "cache")}
    result = run_program(run_python, tmp_path, env)
    assert result.stdout.strip() == "[1.0, 3.0, 5.0, 7.0, 9.0, 11.0]"
    lines = [line for line in result.stderr.splitlines() if line.startswith("kdsl timings:")]
    assert len(lines) == 2  # one per specialisation, none for the repeated call
    for line in lines:
        assert line.startswith("kdsl timings: affine: ")
        for name in STAGES:
            assert re.search(rf"\b{name} \d+\.\d ms", line), (name, line)
        assert re.search(r"; total \d+\.\d ms$", line)


def test_a_cached_specialisation_reports_its_load(run_python, tmp_path):
    env = {"KDSL_TIMINGS": "1", "KDSL_CACHE_DIR": str(tmp_path / "cache")}
    run_program(run_python, tmp_path, env)
    line = run_program(run_python, tmp_path, env).stderr.splitlines()[0]
    assert "load" in line and "frontend" not in line


def test_nothing_is_printed_by_default(run_python, tmp_path):
    result = run_program(run_python, tmp_path, {"KDSL_CACHE_DIR": str(tmp_path / "cache")})
    assert "kdsl timings" not in result.stderr

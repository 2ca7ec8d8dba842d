"""kdsl.distributed under ``mpiexec``: each launch runs a program whose checks compare the
distributed results with one-process references (bit for bit for the grid solver; within
float rounding, with no particle lost or duplicated, for particles), and a rank that
raises ends the whole job with an error instead of hanging.

Skipped where mpi4py or mpiexec is missing (install the ``kdsl[mpi]`` extra).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

PROGRAMS = Path(__file__).resolve().parent / "programs"
ROOT = Path(__file__).resolve().parents[2]


def find_mpiexec() -> str | None:
    beside_python = Path(sys.executable).parent / "mpiexec"
    return str(beside_python) if beside_python.exists() else shutil.which("mpiexec")


MPIEXEC = find_mpiexec()
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")


def launch(ranks: int, program: str, timeout: float,
           extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["KDSL_NUM_THREADS"] = "1"                  # ranks share the cores
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"  # Open MPI: more ranks than cores
    env.update(extra_env or {})
    assert MPIEXEC is not None
    return subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, str(PROGRAMS / program)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


# ranks 1 first: it fills the kernel cache that the larger launches then read
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_distributed_runs_match_one_process(ranks: int) -> None:
    # the emulated CUDA device tests the host-staged exchange of CUDA arrays once
    extra = {"KDSL_CUDA_EMULATOR": "1"} if ranks == 2 else {}
    result = launch(ranks, "grid_and_particles.py", timeout=180, extra_env=extra)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert f"all checks passed on {ranks} ranks" in result.stdout


def test_a_rank_that_raises_ends_the_job() -> None:
    try:
        result = launch(2, "rank_raises.py", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the job hung after a rank raised")
    assert result.returncode != 0
    assert "rank 1 failed on purpose" in result.stderr
    assert "rank 0 passed the barrier" not in result.stdout

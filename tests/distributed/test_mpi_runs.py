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
pytest.importorskip("PIL")          # the programs import the gallery scripts

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


def run_script(command: list[str], timeout: float) -> None:
    env = dict(os.environ, KDSL_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"


@pytest.mark.parametrize("script,options,ranks", [
    ("heat_diffusion.py", ["--size", "64"], 2),
    ("lennard_jones.py", ["--particles", "300", "--equilibrate", "40", "--steps", "40",
                          "--size", "128"], 2),
])
def test_gallery_distributed_writes_the_same_picture(script: str, options: list[str],
                                                     ranks: int, tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    path = str(ROOT / "gallery" / script)
    single, distributed = tmp_path / "single.png", tmp_path / "distributed.png"
    run_script([sys.executable, path, *options, "--output", str(single)], timeout=120)
    assert MPIEXEC is not None
    run_script([MPIEXEC, "-n", str(ranks), sys.executable, path, "--distributed", *options,
                "--output", str(distributed)], timeout=120)
    with Image.open(single) as a, Image.open(distributed) as b:
        expected, got = np.asarray(a, np.int16), np.asarray(b, np.int16)
    if script == "heat_diffusion.py":
        np.testing.assert_array_equal(got, expected)        # the solver is bit for bit
    else:
        # positions agree to float rounding: a few antialiased edge pixels may differ
        assert got.shape == expected.shape
        assert np.abs(got - expected).mean() < 0.5

"""The gallery scripts end to end: each runs in --small mode and writes a real picture, on
the CPU and on the CUDA device (tests/test_gallery_particles.py and
tests/test_gallery_fields.py check their kernels against NumPy, physics and their own
plain-Python reference)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from kdsl_gallery_util import SCRIPTS

Image = pytest.importorskip("PIL.Image")


# --- every script, end to end ---------------------------------------------------------


def test_gallery_is_not_empty() -> None:
    assert {"lennard_jones.py", "heat_diffusion.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_small_run_writes_png(script: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    output = tmp_path / "picture.png"
    result = subprocess.run(
        [sys.executable, str(script), "--small", "--output", str(output)],
        cwd=workdir, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.stdout.strip(), "the script printed nothing"
    assert output.is_file() and output.stat().st_size > 0
    assert list(workdir.iterdir()) == [], "the script wrote into its working directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "picture.png"]

    with Image.open(output) as image:
        image.verify()
    with Image.open(output) as image:
        assert image.format == "PNG"
        assert image.width >= 64 and image.height >= 64
        pixels = np.asarray(image.convert("RGB"))
    colors = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colors) > 16, "the picture is (nearly) a single flat colour"
    assert pixels.std() > 5.0


# On the GPU each script runs as --small; on kdsl's emulated device (no GPU here) the
# block reductions are slow to emulate, so the grids are smaller still.
EMULATED_RUNS = {
    "heat_diffusion": ["--size", "48"],
    "stable_fluids": ["--size", "32", "--steps", "60", "--jacobi", "20"],
    "galaxy_collision": ["--small"],
    "lennard_jones": ["--particles", "400", "--equilibrate", "150", "--steps", "150",
                      "--size", "200"],
    "soft_body_throw": ["--small"],
    "sph_dam_break": ["--spacing", "0.05", "--time", "0.05", "--size", "64"],
}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_runs_on_cuda(script: Path, tmp_path: Path) -> None:
    """``--device cuda``: the arrays on the device, the whole run there; each script
    checks its own physics (convergence, conservation, divergence) and fails if it is
    off."""
    import os

    from kdsl.runtime.cuda.driver import is_available

    env = dict(os.environ)
    if is_available():
        options = ["--small"]
    else:
        env["KDSL_CUDA_EMULATOR"] = "1"
        options = EMULATED_RUNS[script.stem]
    output = tmp_path / "picture.png"
    result = subprocess.run(
        [sys.executable, str(script), *options, "--device", "cuda", "--output", str(output)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "device: cuda" in result.stdout
    with Image.open(output) as image:
        assert np.asarray(image.convert("RGB")).std() > 5.0

"""Every Python example in the README and the docs runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _examples() -> list[tuple[str, str]]:
    found = []
    for doc in DOCUMENTS:
        for k, match in enumerate(_BLOCK.finditer(doc.read_text())):
            found.append((f"{doc.name}#{k}", match.group(1)))
    return found


@pytest.mark.parametrize("name,code", _examples(), ids=[n for n, _ in _examples()])
def test_example_runs(name: str, code: str, tmp_path: Path) -> None:
    env = dict(os.environ)
    if code.startswith("# needs a GPU"):
        from kdsl.runtime.cuda.driver import is_available

        if not is_available():  # run on kdsl's emulated device instead
            env["KDSL_CUDA_EMULATOR"] = "1"
    elif "kd.ptx" in code or ".ptx(" in code:
        from kdsl.codegen import nvvm

        try:
            nvvm.nvvm_version()
        except nvvm.NvvmUnavailable:
            pytest.skip("libNVVM is not installed")
    script = tmp_path / "example.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"

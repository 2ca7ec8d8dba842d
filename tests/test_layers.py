"""The pipeline's layers import downwards only: the frontend, the IR and the code
generators never import the runtime (which drives them), and the CPU array never imports
the device arrays built on it."""

from __future__ import annotations

import ast
import pathlib

import kdsl

PACKAGE = pathlib.Path(kdsl.__file__).parent


def _imports(path: pathlib.Path) -> set[str]:
    """Every module ``path`` imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _modules(layer: str) -> list[pathlib.Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


def test_compiler_layers_do_not_import_the_runtime() -> None:
    upward = [f"{p.relative_to(PACKAGE)} imports {name}"
              for layer in ("frontend", "ir", "codegen") for p in _modules(layer)
              for name in sorted(_imports(p)) if name.startswith("kdsl.runtime")]
    assert upward == []


def test_the_cpu_array_does_not_import_device_arrays() -> None:
    names = _imports(PACKAGE / "runtime" / "arrays.py")
    assert not [n for n in names if n.startswith("kdsl.runtime.cuda.device_array")]

"""Imports of the gallery's scripts (a folder of scripts, not a package) for tests."""

import importlib.util
from pathlib import Path
from types import ModuleType

GALLERY = Path(__file__).resolve().parent.parent / "gallery"
SCRIPTS = sorted(GALLERY.glob("*.py"))


def load_gallery_module(name: str) -> ModuleType:
    """Import ``gallery/<name>.py``."""
    spec = importlib.util.spec_from_file_location(f"gallery_{name}", GALLERY / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""Editing a file and reloading its module (``importlib.reload``, Jupyter's autoreload)
runs the new source: for the kernel's own module, for a module holding a func it calls,
and for a function whose ``__code__`` is swapped in place. The compiled kernel and
``kernel.python`` always agree."""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

KERNELS = '''
import kdsl as kd
import {helpers}


@kd.kernel
def transform(a, out):
    for i in kd.prange(a.shape[0]):
        out[i] = {helpers}.twist(a[i]) {kernel_term}
'''

HELPERS = '''
import kdsl as kd


@kd.func
def twist(x):
    return x {func_term}
'''


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Writes (and rewrites) two modules with fresh names; imports or reloads them."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = {"kernels": f"kernels_{uuid.uuid4().hex[:8]}", "helpers": f"helpers_{uuid.uuid4().hex[:8]}"}

    def write(kernel_term: str = "+ 1.0", func_term: str = "* 2.0") -> None:
        (tmp_path / f"{names['helpers']}.py").write_text(
            textwrap.dedent(HELPERS.format(func_term=func_term)))
        (tmp_path / f"{names['kernels']}.py").write_text(
            textwrap.dedent(KERNELS.format(helpers=names["helpers"], kernel_term=kernel_term)))
        for cached in tmp_path.glob("__pycache__/*"):
            cached.unlink()
        importlib.invalidate_caches()

    def load(name: str) -> object:
        module_name = names[name]
        if module_name in sys.modules:
            return importlib.reload(sys.modules[module_name])
        return importlib.import_module(module_name)

    yield write, load
    for module_name in names.values():
        sys.modules.pop(module_name, None)


def run(module: object) -> tuple[np.ndarray, np.ndarray]:
    a = np.linspace(-2.0, 3.0, 11)
    compiled, python = np.zeros_like(a), np.zeros_like(a)
    module.transform(a, compiled)  # type: ignore[attr-defined]
    module.transform.python(a, python)  # type: ignore[attr-defined]
    return compiled, python


def test_reloaded_kernel_module_runs_the_new_source(modules):
    write, load = modules
    write(kernel_term="+ 1.0")
    load("helpers")
    compiled, python = run(load("kernels"))
    np.testing.assert_array_equal(compiled, np.linspace(-2.0, 3.0, 11) * 2.0 + 1.0)
    np.testing.assert_array_equal(compiled, python)
    write(kernel_term="- 100.0 * a[i]")
    compiled, python = run(load("kernels"))
    np.testing.assert_array_equal(python, np.linspace(-2.0, 3.0, 11) * -98.0)
    np.testing.assert_array_equal(compiled, python)


def test_reloaded_func_module_is_seen_by_a_kernel_that_was_not_reloaded(modules):
    write, load = modules
    write(func_term="* 2.0")
    load("helpers")
    kernels = load("kernels")
    compiled, python = run(kernels)
    np.testing.assert_array_equal(compiled, python)
    write(func_term="* -3.0 + 0.5")
    load("helpers")  # only the helpers: the kernel object is the same
    compiled, python = run(kernels)
    np.testing.assert_array_equal(python, np.linspace(-2.0, 3.0, 11) * -3.0 + 1.5)
    np.testing.assert_array_equal(compiled, python)


def test_code_swapped_in_place_as_autoreload_does(modules):
    write, load = modules
    write(func_term="* 2.0", kernel_term="+ 1.0")
    helpers = load("helpers")
    kernels = load("kernels")
    old_kernel, old_func = kernels.transform, helpers.twist
    run(kernels)
    write(func_term="* 5.0", kernel_term="+ 7.0 * a[i]")
    fresh_helpers = load("helpers")
    fresh_kernels = load("kernels")
    # IPython's autoreload updates the old function objects in place
    old_func.py_function.__code__ = fresh_helpers.twist.py_function.__code__
    old_kernel.py_function.__code__ = fresh_kernels.transform.py_function.__code__
    a = np.linspace(-2.0, 3.0, 11)
    compiled, python = np.zeros_like(a), np.zeros_like(a)
    old_kernel(a, compiled)
    old_kernel.python(a, python)
    np.testing.assert_array_equal(python, a * 12.0)
    np.testing.assert_array_equal(compiled, python)


def test_source_read_again_after_the_file_changed(tmp_path, monkeypatch):
    from kdsl.frontend.source import read_function

    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"plain_{uuid.uuid4().hex[:8]}"
    path = Path(tmp_path, f"{name}.py")
    path.write_text("def f(x):\n    return x + 1\n")
    module = importlib.import_module(name)
    assert "x + 1" in read_function(module.f).text
    path.write_text("def f(x):\n    return x * 1000 - 7\n")
    importlib.invalidate_caches()
    module = importlib.reload(module)
    assert "x * 1000 - 7" in read_function(module.f).text
    sys.modules.pop(name, None)

"""The compiled call path's entry points and the native allocation hooks are cached on
disk like kernels (kdsl/runtime/helper_code.py): a second process on the same cache
takes the compiled path of an allocating kernel without loading LLVM, with the results
of the kernel's own Python function."""

from __future__ import annotations

KERNELS = '''
import kdsl as kd

@kd.kernel
def scaled(x: kd.Array[kd.f32], s: float):
    return x * s + 1.0

@kd.kernel
def add(a: kd.Array[kd.f64], b: kd.Array[kd.f64], out: kd.Array[kd.f64]):
    for i in range(out.shape[0]):
        out[i] = a[i] + 2.0 * b[i]
'''

CALLER = '''
import gc
import os
import sys
import numpy as np
from kdsl.codegen import cpu
from helper_cache_kernels import add, scaled

if os.environ.get("NO_LINKER"):  # code loaded into JIT engines
    cpu.linker = lambda: None

x = np.linspace(-3.0, 5.0, 7, dtype=np.float32)
a, b = np.linspace(1.0, 2.0, 5), np.linspace(-4.0, 3.0, 5)
out = np.zeros(5)
for _ in range(3):  # the third call takes the compiled path
    made = scaled(x, 2.5)
    add(a, b, out)
    gc.collect()  # the helpers' code stays loaded
assert scaled._fast is not None and add._fast is not None
want = np.zeros(5)
add.python(a, b, want)
assert np.allclose(made, scaled.python(x, 2.5), rtol=1e-6) and np.allclose(out, want)
assert made.any() and out.any()
print("llvm loaded:", "llvmlite.binding" in sys.modules)
'''


def caller(run_python, tmp_path, **env: str) -> list[str]:
    (tmp_path / "helper_cache_kernels.py").write_text(KERNELS)
    env = {"KDSL_CACHE_DIR": str(tmp_path / "cache"), **env}
    return run_python(CALLER, env, tmp_path).stdout.split()


def test_a_second_process_calls_on_the_compiled_path_without_llvm(run_python, tmp_path):
    assert caller(run_python, tmp_path) == ["llvm", "loaded:", "True"]
    assert caller(run_python, tmp_path) == ["llvm", "loaded:", "False"]


def test_without_a_cache_every_process_builds_its_own(run_python, tmp_path):
    for _ in range(2):
        assert caller(run_python, tmp_path, KDSL_CACHE="0") == ["llvm", "loaded:", "True"]
    assert not (tmp_path / "cache").exists()


def test_helpers_in_jit_engines_stay_loaded(run_python, tmp_path):
    assert caller(run_python, tmp_path, KDSL_CACHE="0", NO_LINKER="1") == ["llvm", "loaded:", "True"]

"""LLVM IR compiled through llvmlite's C functions called directly (``llvm_direct``) gives
the object code ``cpu.compile_to_object`` gives through llvmlite.binding, byte for byte,
and loads into a JIT engine that way too; bad IR is a RuntimeError; IR only
llvmlite.binding's path handles, and llvmlite versions whose C signatures were not
checked, take that path; a first compile in a fresh process runs its parts that way,
gives the kernel's results and never imports llvmlite.binding."""

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kdsl.codegen import cpu, llvm_direct

pytestmark = pytest.mark.skipif(llvm_direct.functions() is None,
                                reason="llvmlite's C functions are not usable here")

LOOP = """
define void @scale(float* noalias %x, i64 %n, float %a) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %p = getelementptr inbounds float, float* %x, i64 %i
  %v = load float, float* %p
  %w = fmul fast float %v, %a
  %s = call fast float @llvm.sqrt.f32(float %w)
  store float %s, float* %p
  %next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
declare float @llvm.sqrt.f32(float)
"""


@pytest.mark.parametrize(("opt", "level"), [(3, 3), (cpu.LIGHT_CODEGEN, cpu.LIGHT_PIPELINE)])
def test_the_object_code_is_that_of_llvmlite_binding(opt, level):
    machine = cpu.new_target_machine(opt)
    want = cpu.compile_to_object(LOOP, machine, level=level)
    got = llvm_direct.compile_to_object(LOOP, opt, level)
    assert got == want
    assert got.startswith(b"\x7fELF")


def test_the_machine_has_the_host_features_llvmlite_reads():
    assert llvm_direct.host_features(llvm_direct.functions()) == \
        cpu.llvm().get_host_cpu_features().flatten()


def test_cpu_seconds_are_reported_for_optimising_and_emitting():
    seconds: list[float] = []
    llvm_direct.compile_to_object(LOOP, 3, 3, seconds)
    assert len(seconds) == 2 and all(s >= 0.0 for s in seconds)


def test_ir_that_does_not_parse_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="parsing error"):
        llvm_direct.compile_to_object("define void @f( {", 3, 3)


def test_ir_that_does_not_verify_is_a_runtime_error():
    broken = "define i32 @f() {\nentry:\n  ret i64 0\n}\n"
    with pytest.raises(RuntimeError):
        llvm_direct.compile_to_object(broken, 3, 3)
    # the machine taken for it was given back: the next compile works
    assert llvm_direct.compile_to_object(LOOP, 3, 3).startswith(b"\x7fELF")


def test_ir_only_llvmlite_binding_handles_takes_its_path():
    assert llvm_direct.can_compile(LOOP)
    for tag in llvm_direct.NEEDS_BINDING:
        assert not llvm_direct.can_compile(LOOP + f"; {tag}\n")


ADD = """
define i64 @add_three(i64 %x) {
  %y = add i64 %x, 3
  ret i64 %y
}
define i64 @times_two(i64 %x) {
  %y = shl i64 %x, 1
  ret i64 %y
}
"""


def test_object_code_loads_into_a_jit_engine_and_runs():
    code = llvm_direct.compile_to_object(ADD, 3, 3)
    addresses, unload = llvm_direct.load_objects([code], ["add_three", "times_two"])
    try:
        add_three = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addresses["add_three"])
        times_two = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addresses["times_two"])
        assert add_three(-7) == -4 and times_two(21) == 42
    finally:
        unload()


def test_a_missing_symbol_is_a_runtime_error():
    code = llvm_direct.compile_to_object(ADD, 3, 3)
    with pytest.raises(RuntimeError, match="no symbol nowhere"):
        llvm_direct.load_objects([code], ["add_three", "nowhere"])


def test_an_unchecked_llvmlite_version_takes_llvmlite_bindings_path(monkeypatch):
    monkeypatch.setattr(llvm_direct, "SUPPORTED", ("0.0.",))
    assert llvm_direct.library_path() is None


FIRST_COMPILE = """
import sys

import numpy as np
import kdsl as kd
from kdsl.codegen import cpu, llvm_direct, split_module

split_module.MIN_COST, split_module.MIN_SHARE = 0, 0.0
cpu.usable_cores = lambda: 2
used = []
real = llvm_direct.compile_to_object
llvm_direct.compile_to_object = lambda text, *a: used.append(text) or real(text, *a)

@kd.kernel
def smooth(x: kd.Array[kd.f32], out: kd.Array[kd.f32]) -> kd.f32:
    total = 0.0
    for i in kd.prange(1, x.shape[0] - 1):
        out[i] = (x[i - 1] + 2.0 * x[i] + x[i + 1]) * 0.25
        total += out[i]
    return total

x = np.random.default_rng(3).uniform(-1.0, 1.0, 1000).astype(np.float32)
out, ref = np.zeros_like(x), np.zeros_like(x)
got = smooth(x, out)
want = smooth.python(x, ref)
np.testing.assert_allclose(out, ref, rtol=1e-6)
assert abs(got - want) <= 1e-4 * abs(want) + 1e-5, (got, want)
parts = [text for text in used if "kdsl.warm_up" not in text]
assert len(parts) == 2, len(parts)  # the entry's part and the region's
assert "llvmlite.binding" not in sys.modules
print("ok")
"""


def test_a_first_compile_in_a_fresh_process_runs_its_parts_directly(tmp_path):
    env = dict(os.environ, KDSL_CACHE_DIR=str(tmp_path / "cache"))
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    script = tmp_path / "first_compile.py"
    script.write_text(textwrap.dedent(FIRST_COMPILE))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")

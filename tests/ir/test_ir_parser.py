"""IR text parses back into the IR it was printed from, so golden tests can start from
IR text."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import kdsl as kd
from kdsl.ir.core import Module
from kdsl.ir.interpreter import interpret
from kdsl.ir.parser import IRParseError, parse_function, parse_module, parse_type
from kdsl.ir.passes.pipeline import STAGES, run_passes
from kdsl.ir.printer import print_function
from kdsl.ir.verifier import verify_module
from kdsl.runtime.compiler import lower_and_optimize


@kd.func
def bounded(v: kd.f32) -> kd.f32:
    if v > 1.0:
        return 1.0
    return v


@kd.kernel
def everything(x: kd.Array[kd.f32], p: kd.Array[kd.vec3], grid: kd.Array[kd.f32, 2]):
    total = 0.0
    for i in kd.prange(x.shape[0]):
        k = 0
        while k < 2:
            k += 1
        total += bounded(x[i]) * k + kd.erf(x[i])
    for j in range(0, x.shape[0], 2):
        if x[j] > 0.5:
            x[j] = -x[j]
    p[:] = p * 2.0 + kd.vec3(1.0, 0.0, -1.0)
    grid[1:, ::2] = grid[:-1, ::2] + np.sum(grid, axis=1, keepdims=True)[1:]
    return total, kd.isnan(x[0]), kd.max(grid.T[0])


def _arguments(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.random(9, dtype=np.float32), rng.random((4, 3), dtype=np.float32),
            rng.random((5, 6), dtype=np.float32)]


def _text(module: Module) -> str:
    return "\n".join(print_function(f) for f in module.functions)


def _module_at(stage: str, args: list[np.ndarray]) -> Module:
    module, _ = lower_and_optimize(everything.py_function, everything.parameters(tuple(args)),
                                   everything.options, None if stage == "optimized" else stage)
    return module


@pytest.mark.parametrize("stage", STAGES)
def test_printed_ir_parses_back_to_the_same_text(stage: str) -> None:
    text = _text(_module_at(stage, _arguments(np.random.default_rng(0))))
    module = parse_module(text)
    verify_module(module)
    assert _text(module) == text


@pytest.mark.parametrize("stage", ["frontend", "lower-tensors", "optimized"])
def test_parsed_ir_computes_what_the_kernel_computes(stage: str) -> None:
    rng = np.random.default_rng(3)
    compiled_args = _arguments(rng)
    interpreted_args = [a.copy() for a in compiled_args]
    expected = everything(*compiled_args)
    module = parse_module(_text(_module_at(stage, interpreted_args)))
    results = interpret(module, interpreted_args)
    for got, want in zip(interpreted_args, compiled_args):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_golden_test_from_ir_text() -> None:
    source = textwrap.dedent("""
        kernel @k(%x: f32, %y: f32) -> f32 {
          %a = mul %x, %y : f32
          %b = mul %y, %x : f32
          %unused = sqrt %a : f32
          %c = add %a, %b : f32
          return %c
        }
    """)
    module = run_passes(parse_module(source), ["cse", "dce"])
    assert print_function(module.kernel) == textwrap.dedent("""\
        kernel @k(%x: f32, %y: f32) -> f32 {
          %a = mul %x, %y : f32
          %c = add %a, %a : f32
          return %c
        }""")


def test_types_parse() -> None:
    for t in (kd.f32, kd.vec3, kd.mat33d, kd.bool_, kd.Array[kd.vec3, 2]):
        assert parse_type(str(t)) == t
    assert str(parse_type("vec5<i64>")) == "vec5<i64>"
    assert parse_type("array<f32, 2, C>").contiguous is True
    fixed = kd.Array[kd.f64, 3].specialised(True, 4)
    assert str(fixed) == "array<f64, 3, C, ?x4>" and parse_type(str(fixed)) == fixed
    assert fixed.fixed_shape == (4,) and fixed.free_ndim == 2


@pytest.mark.parametrize("text, message", [
    ("kernel @k() {\n  %a = frobnicate : f32\n  return\n}", "unknown op 'frobnicate'"),
    ("kernel @k() {\n  return %nowhere\n}", "%nowhere is not defined"),
    ("kernel @k(%x: quaternion) {\n  return\n}", "unknown type 'quaternion'"),
    ("kernel @k() {\n  return\n", "a block is not closed"),
    ("%a = constant 1 : i64", "expected 'kernel @name"),
])
def test_bad_text_is_a_located_error(text: str, message: str) -> None:
    with pytest.raises(IRParseError, match=message):
        parse_function(text)


def test_function_passes_run_over_every_function_still_called() -> None:
    source = textwrap.dedent("""
        kernel @k(%x: f32) -> f32 {
          %r = call %x {callee = "f.0"} : f32
          return %r
        }
        func @f.0(%y: f32) -> f32 {
          %a = mul %y, %y : f32
          %b = mul %y, %y : f32
          %c = add %a, %b : f32
          return %c
        }
        func @g.1(%z: f32) -> f32 {
          return %z
        }
    """)
    module = parse_module(source)
    run_passes(module, ["cse", "dce"])
    assert print_function(module.funcs["f.0"]) == textwrap.dedent("""\
        func @f.0(%y: f32) -> f32 {
          %a = mul %y, %y : f32
          %c = add %a, %a : f32
          return %c
        }""")
    run_passes(module, ["inline"])  # inlined everywhere, so no func is left to optimise
    assert module.funcs == {}
    assert [op.name for op in module.kernel.body.ops] == ["mul", "add", "return"]


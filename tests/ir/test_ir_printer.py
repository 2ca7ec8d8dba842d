"""The IR printer: golden text for small kernels at the frontend stage and after the whole
pipeline, and for a function built by hand."""

from __future__ import annotations

import textwrap

import numpy as np

import kdsl as kd
from kdsl import types as T
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Value
from kdsl.ir.printer import print_function


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@kd.kernel
def saxpy(a: kd.f32, x: kd.Array[kd.f32], y: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        y[i] = a * x[i] + y[i]


@kd.kernel
def first_above(x: kd.Array[kd.f64], t: kd.f64):
    k = 0
    while k < x.shape[0]:
        if x[k] > t:
            break
        k += 1
    return k


@kd.kernel
def lowest(x: kd.Array[kd.f32]):
    m = x[0]
    for i in kd.prange(x.shape[0]):
        m = min(m, x[i])
    return m


@kd.kernel
def norms(p: kd.Array[kd.vec3], out: kd.Array[kd.f32]):
    for i in kd.prange(p.shape[0]):
        v = p[i]
        out[i] = kd.sqrt(kd.dot(v, v)) + v.z


F32 = np.array([3.0, 1.0, 4.0, 1.5], dtype=np.float32)
F64 = np.array([0.5, 1.0, 2.5, 3.0])


def test_saxpy_frontend():
    assert saxpy.ir(2.0, F32, F32.copy(), stage="frontend") == golden("""
        kernel @saxpy(%a: f32, %x: array<f32, 1, C>, %y: array<f32, 1, C>) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 0 : i64
          %3 = constant 1 : i64
          %4 = constant 0 : i64
          %5 = max %0, %4 : i64
          parallel_for %5 {ndim = 1, reductions = []} (%i: i64) {
            %6 = array_load %x, %i : f32
            %7 = mul %a, %6 : f32
            %8 = array_load %y, %i : f32
            %9 = add %7, %8 : f32
            array_store %y, %i, %9
            yield
          }
          return
        }
    """)


def test_saxpy_optimized():
    assert saxpy.ir(2.0, F32, F32.copy()) == golden("""
        kernel @saxpy(%a: f32, %x: array<f32, 1, C>, %y: array<f32, 1, C>) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = array_load %x, %i : f32
            %4 = mul %a, %3 : f32
            %5 = array_load %y, %i : f32
            %6 = add %4, %5 : f32
            array_store %y, %i, %6
            yield
          }
          return
        }
    """)
    y = F32.copy()
    saxpy(2.0, F32, y)
    np.testing.assert_array_equal(y, np.float32(2.0) * F32 + F32)


def test_strided_array_prints_its_layout():
    header = saxpy.ir(2.0, F32[::2], F32.copy(), stage="frontend").splitlines()[0]
    assert header == "kernel @saxpy(%a: f32, %x: array<f32, 1, A>, %y: array<f32, 1, C>) {"


def test_while_with_break_frontend():
    """``break`` becomes a flag carried by the while loop and tested by its condition."""
    assert first_above.ir(F64, 1.5, stage="frontend") == golden("""
        kernel @first_above(%x: array<f64, 1, C>, %t: f64) -> i64 {
          %0 = constant 0 : i64
          %1 = constant False : bool
          %k, %2 = while %0, %1 : i64, bool (%3: i64, %4: bool) {
            %5 = array_dim %x {axis = 0} : i64
            %6 = constant 0 : i64
            %7 = lt %3, %5 : bool
            %8 = logical_not %4 : bool
            %9 = bit_and %7, %8 : bool
            condition %9
          } do (%10: i64, %11: bool) {
            %12 = array_load %x, %10 : f64
            %13 = gt %12, %t : bool
            %14 = if %13 : bool {
              %15 = constant True : bool
              yield %15
            } else {
              yield %11
            }
            %16 = logical_not %14 : bool
            %17 = if %16 : i64 {
              %18 = constant 1 : i64
              %19 = add %10, %18 : i64
              yield %19
            } else {
              yield %10
            }
            yield %17, %14
          }
          return %k
        }
    """)
    assert first_above(F64, 1.5) == 2
    assert first_above(F64, 10.0) == 4


def test_min_reduction_optimized():
    assert lowest.ir(F32) == golden("""
        kernel @lowest(%x: array<f32, 1, C>) -> f32 {
          %0 = constant 0 : i64
          %1 = array_load %x, %0 : f32
          %2 = array_dim %x {axis = 0} : i64
          %3 = max %2, %0 : i64
          %m = parallel_for %3, %1 {ndim = 1, reductions = ['min']} : f32 (%i: i64, %4: f32) {
            %5 = array_load %x, %i : f32
            %6 = min %4, %5 : f32
            yield %6
          }
          return %m
        }
    """)
    assert lowest(F32) == np.float32(1.0)


def test_vector_ops_optimized():
    assert norms.ir(np.ones((2, 3), np.float32), np.ones(2, np.float32)) == golden("""
        kernel @norms(%p: array<vec3, 1, C>, %out: array<f32, 1, C>) {
          %0 = array_dim %p {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            %3 = array_load %p, %i : vec3
            %4 = dot %3, %3 : f32
            %5 = sqrt %4 : f32
            %6 = extract %3 {index = 2} : f32
            %7 = add %5, %6 : f32
            array_store %out, %i, %7
            yield
          }
          return
        }
    """)
    p = np.array([[3.0, 4.0, 12.0], [1.0, 2.0, 2.0]], np.float32)
    out = np.zeros(2, np.float32)
    norms(p, out)
    np.testing.assert_allclose(out, [25.0, 5.0], rtol=1e-6)


def hand_built() -> Function:
    """func @pick(%x: f32, %n: i64) -> f32: a for loop carrying a sum, and an if."""
    x, n = Value(T.f32, "x"), Value(T.i64, "n")
    body = Block([x, n])
    b = IRBuilder(body)
    zero = b.constant(0, T.i64)
    one = b.constant(1, T.i64)
    half = b.constant(-0.5, T.f32)
    loop_body = Block([Value(T.i64, "k"), Value(T.f32, "acc")])
    with b.at(loop_body):
        total = b.value("add", loop_body.args[1], x)
        b.create("yield", [total])
    loop = b.create("for", [zero, n, one, half], regions=[loop_body], result_types=[T.f32])
    loop.results[0].name_hint = "acc"
    positive = b.value("gt", loop.result, b.constant(0.0, T.f32))
    then_block, else_block = Block(), Block()
    with b.at(then_block):
        b.create("yield", [loop.result])
    with b.at(else_block):
        b.create("yield", [b.value("neg", loop.result)])
    chosen = b.create("if", [positive], {"types": [T.f32]}, [then_block, else_block], [T.f32])
    b.create("print", [chosen.result], {"parts": ("result:", None)})
    b.create("return", [chosen.result])
    return Function("pick", body, [T.f32], is_kernel=False)


def test_hand_built_function():
    assert print_function(hand_built()) == golden("""
        func @pick(%x: f32, %n: i64) -> f32 {
          %0 = constant 0 : i64
          %1 = constant 1 : i64
          %2 = constant -0.5 : f32
          %acc = for %0, %n, %1, %2 : f32 (%k: i64, %3: f32) {
            %4 = add %3, %x : f32
            yield %4
          }
          %5 = constant 0.0 : f32
          %6 = gt %acc, %5 : bool
          %7 = if %6 : f32 {
            yield %acc
          } else {
            %8 = neg %acc : f32
            yield %8
          }
          print %7 {parts = ['result:', None]}
          return %7
        }
    """)


def test_undefined_operand_is_printed_visibly():
    x = Value(T.f32, "x")
    body = Block([x])
    b = IRBuilder(body)
    stray = Value(T.f32, "stray")
    b.create("return", [b.value("add", x, stray)])
    text = print_function(Function("broken", body, [T.f32], is_kernel=True))
    assert "%0 = add %x, %<undefined> : f32" in text


def test_printing_is_stable():
    first = norms.ir(np.ones((2, 3), np.float32), np.ones(2, np.float32), stage="frontend")
    again = norms.ir(np.ones((2, 3), np.float32), np.ones(2, np.float32), stage="frontend")
    assert first == again


def test_unknown_stage_is_an_error_listing_the_stages():
    try:
        saxpy.ir(2.0, F32, F32.copy(), stage="no-such-stage")
    except ValueError as error:
        message = str(error)
    else:
        raise AssertionError("an unknown stage was accepted")
    assert "'no-such-stage'" in message
    for stage in ("frontend", "inline", "simplify", "demote-atomics", "optimized"):
        assert stage in message

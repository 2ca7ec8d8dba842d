"""The verifier: IR built by hand, broken in one way each, is rejected with a message
that names the op and says what is wrong; well-formed IR passes."""

from __future__ import annotations

import pytest

from kdsl import types as T
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.location import SourceLocation
from kdsl.ir.verifier import VerificationError, verify_function


def new_function(*arg_types, names="xyz"):
    args = [Value(t, n) for t, n in zip(arg_types, names)]
    body = Block(args)
    return body, IRBuilder(body), args


def finish(body, results=(), result_types=None, name="f"):
    b = IRBuilder(body)
    b.create("return", list(results))
    types = [v.type for v in results] if result_types is None else result_types
    return Function(name, body, types, is_kernel=False)


def rejected(fn: Function, *words: str) -> str:
    with pytest.raises(VerificationError) as info:
        verify_function(fn, context="test")
    message = str(info.value)
    assert message.startswith("test"), message
    for word in words:
        assert word in message, message
    return message


def if_op(b, cond, then_values, else_values, types):
    then_block, else_block = Block(), Block()
    with b.at(then_block):
        b.create("yield", then_values(b))
    with b.at(else_block):
        b.create("yield", else_values(b))
    return b.create("if", [cond], {"types": types}, [then_block, else_block], types)


# --- well-formed IR passes ---------------------------------------------------------------


def test_well_formed_function_passes():
    body, b, (x, n) = new_function(T.f32, T.i64)
    zero, one = b.constant(0, T.i64), b.constant(1, T.i64)
    loop_body = Block([Value(T.i64, "k"), Value(T.f32, "acc")])
    with b.at(loop_body):
        b.create("yield", [b.value("add", loop_body.args[1], x)])
    loop = b.create("for", [zero, n, one, x], regions=[loop_body], result_types=[T.f32])
    cond = b.value("gt", loop.result, x)
    chosen = if_op(b, cond, lambda b: [loop.result], lambda b: [b.value("neg", x)], [T.f32])
    verify_function(finish(body, [chosen.result]))


# --- use of undefined values -------------------------------------------------------------


def test_use_of_a_value_never_defined():
    body, b, (x,) = new_function(T.f32)
    stray = Value(T.f32, "stray")
    total = b.value("add", x, stray)
    message = rejected(finish(body, [total]), "'add'", "not defined")
    assert "stray" in message


def test_use_before_definition_in_the_same_block():
    body, b, (x,) = new_function(T.f32)
    later = Operation("mul", [x, x], [T.f32])
    early = Operation("add", [later.result, x], [T.f32])
    body.append(early)
    body.append(later)
    rejected(finish(body, [early.result]), "'add'", "not defined")


def test_use_of_a_value_defined_inside_a_region_outside_it():
    body, b, (x,) = new_function(T.f32)
    cond = b.value("gt", x, b.constant(0.0, T.f32))
    inner: list[Value] = []

    def then_values(b):
        inner.append(b.value("mul", x, x))
        return []

    if_op(b, cond, then_values, lambda b: [], [])
    escaped = b.value("add", inner[0], x)
    rejected(finish(body, [escaped]), "'add'", "not defined")


def test_loop_result_used_inside_its_own_body():
    body, b, (x, n) = new_function(T.f32, T.i64)
    zero, one = b.constant(0, T.i64), b.constant(1, T.i64)
    loop_body = Block([Value(T.i64, "k"), Value(T.f32, "acc")])
    loop = Operation("for", [zero, n, one, x], [T.f32], regions=[loop_body])
    with b.at(loop_body):
        b.create("yield", [b.value("add", loop.result, x)])
    body.append(loop)
    rejected(finish(body, [loop.result]), "'add'", "not defined")


# --- wrong result types --------------------------------------------------------------------


def test_result_type_that_disagrees_with_the_op_rule():
    body, b, (x,) = new_function(T.f32)
    wrong = b.create("add", [x, x], result_types=[T.f64])
    rejected(finish(body, [wrong.result]), "'add'", "result types", "f64", "f32")


def test_comparison_that_does_not_give_a_bool():
    body, b, (x,) = new_function(T.f32)
    wrong = b.create("lt", [x, x], result_types=[T.f32])
    rejected(finish(body, [wrong.result]), "'lt'", "bool")


def test_operands_of_different_types():
    body, b, (x, n) = new_function(T.f32, T.i64)
    wrong = b.create("add", [x, n], result_types=[T.f32])
    rejected(finish(body, [wrong.result]), "'add'", "operand types rejected", "f32", "i64")


def test_array_load_of_wrong_element_type():
    array = T.ArrayType(T.f32, 1, True)
    body, b, (a, i) = new_function(array, T.i64, names="ai")
    wrong = b.create("array_load", [a, i], result_types=[T.f64])
    rejected(finish(body, [wrong.result]), "'array_load'", "f64", "f32")


def test_unregistered_op():
    body, b, (x,) = new_function(T.f32)
    body.append(Operation("frobnicate", [x], [T.f32]))
    rejected(finish(body, [x]), "'frobnicate'", "unregistered")


# --- terminators ---------------------------------------------------------------------------


def test_function_without_return():
    body, b, (x,) = new_function(T.f32)
    b.value("add", x, x)
    rejected(Function("noreturn", body, [], is_kernel=True), "@noreturn", "'return'")


def test_empty_function_body():
    rejected(Function("empty", Block(), [], is_kernel=True), "@empty", "'return'")


def test_if_region_without_yield():
    body, b, (x,) = new_function(T.f32)
    cond = b.value("gt", x, b.constant(0.0, T.f32))
    then_block, else_block = Block(), Block()
    with b.at(then_block):
        b.value("neg", x)  # no yield
    with b.at(else_block):
        b.create("yield", [])
    b.create("if", [cond], {"types": []}, [then_block, else_block], [])
    rejected(finish(body), "'if'", "'yield'")


def test_loop_body_without_yield():
    body, b, (x, n) = new_function(T.f32, T.i64)
    zero, one = b.constant(0, T.i64), b.constant(1, T.i64)
    loop_body = Block([Value(T.i64, "k")])
    b.create("for", [zero, n, one], regions=[loop_body], result_types=[])
    rejected(finish(body), "'for'", "'yield'")


def test_while_condition_region_ending_in_yield():
    body, b, (x,) = new_function(T.bool_)
    before, after = Block(), Block()
    with b.at(before):
        b.create("yield", [])
    with b.at(after):
        b.create("yield", [])
    b.create("while", [], regions=[before, after], result_types=[])
    rejected(finish(body), "'while'", "'condition'")


def test_terminator_in_the_middle_of_a_block():
    body, b, (x,) = new_function(T.f32)
    b.create("return", [x])
    b.value("neg", x)
    b.create("return", [x])
    rejected(Function("f", body, [T.f32], is_kernel=False), "'return'", "terminator")


# --- regions yielding the wrong types ----------------------------------------------------


def test_if_branch_yielding_the_wrong_type():
    body, b, (x, n) = new_function(T.f32, T.i64)
    cond = b.value("gt", x, b.constant(0.0, T.f32))
    chosen = if_op(b, cond, lambda b: [x], lambda b: [n], [T.f32])
    rejected(finish(body, [chosen.result]), "'if'", "a branch yields", "i64", "f32")


def test_if_branch_yielding_too_many_values():
    body, b, (x,) = new_function(T.f32)
    cond = b.value("gt", x, b.constant(0.0, T.f32))
    chosen = if_op(b, cond, lambda b: [x, x], lambda b: [x], [T.f32])
    rejected(finish(body, [chosen.result]), "'if'", "a branch yields")


def test_if_on_a_non_bool_condition():
    body, b, (x,) = new_function(T.f32)
    chosen = if_op(b, x, lambda b: [x], lambda b: [x], [T.f32])
    rejected(finish(body, [chosen.result]), "'if'", "bool")


def test_if_with_one_region():
    body, b, (x,) = new_function(T.bool_)
    then_block = Block()
    with b.at(then_block):
        b.create("yield", [])
    b.create("if", [x], {"types": []}, [then_block], [])
    rejected(finish(body), "'if'", "2 regions")


def test_loop_body_yielding_the_wrong_type():
    body, b, (x, n) = new_function(T.f32, T.i64)
    zero, one = b.constant(0, T.i64), b.constant(1, T.i64)
    loop_body = Block([Value(T.i64, "k"), Value(T.f32, "acc")])
    with b.at(loop_body):
        b.create("yield", [loop_body.args[0]])  # an i64 for an f32
    loop = b.create("for", [zero, n, one, x], regions=[loop_body], result_types=[T.f32])
    rejected(finish(body, [loop.result]), "'for'", "yields", "i64", "f32")


def test_loop_initial_value_of_the_wrong_type():
    body, b, (x, n) = new_function(T.f32, T.i64)
    zero, one = b.constant(0, T.i64), b.constant(1, T.i64)
    loop_body = Block([Value(T.i64, "k"), Value(T.f32, "acc")])
    with b.at(loop_body):
        b.create("yield", [loop_body.args[1]])
    loop = b.create("for", [zero, n, one, n], regions=[loop_body], result_types=[T.f32])
    rejected(finish(body, [loop.result]), "'for'", "i64", "f32")


def test_error_names_the_source_location():
    body, b, (x,) = new_function(T.f32)
    with b.located(SourceLocation("kernel_file.py", 12, 4, "k")):
        wrong = b.create("add", [x, x], result_types=[T.i64])
    message = rejected(finish(body, [wrong.result]), "'add'")
    assert "kernel_file.py:12:5" in message

"""Compile errors: every mistake a user can make in a kernel is a ``kd.CompileError`` (a
``SyntaxError``) whose message names the construct, and whose text gives the file, the
line, the source line and a caret under the construct.

Each kernel below marks the line the error must point at with ``# error: <tag>``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import kdsl as kd

THIS_FILE = str(Path(__file__).resolve())
SOME_LIST = [1.0, 2.0]


def plain_python_helper(x):
    return x + 1.0


@kd.func
def add_one(x):
    return x + 1.0


@kd.func
def ping(x: kd.f32) -> kd.f32:
    if x > 0.0:
        return pong(x - 1.0)
    return x


@kd.func
def pong(x: kd.f32) -> kd.f32:
    return ping(x)  # error: mutual-recursion


@kd.func
def factorial(n):
    if n <= 1:
        return 1
    return n * factorial(n - 1)  # error: self-recursion


@kd.kernel
def other_kernel(a: kd.Array[kd.f32]):
    a[0] = 1.0


# --- unsupported syntax ---------------------------------------------------------------


@kd.kernel
def uses_with(a: kd.Array[kd.f32]):
    with open("x") as f:  # error: with
        a[0] = f


@kd.kernel
def uses_try(a: kd.Array[kd.f32]):
    try:  # error: try
        a[0] = 1.0
    except ValueError:
        pass


@kd.kernel
def uses_lambda(a: kd.Array[kd.f32]):
    f = lambda x: x + 1.0  # error: lambda  # noqa: E731
    a[0] = f(1.0)


@kd.kernel
def uses_list_comprehension(a: kd.Array[kd.f32]):
    b = [x for x in range(3)]  # error: listcomp
    a[0] = b[0]


@kd.kernel
def uses_generator_expression(a: kd.Array[kd.f32]):
    a[0] = sum(x for x in range(3))  # error: genexp


@kd.kernel
def loops_over_a_list(a: kd.Array[kd.f32]):
    for x in SOME_LIST:  # error: for-list
        a[0] += x


@kd.kernel
def uses_fstring_spec(a: kd.Array[kd.f32]):
    print(f"{a[0]:.2f}")  # error: fstring


@kd.kernel
def keyword_arguments_to_builtin(a: kd.Array[kd.f32]):
    a[0] = kd.clamp(a[0], lo=0.0, hi=1.0)  # error: kwargs-builtin


@kd.kernel
def unknown_keyword_argument_to_func(a: kd.Array[kd.f32]):
    a[0] = add_one(a[0], y=a[1])  # error: kwargs-func


@kd.kernel
def uses_parallel_for_else(a: kd.Array[kd.f32]):
    for i in kd.prange(3):  # error: for-else
        a[i] = 1.0
    else:
        a[0] = 2.0


@kd.kernel
def defines_a_function(a: kd.Array[kd.f32]):
    def g(x):  # error: nested-def
        return x

    a[0] = 1.0


@kd.kernel
def imports_a_module(a: kd.Array[kd.f32]):
    import math  # error: import  # noqa: F401

    a[0] = 1.0


@kd.kernel
def uses_a_dict(a: kd.Array[kd.f32]):
    d = {1: 2.0}  # error: dict
    a[0] = d[1]


@kd.kernel
def uses_walrus(a: kd.Array[kd.f32]):
    if (n := a.shape[0]) > 2:  # error: walrus
        a[0] = n


@kd.kernel
def uses_is(a: kd.Array[kd.f32]):
    if a[0] is None:  # error: is
        a[0] = 1.0


@kd.kernel
def prints_an_array(a: kd.Array[kd.f32]):
    print(a)  # error: print-array


# --- types and names ------------------------------------------------------------------


@kd.kernel
def conflicting_local(a: kd.Array[kd.f32]):
    v = kd.vec3(1.0)
    v = a[0]  # error: conflict
    a[1] = 2.0 * v


@kd.kernel
def conflicting_local_across_branches(a: kd.Array[kd.f32]):
    if a[0] > 0.0:
        t = kd.vec3(1.0)
    else:
        t = 1.0  # error: conflict-branches
    a[1] = 2.0 * t


@kd.kernel
def undefined_name(a: kd.Array[kd.f32]):
    a[0] = undefined_thing + 1.0  # error: undefined  # noqa: F821


@kd.kernel
def used_before_assignment(a: kd.Array[kd.f32]):
    if a[0] > 0.0:
        q = 1.0
    a[1] = q  # error: maybe-unassigned


@kd.kernel
def calls_plain_python(a: kd.Array[kd.f32]):
    a[0] = plain_python_helper(a[0])  # error: plain-python


@kd.kernel
def calls_a_kernel(a: kd.Array[kd.f32]):
    other_kernel(a)  # error: call-kernel


@kd.kernel
def mutual_recursion(a: kd.Array[kd.f32]):
    a[0] = ping(a[0])


@kd.kernel
def self_recursion(a: kd.Array[kd.i64]):
    a[0] = factorial(a[1])


@kd.kernel
def wrong_vector_component_count(a: kd.Array[kd.f32]):
    v = kd.vec3(1.0, 2.0)  # error: vec-components
    a[0] = v.x


@kd.kernel
def vector_index_out_of_range(a: kd.Array[kd.f32]):
    v = kd.vec3(1.0)
    a[0] = v[3]  # error: vec-index


@kd.kernel
def different_return_arity(a: kd.Array[kd.f32]):
    if a[0] > 0.0:
        return 1.0
    return 1.0, 2.0  # error: return-arity


@kd.kernel
def float_loop_bound(a: kd.Array[kd.f32]):
    for i in kd.prange(2.5):  # error: float-bound
        a[i] = 1.0


# --- parallel loops -------------------------------------------------------------------


@kd.kernel
def break_in_ndrange_in_prange(a: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        for j, k in kd.ndrange(3, 4):
            if a[i] > j + k:
                break  # error: break-nested-ndrange
            a[i] = 1.0


@kd.kernel
def return_array_in_prange(a: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        if a[i] > 2.0:
            return a  # error: return-array-prange
        a[i] = 1.0
    return a


@kd.kernel
def assigns_outer_local_in_prange(a: kd.Array[kd.f32]):
    t = 0.0
    for i in kd.prange(a.shape[0]):
        t = a[i]  # error: outer-assign
    a[0] = t


@kd.kernel
def reads_reduction_in_prange(a: kd.Array[kd.f32]):
    s = 0.0
    for i in kd.prange(a.shape[0]):
        s += a[i]
        a[i] = s  # error: reduction-read
    a[0] = s


# --- indexing -------------------------------------------------------------------------


@kd.kernel
def too_many_indices(a: kd.Array[kd.f32]):
    a[0, 1] = 1.0  # error: many-indices


@kd.kernel
def float_literal_index(a: kd.Array[kd.f32]):
    a[1.5] = 1.0  # error: float-literal-index


@kd.kernel
def float_value_index(a: kd.Array[kd.f32]):
    j = a[0]
    a[0] = a[j]  # error: float-value-index


# --- more mistakes ----------------------------------------------------------------------


@kd.func
def func_with_a_dict(x):
    d = {x: 1}  # error: dict-in-func  # noqa: F841
    return x


@kd.func
def typed_func(x: kd.f32, v: kd.Array[kd.f32]) -> kd.f32:
    return x + v[0]


@kd.kernel
def error_inside_a_func(a: kd.Array[kd.f32]):
    a[0] = func_with_a_dict(a[1])


@kd.kernel
def func_given_too_few_arguments(a: kd.Array[kd.f32]):
    a[0] = typed_func(a[1])  # error: func-arity


@kd.kernel
def func_given_wrong_array(a: kd.Array[kd.f32], b: kd.Array[kd.f64]):
    a[0] = typed_func(a[1], b)  # error: func-array


@kd.kernel
def shape_index_out_of_range(a: kd.Array[kd.f32]):
    a[0] = a.shape[5]  # error: shape-index


@kd.kernel
def not_a_kdsl_annotation(a: list):  # error: annotation
    a[0] = 1


@kd.kernel
def ndrange_with_one_variable(a: kd.Array[kd.f32]):
    for i in kd.ndrange(2, 2):  # error: ndrange-targets  # noqa: B007
        a[0] = 1.0


@kd.kernel
def zero_range_step(a: kd.Array[kd.f32]):
    for i in range(0, 4, 0):  # error: zero-step  # noqa: B007
        a[0] = 1.0


@kd.kernel
def two_reduction_operations(a: kd.Array[kd.f32]):
    s = 0.0
    for _ in kd.prange(3):
        s += 1.0
        s = min(s, 2.0)  # error: two-reductions
    a[0] = s


@kd.kernel
def and_of_vectors(a: kd.Array[kd.f32]):
    v = kd.vec3(a[0])
    if v and a[1] > 0:  # error: and-vectors
        a[0] = 1.0


@kd.kernel
def shift_of_a_float(a: kd.Array[kd.f32]):
    a[0] = a[0] << 1  # error: shift-float


@kd.kernel
def unpacks_a_scalar(a: kd.Array[kd.f32]):
    x, y = a[0]  # error: unpack
    a[1] = x + y


@kd.kernel
def starred_unpacking(a: kd.Array[kd.f32]):
    x, *rest = (a[0], a[1], a[2])  # error: starred
    a[1] = x + rest[0]


@kd.kernel
def returns_a_nested_tuple(a: kd.Array[kd.f32]):
    return (a[0], a[1]), a.shape  # error: nested-return


@kd.kernel
def slices_a_vector(a: kd.Array[kd.f32]):
    v = kd.vec3(a[0], a[1], a[2])
    w = v[0:2]  # error: vector-slice
    a[0] = w[0]


@kd.func
def takes_varargs(*values):
    return values[0]


@kd.kernel
def calls_a_varargs_func(a: kd.Array[kd.f32]):
    a[0] = takes_varargs(a[1])  # error: varargs


@kd.kernel
def calls_numpy_linalg(a: kd.Array[kd.f32]):
    a[0] = np.linalg.norm(a)  # error: linalg



@kd.func
def clear_vectors(out: kd.Array[kd.vec3]):
    for i in range(out.shape[0]):
        out[i] = kd.vec3(0.0)


@kd.kernel
def passes_numbers_as_vectors(a: kd.Array[kd.f32]):
    scratch = kd.zeros((a.shape[0], 3))
    clear_vectors(scratch)  # error: vector-array
    a[0] = scratch[0, 0]



@kd.kernel
def formats_an_assert_message(a: kd.Array[kd.f32]):
    assert a[0] > 0, "got %f" % a[0]  # error: assert-format  # noqa: UP031


@kd.kernel
def taichi_style_atomic(a: kd.Array[kd.f32]):
    for i in kd.prange(2):
        kd.atomic_add(a[i + 1], 1.0)  # error: taichi-atomic


# --- the checks -----------------------------------------------------------------------


def marked_line(tag: str) -> tuple[int, str]:
    """The line number and text of the line marked ``# error: <tag>`` in this file."""
    marker = f"# error: {tag}"
    for number, line in enumerate(Path(THIS_FILE).read_text().splitlines(), start=1):
        if line.rstrip().endswith(marker) or f"{marker}  #" in line:
            return number, line
    raise AssertionError(f"no line is marked {marker!r}")


def check_located(error: kd.CompileError, tag: str, token: str) -> None:
    """``str(error)`` names this file and the marked line, shows it, and puts a caret
    under ``token`` on it."""
    number, line = marked_line(tag)
    text = str(error)
    assert f'File "{THIS_FILE}", line {number},' in text, text
    assert error.filename == THIS_FILE
    assert error.lineno == number
    lines = text.splitlines()
    stripped = line.strip()
    shown = [k for k, shown_line in enumerate(lines) if shown_line.strip() == stripped]
    assert shown, f"the source line is not shown:\n{text}"
    k = shown[0]
    assert k + 1 < len(lines) and lines[k + 1].strip() == "^", f"no caret line:\n{text}"
    caret = lines[k + 1].index("^") - lines[k].index(stripped[0])
    assert stripped[caret:].startswith(token), (
        f"the caret points at {stripped[caret:]!r}, not at {token!r}:\n{text}"
    )


F32 = np.arange(1, 5, dtype=np.float32)
F32_2D = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
I64 = np.arange(1, 5, dtype=np.int64)

# (kernel, argument, tag of the line, token under the caret, words the message contains)
CASES = [
    (uses_with, F32, "with", "with", ["with statement"]),
    (uses_try, F32, "try", "try", ["try/except"]),
    (uses_lambda, F32, "lambda", "lambda", ["lambda", "@kd.func"]),
    (uses_list_comprehension, F32, "listcomp", "[x for", ["list comprehensions"]),
    (uses_generator_expression, F32, "genexp", "(x for", ["generator expressions"]),
    (loops_over_a_list, F32, "for-list", "SOME_LIST", ["range()", "kd.prange()"]),
    (uses_fstring_spec, F32, "fstring", 'f"', ["f-strings", "format specifications"]),
    (keyword_arguments_to_builtin, F32, "kwargs-builtin", "kd.clamp", ["keyword argument"]),
    (unknown_keyword_argument_to_func, F32, "kwargs-func", "add_one", ["add_one()",
                                                                       "keyword argument 'y'"]),
    (uses_parallel_for_else, F32, "for-else", "for", ["for ... else", "parallel loop"]),
    (defines_a_function, F32, "nested-def", "def", ["function defined inside", "@kd.func"]),
    (imports_a_module, F32, "import", "import", ["import", "module level"]),
    (uses_a_dict, F32, "dict", "{", ["dicts"]),
    (uses_walrus, F32, "walrus", "n :=", [":="]),
    (uses_is, F32, "is", "a[0] is", ["'is'", "=="]),
    (prints_an_array, F32, "print-array", "a)", ["print()", "array"]),
    (conflicting_local, F32, "conflict", "v = a[0]", ["'v'", "vec3", "f32"]),
    (conflicting_local_across_branches, F32, "conflict-branches", "t = 1.0", ["'t'", "vec3"]),
    (undefined_name, F32, "undefined", "undefined_thing", ["'undefined_thing'", "not defined"]),
    (used_before_assignment, F32, "maybe-unassigned", "q", ["'q'", "before it is assigned"]),
    (calls_plain_python, F32, "plain-python", "plain_python_helper",
     ["'plain_python_helper'", "@kd.func"]),
    (calls_a_kernel, F32, "call-kernel", "other_kernel", ["'other_kernel'", "@kd.func"]),
    (mutual_recursion, F32, "mutual-recursion", "ping(x)", ["recursive", "ping()"]),
    (self_recursion, I64, "self-recursion", "factorial(n - 1)", ["recursive", "factorial()"]),
    (wrong_vector_component_count, F32, "vec-components", "kd.vec3", ["vec3", "3 components", "2"]),
    (vector_index_out_of_range, F32, "vec-index", "v[3]", ["index 3", "vec3"]),
    (different_return_arity, F32, "return-arity", "return", ["return", "same number of values"]),
    (float_loop_bound, F32, "float-bound", "2.5", ["loop bounds", "integers", "f64"]),
    (break_in_ndrange_in_prange, F32, "break-nested-ndrange", "break",
     ["'break'", "kd.ndrange", "nested in a parallel loop"]),
    (return_array_in_prange, F32, "return-array-prange", "return",
     ["parallel loop can return scalars, vectors and matrices", "array"]),
    (assigns_outer_local_in_prange, F32, "outer-assign", "t = a[i]",
     ["'t'", "parallel loop", "reductions"]),
    (reads_reduction_in_prange, F32, "reduction-read", "s  #",
     ["reduction variable 's'", "read inside the parallel loop"]),
    (too_many_indices, F32, "many-indices", "a[0, 1]", ["1 axes", "got 2"]),
    (float_literal_index, F32, "float-literal-index", "1.5", ["index", "integer", "f64"]),
    (float_value_index, F32, "float-value-index", "j", ["index", "integer", "f32"]),
    (error_inside_a_func, F32, "dict-in-func", "{", ["dicts"]),
    (func_given_too_few_arguments, F32, "func-arity", "typed_func", ["typed_func()", "2", "1"]),
    (func_given_wrong_array, (F32, F32.astype(np.float64)), "func-array", "typed_func",
     ["'v'", "typed_func()", "f32", "f64"]),
    (shape_index_out_of_range, F32, "shape-index", "a.shape[5]", ["index 5", "out of range"]),
    (not_a_kdsl_annotation, F32, "annotation", "a: list", ["'a'", "list", "not a kdsl type"]),
    (ndrange_with_one_variable, F32, "ndrange-targets", "i", ["2 loop variable"]),
    (zero_range_step, F32, "zero-step", "range(0, 4, 0)", ["step", "zero"]),
    (two_reduction_operations, F32, "two-reductions", "s = min", ["'s'", "two different"]),
    (and_of_vectors, F32, "and-vectors", "v and", ["'and'", "scalar", "vec3"]),
    (shift_of_a_float, F32, "shift-float", "a[0] << 1", ["<<", "integers", "f32"]),
    (unpacks_a_scalar, F32, "unpack", "x, y = a[0]", ["unpack"]),
    (starred_unpacking, F32, "starred", "x, *rest", ["starred assignment"]),
    (returns_a_nested_tuple, F32, "nested-return", "return", ["tuple inside a returned tuple"]),
    (slices_a_vector, F32, "vector-slice", "0:2", ["slice", "arrays", "v.xy"]),
    (calls_a_varargs_func, F32, "varargs", "takes_varargs", ["takes_varargs()", "*args"]),
    (calls_numpy_linalg, F32, "linalg", "np.linalg.norm", ["'np.linalg.norm'", "not supported"]),
    (passes_numbers_as_vectors, F32, "vector-array", "clear_vectors",
     ["'out'", "array<vec3, 1>", "kd.zeros(n, kd.vec3)"]),
    (taichi_style_atomic, F32, "taichi-atomic", "kd.atomic_add",
     ["array and the index apart", "kd.atomic_add(a, i + 1, value)"]),
]


@pytest.mark.parametrize(
    "kernel, argument, tag, token, words", CASES, ids=[c[0].__name__ for c in CASES]
)
def test_compile_error_names_the_construct_and_its_line(kernel, argument, tag, token, words):
    arguments = argument if isinstance(argument, tuple) else (argument,)
    with pytest.raises(kd.CompileError) as info:
        kernel(*[a.copy() for a in arguments])
    error = info.value
    assert isinstance(error, SyntaxError)
    for word in words:
        assert word in error.message, error.message
    check_located(error, tag, token)


def test_compile_error_is_a_syntax_error_with_location_attributes():
    with pytest.raises(SyntaxError) as info:
        uses_lambda(F32.copy())
    number, line = marked_line("lambda")
    assert info.value.lineno == number
    assert info.value.offset == line.index("lambda") + 1
    assert info.value.text.strip() == line.strip()


def test_math_library_call_is_a_compile_error():
    @kd.kernel
    def calls_gamma(a: kd.Array[kd.f32]):
        a[0] = math.gamma(a[1])

    with pytest.raises(kd.CompileError) as info:
        calls_gamma(F32.copy())
    assert "'math.gamma'" in info.value.message and "not supported" in info.value.message


def test_async_def_kernel_is_a_located_compile_error():
    with pytest.raises(kd.CompileError) as info:
        @kd.kernel
        async def waits(x):  # the async kernel
            return x

    message = str(info.value)
    assert "async def" in message and "waits" in message, message
    lines = Path(__file__).read_text().splitlines()
    line = next(k for k, text in enumerate(lines, 1) if text.endswith("# the async kernel"))
    assert info.value.lineno == line and info.value.filename == __file__
    assert "async def waits(x):" in message and "^" in message, message


def test_async_def_func_is_a_located_compile_error():
    with pytest.raises(kd.CompileError, match="async def"):
        @kd.func
        async def helper(x):
            return x


def test_a_formatted_assert_message_is_a_located_compile_error_in_debug_mode():
    debug = kd.kernel(formats_an_assert_message.py_function, debug=True)
    with pytest.raises(kd.CompileError) as info:
        debug(F32.copy())
    assert "values cannot be formatted into it" in info.value.message
    check_located(info.value, "assert-format", '"got %f"')
    formats_an_assert_message(F32.copy())  # without debug mode, asserts are not compiled

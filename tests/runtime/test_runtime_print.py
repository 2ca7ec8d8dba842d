"""``print`` inside kernels (API section 6): output goes to ``sys.stdout``, in program
order, formatted as Python prints the same scalars."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def report(a: kd.Array[kd.f32], n: kd.i64, x: kd.f64):
    print("n =", n, "first =", a[0], "x =", x, "flag", a[1] > 0.0)
    for i in range(2):
        print(i, n - i)


A = np.array([1.5, -2.25], np.float32)


def test_print_matches_python(capsys):
    report(A, 7, 0.125)
    compiled = capsys.readouterr()
    report.python(A, 7, 0.125)
    reference = capsys.readouterr()
    assert compiled.out == reference.out
    assert compiled.out == "n = 7 first = 1.5 x = 0.125 flag False\n0 7\n1 6\n"
    assert compiled.err == ""


@kd.kernel
def print_vector(v: kd.Array[kd.vec3]):
    print("v", v[0])


def test_print_of_a_vector_shows_its_components(capfd):
    print_vector(np.array([[1.0, 2.5, -3.0]], np.float32))
    out = capfd.readouterr().out
    assert out.startswith("v [1")
    assert "2.5" in out and "-3" in out


@kd.kernel
def print_small_values(v: kd.Array[kd.vec3], m: kd.Array[kd.mat22], k: kd.i32):
    print("v", v[0], "m", m[0], f"ivec {kd.ivec2(k, -k)}")


def test_vectors_and_matrices_print_as_lists_compiled_and_in_plain_python(capfd):
    args = (np.array([[0.1, -0.0, np.nan]], np.float32),
            np.array([[[0.0, 1.5], [2.0, -3.0]]], np.float32), 4)
    print_small_values(*args)
    compiled = capfd.readouterr().out
    print_small_values.python(*args)
    assert capfd.readouterr().out == compiled
    assert compiled == "v [0.1, -0.0, nan] m [[0.0, 1.5], [2.0, -3.0]] ivec [4, -4]\n"


@kd.kernel
def print_each(a: kd.Array[kd.i64]):
    for i in kd.prange(a.shape[0]):
        print("item", i, a[i])


def test_print_in_prange_prints_every_iteration(capfd):
    print_each(np.arange(10, 18, dtype=np.int64))
    lines = capfd.readouterr().out.splitlines()
    assert sorted(lines) == sorted(f"item {i} {10 + i}" for i in range(8))


def test_print_goes_to_stdout_in_order(run_python, tmp_path):
    (tmp_path / "talk.py").write_text(textwrap.dedent('''
        import kdsl as kd

        @kd.kernel
        def say(n: kd.i64):
            for i in range(n):
                print("kernel", i)
    '''))
    code = textwrap.dedent('''
        import talk
        print("before")
        talk.say(2)
        print("between")
        talk.say(1)
        print("after")
    ''')
    result = run_python(code, path=tmp_path)
    assert result.stdout == "before\nkernel 0\nkernel 1\nbetween\nkernel 0\nafter\n"
    assert "kernel" not in result.stderr


@kd.kernel
def report_formatted(a: kd.Array[kd.f32], n: kd.i64):
    print(f"step {n}: first={a[0]}, flag {a[1] > 0.0}", "then", f"{n - 1}!")
    print(f"", n)  # noqa: F541 - an empty f-string is still an argument


def test_print_of_f_strings_matches_python(capsys):
    report_formatted(A, 7)
    compiled = capsys.readouterr()
    report_formatted.python(A, 7)
    assert compiled.out == capsys.readouterr().out
    assert compiled.out == "step 7: first=1.5, flag False then 6!\n 7\n"


def test_format_specifications_in_f_strings_are_located_errors():
    @kd.kernel
    def formatted(x: kd.f64):
        print(f"x = {x:.3f}")

    with pytest.raises(kd.CompileError, match="format specifications") as info:
        formatted(1.0)
    assert 'print(f"x = {x:.3f}")' in str(info.value)


@kd.kernel
def report_with_separators(a: kd.Array[kd.f32], n: kd.i64):
    print(n, a[0], "end", sep=", ")
    print(f"n{n}", a[1], n > 2, sep="")
    print(n, a[0], sep=None)


def test_print_sep_matches_python(capsys):
    report_with_separators(A, 7)
    compiled = capsys.readouterr()
    report_with_separators.python(A, 7)
    assert compiled.out == capsys.readouterr().out
    assert compiled.out == "7, 1.5, end\nn7-2.25True\n7 1.5\n"


@kd.kernel
def print_without_newline(x: kd.f64):
    print(x, end="")


@kd.kernel
def print_with_variable_separator(x: kd.f64, s: kd.i64):
    print(x, x, sep=s)


def test_print_end_and_a_variable_sep_are_located_compile_errors():
    with pytest.raises(kd.CompileError, match=r"print\(end=\.\.\.\)") as caught:
        print_without_newline(1.0)
    assert caught.value.location is not None and caught.value.location.line > 0
    with pytest.raises(kd.CompileError, match="sep=.*string constant"):
        print_with_variable_separator(1.0, 2)

"""Debug mode (API section 6): ``@kd.kernel(debug=True)`` or ``KDSL_DEBUG=1`` checks every
array access; a bad index raises ``IndexError`` naming the kernel, the source line, the
index and the axis size, and never crashes; a failed ``assert`` raises
``AssertionError`` with its message."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import kdsl as kd

THIS_FILE = str(Path(__file__).resolve())


def line_of(text: str) -> int:
    """The number of the (unique) line of this file that ends with ``text``."""
    lines = Path(THIS_FILE).read_text().splitlines()
    found = [k for k, line in enumerate(lines, start=1) if line.rstrip().endswith(text)]
    assert len(found) == 1, (text, found)
    return found[0]


def check_index_error(info, kernel: str, line_text: str, index: int, size: int,
                      axis: int = 0) -> None:
    message = str(info.value)
    assert f"kernel {kernel}" in message, message
    assert f'File "{THIS_FILE}", line {line_of(line_text)}' in message, message
    assert f"index {index} " in message, message
    assert f"size {size}" in message, message
    assert f"axis {axis}" in message, message
    assert line_text.strip() in message, message


@kd.kernel(debug=True)
def read_at(a: kd.Array[kd.f32], k: kd.i64):
    return a[k]  # read_at


@kd.kernel(debug=True)
def write_at(a: kd.Array[kd.f32], k: kd.i64):
    a[k] = 1.0  # write_at


@kd.kernel(debug=True)
def atomic_at(a: kd.Array[kd.f32], k: kd.i64):
    kd.atomic_add(a, k, 1.0)  # atomic_at


@kd.kernel(debug=True)
def read_column(a: kd.Array[kd.f32, 2], k: kd.i64):
    return a[0, k]  # read_column


@kd.kernel(debug=True)
def shift_left(a: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        a[i + 1] = a[i] * 2.0  # shift_left


@kd.kernel(debug=True)
def scatter_add(a: kd.Array[kd.f32], idx: kd.Array[kd.i64]):
    for i in kd.prange(idx.shape[0]):
        a[idx[i]] += 1.0  # scatter_add


@kd.kernel(debug=True)
def literal_index(a: kd.Array[kd.f32]):
    return a[-5]  # literal_index


@kd.kernel(debug=True)
def vector_at(p: kd.Array[kd.vec3], k: kd.i64):
    return p[k].y  # vector_at


A = np.array([1.5, 2.5, 3.5], np.float32)


def test_out_of_bounds_read():
    with pytest.raises(IndexError) as info:
        read_at(A, 3)
    check_index_error(info, "read_at", "return a[k]  # read_at", 3, 3)


def test_out_of_bounds_write_leaves_memory_alone():
    a = A.copy()
    with pytest.raises(IndexError) as info:
        write_at(a, 7)
    check_index_error(info, "write_at", "a[k] = 1.0  # write_at", 7, 3)
    np.testing.assert_array_equal(a, A)


def test_out_of_bounds_atomic():
    a = A.copy()
    with pytest.raises(IndexError) as info:
        atomic_at(a, 3)
    check_index_error(info, "atomic_at", "kd.atomic_add(a, k, 1.0)  # atomic_at", 3, 3)
    np.testing.assert_array_equal(a, A)


def test_negative_index_counts_from_the_end():
    assert read_at(A, -1) == A[-1]
    assert read_at(A, -3) == A[-3]
    a = A.copy()
    write_at(a, -2)
    expected = A.copy()
    expected[-2] = 1.0
    np.testing.assert_array_equal(a, expected)


@pytest.mark.parametrize("index", [-4, -7, -2**62])
def test_negative_index_beyond_the_start(index):
    with pytest.raises(IndexError) as info:
        read_at(A, index)
    check_index_error(info, "read_at", "return a[k]  # read_at", index, 3)
    a = A.copy()
    with pytest.raises(IndexError):
        write_at(a, index)
    np.testing.assert_array_equal(a, A)


def test_negative_literal_index_beyond_the_start():
    with pytest.raises(IndexError) as info:
        literal_index(A)
    check_index_error(info, "literal_index", "return a[-5]  # literal_index", -5, 3)


def test_out_of_bounds_on_axis_one():
    a = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    with pytest.raises(IndexError) as info:
        read_column(a, 3)
    check_index_error(info, "read_column", "return a[0, k]  # read_column", 3, 3, axis=1)
    with pytest.raises(IndexError) as info:
        read_column(a, -4)
    check_index_error(info, "read_column", "return a[0, k]  # read_column", -4, 3, axis=1)
    assert read_column(a, 2) == np.float32(3.0)
    assert read_column(a, -1) == np.float32(3.0)


def test_out_of_bounds_inside_prange():
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    with pytest.raises(IndexError) as info:
        shift_left(a)
    check_index_error(info, "shift_left", "a[i + 1] = a[i] * 2.0  # shift_left", 4, 4)


def test_out_of_bounds_atomic_inside_prange():
    a = A.copy()
    with pytest.raises(IndexError) as info:
        scatter_add(a, np.array([0, 5, 1, 2], np.int64))
    check_index_error(info, "scatter_add", "a[idx[i]] += 1.0  # scatter_add", 5, 3)


def test_every_iteration_out_of_bounds_inside_prange():
    a = A.copy()
    bad = np.arange(100, 10100, dtype=np.int64)
    with pytest.raises(IndexError) as info:
        scatter_add(a, bad)
    message = str(info.value)
    assert "kernel scatter_add" in message and "size 3" in message
    np.testing.assert_array_equal(a, A)


def test_vector_array_out_of_bounds():
    p = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    with pytest.raises(IndexError) as info:
        vector_at(p, 2)
    check_index_error(info, "vector_at", "return p[k].y  # vector_at", 2, 2)
    assert vector_at(p, 1) == np.float32(5.0)


def test_in_bounds_calls_work_after_errors():
    for _ in range(3):
        with pytest.raises(IndexError):
            read_at(A, 10**6)
    assert read_at(A, 2) == np.float32(3.5)
    assert read_at(A, 0) == np.float32(1.5)
    a = np.array([1.0, 2.0, 3.0], np.float32)
    scatter_add(a, np.array([0, 2, 2], np.int64))
    np.testing.assert_array_equal(a, [2.0, 2.0, 5.0])


@kd.kernel(debug=True)
def dead_load(a: kd.Array[kd.f32]):
    _unused = a[10]  # dead_load
    a[0] = 2.0


def test_unused_out_of_bounds_load_is_reported():
    a = A.copy()
    with pytest.raises(IndexError) as info:
        dead_load(a)
    check_index_error(info, "dead_load", "_unused = a[10]  # dead_load", 10, 3)


# --- assert ----------------------------------------------------------------------------


@kd.kernel(debug=True)
def all_positive(a: kd.Array[kd.f32]):
    for i in range(a.shape[0]):
        assert a[i] > 0.0, "a must be positive"  # all_positive


@kd.kernel(debug=True)
def all_positive_parallel(a: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        assert a[i] > 0.0  # all_positive_parallel


def test_failed_assert_raises_with_its_message():
    all_positive(A)
    with pytest.raises(AssertionError) as info:
        all_positive(np.array([1.0, -1.0, 2.0], np.float32))
    message = str(info.value)
    assert "a must be positive" in message
    assert "kernel all_positive" in message
    line = line_of('"a must be positive"  # all_positive')
    assert f"line {line})" in message


def test_failed_assert_in_prange_without_message():
    all_positive_parallel(A)
    with pytest.raises(AssertionError) as info:
        all_positive_parallel(np.array([1.0, 2.0, -3.0, 4.0], np.float32))
    message = str(info.value)
    assert "kernel all_positive_parallel" in message
    line = line_of("0.0  # all_positive_parallel")
    assert f"line {line})" in message


# --- never crashes, and KDSL_DEBUG=1 ---------------------------------------------------

HOSTILE = '''
import numpy as np
import kdsl as kd

@kd.kernel{decorator}
def poke(a: kd.Array[kd.f64, 2], idx: kd.Array[kd.i64], out: kd.Array[kd.f64]):
    for i in kd.prange(idx.shape[0]):
        out[i] = a[idx[i], idx[i] // 2]
        a[idx[i], 0] += 1.0

a = np.ones((4, 3))
out = np.zeros(8)
caught = 0
for bad in (2**62, -2**62, 2**31, -2**31 - 1, 4, -5, 10**15):
    idx = np.array([0, 1, bad, 2, bad, 3, 0, bad], np.int64)
    try:
        poke(a, idx, out)
    except IndexError as e:
        caught += 1
        assert "kernel poke" in str(e), str(e)
poke(a, np.array([0, 1, 2, 3], np.int64), out)
print("caught", caught, "out", out[:4].tolist())
'''


@pytest.mark.parametrize("how", ["decorator", "environment"])
def test_hostile_indices_never_crash(run_python, tmp_path, how):
    decorator = "(debug=True)" if how == "decorator" else ""
    env = {"KDSL_DEBUG": "1"} if how == "environment" else {}
    (tmp_path / "hostile.py").write_text(textwrap.dedent(HOSTILE.format(decorator=decorator)))
    result = run_python("import hostile", env=env, path=tmp_path, check=False)
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("caught 7 out "), result.stdout
    assert len(eval(last.split("out ", 1)[1])) == 4


def test_kdsl_debug_environment_variable(run_python, tmp_path):
    (tmp_path / "plain.py").write_text(textwrap.dedent('''
        import kdsl as kd

        @kd.kernel
        def get(a: kd.Array[kd.f32], k: kd.i64):
            return a[k]
    '''))
    code = textwrap.dedent('''
        import numpy as np, plain
        try:
            plain.get(np.ones(3, np.float32), 3)
            print("no error")
        except IndexError as e:
            print("IndexError:", e)
    ''')
    result = run_python(code, env={"KDSL_DEBUG": "1"}, path=tmp_path)
    assert "IndexError: index 3 is out of bounds" in result.stdout
    assert "kernel get" in result.stdout and "size 3" in result.stdout
    result = run_python(code, env={"KDSL_DEBUG": "1", "KDSL_CACHE": "0"}, path=tmp_path)
    assert "IndexError:" in result.stdout


def test_debug_and_normal_builds_do_not_share_code(run_python, tmp_path):
    """The same kernel compiled with and without checks, into one cache: each gets its own."""
    (tmp_path / "pair.py").write_text(textwrap.dedent('''
        import kdsl as kd

        @kd.kernel
        def get(a: kd.Array[kd.f32], k: kd.i64):
            return a[k]
    '''))
    code = textwrap.dedent('''
        import numpy as np, pair
        a = np.arange(1, 5, dtype=np.float32)
        try:
            print(pair.get(a[:2], 3))
        except IndexError:
            print("IndexError")
    ''')
    env = {"KDSL_CACHE_DIR": str(tmp_path / "cache")}
    normal = run_python(code, env=env, path=tmp_path).stdout.strip()
    assert normal != "IndexError"
    debug = run_python(code, env={**env, "KDSL_DEBUG": "1"}, path=tmp_path).stdout.strip()
    assert debug == "IndexError"


CRASHERS = {
    "read-only-memmap": """
import numpy as np, kdsl as kd

@kd.kernel(debug=True)
def set_all(a: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        a[i] = 7.0

np.ones(4, np.float32).tofile("data.bin")
try:
    set_all(np.memmap("data.bin", dtype=np.float32, mode="r"))
    print("no error")
except (ValueError, TypeError) as e:
    print(type(e).__name__, e)
""",
    "int64-min-floordiv-minus-one": """
import numpy as np, kdsl as kd

@kd.kernel(debug=True)
def divide(a: kd.Array[kd.i64], k: kd.i64):
    return a[0] // k, a[0] % k

try:
    print(divide(np.array([-2**63], np.int64), -1))
except (OverflowError, ZeroDivisionError, ArithmeticError) as e:
    print(type(e).__name__, e)
""",
}


@pytest.mark.parametrize("case", sorted(CRASHERS))
def test_debug_mode_never_crashes(run_python, tmp_path, case):
    (tmp_path / "crasher.py").write_text(CRASHERS[case])
    result = run_python(f"import os; os.chdir({str(tmp_path)!r}); import crasher",
                        path=tmp_path, check=False)
    assert result.returncode == 0, f"the process died ({result.returncode}): {result.stderr}"
    if case == "read-only-memmap":
        assert result.stdout.startswith("ValueError") and "read-only" in result.stdout
    else:  # NumPy's wrapped results, or an error
        assert "-9223372036854775808" in result.stdout or "Error" in result.stdout


@kd.kernel(debug=True)
def sum_of_a_made_array(n: kd.i64):
    made = np.ones(n) * 2.0
    s = 0.0
    for i in range(n + 1):
        s += made[i]  # read past the made array
    return s


def test_index_error_on_an_array_made_inside_the_kernel_names_it():
    with pytest.raises(IndexError) as info:
        sum_of_a_made_array(4)
    check_index_error(info, "sum_of_a_made_array", "s += made[i]  # read past the made array", 4, 4)
    assert "of 'made'" in str(info.value)

"""The disk cache (API section 5): ``KDSL_CACHE_DIR`` holds compiled kernels across
processes; its key covers the kernel's source, the sources of the funcs it calls, the
constants it captures and the argument types; ``KDSL_CACHE=0`` turns it off; a damaged
entry is ignored and rebuilt. Each process here is a fresh interpreter."""

from __future__ import annotations

import errno
import linecache
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kdsl as kd

MODULE = '''
import numpy as np
import kdsl as kd

OFFSET = {offset}


@kd.func
def twice(x):
    return x * {factor}


@kd.kernel
def transform(a: kd.Array[kd.f64]):
    for i in kd.prange(a.shape[0]):
        a[i] = twice(a[i]) + OFFSET{extra}
'''

CALLER = '''
import numpy as np
import kernels
a = np.array([1.0, 2.5, -4.0])
kernels.transform(a)
print(a.tolist())
'''


def write_module(directory: Path, offset: int = 3, factor: float = 2.0, extra: str = "") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    text = MODULE.format(offset=offset, factor=factor, extra=extra)
    (directory / "kernels.py").write_text(textwrap.dedent(text))
    for cached in (directory / "__pycache__").glob("*"):
        cached.unlink()


def expected(offset: int = 3, factor: float = 2.0, extra: float = 0.0) -> list[float]:
    return [x * factor + offset + extra for x in (1.0, 2.5, -4.0)]


def entries(cache: Path) -> dict[str, tuple[int, int, int]]:
    """Every file in the cache, with what would change if it were rewritten."""
    if not cache.exists():
        return {}
    return {
        str(p.relative_to(cache)): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size)
        for p in cache.rglob("*") if p.is_file()
    }


def run_caller(run_python, modules: Path, cache: Path, **env: str) -> list[float]:
    result = run_python(CALLER, env={"KDSL_CACHE_DIR": str(cache), **env}, path=modules)
    return eval(result.stdout.strip().splitlines()[-1])


def test_second_process_loads_what_the_first_stored(run_python, tmp_path):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules)
    assert run_caller(run_python, modules, cache) == expected()
    stored = entries(cache)
    assert stored, "the first process wrote nothing to KDSL_CACHE_DIR"
    assert run_caller(run_python, modules, cache) == expected()
    assert entries(cache) == stored, "the second process rewrote the cache instead of loading"


def test_checkout_edited_during_the_session_does_not_change_the_key(run_python, tmp_path):
    """The processes of a test import the kdsl the session started with: a file of the
    checkout touched between two of them (a merge while the suite runs) leaves the
    second loading what the first stored."""
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules)
    assert run_caller(run_python, modules, cache) == expected()
    stored = entries(cache)
    touched = Path(kd.__file__).resolve().parent / "types.py"
    before = touched.stat()
    try:
        os.utime(touched, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
        assert run_caller(run_python, modules, cache) == expected()
    finally:
        os.utime(touched, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert entries(cache) == stored


def test_changed_kernel_source_is_a_new_entry(run_python, tmp_path):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules)
    assert run_caller(run_python, modules, cache) == expected()
    first = entries(cache)
    write_module(modules, extra=" + 0.5")
    assert run_caller(run_python, modules, cache) == expected(extra=0.5)
    second = entries(cache)
    assert set(first) < set(second)
    assert {k: second[k] for k in first} == first


def test_changed_captured_constant_is_a_new_entry(run_python, tmp_path):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules, offset=3)
    assert run_caller(run_python, modules, cache) == expected(offset=3)
    first = entries(cache)
    write_module(modules, offset=10)
    assert run_caller(run_python, modules, cache) == expected(offset=10)
    assert set(first) < set(entries(cache))
    # and back: the first entry is still valid and used
    write_module(modules, offset=3)
    before = entries(cache)
    assert run_caller(run_python, modules, cache) == expected(offset=3)
    assert entries(cache) == before


def test_changed_func_source_is_a_new_entry(run_python, tmp_path):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules, factor=2.0)
    assert run_caller(run_python, modules, cache) == expected(factor=2.0)
    first = entries(cache)
    write_module(modules, factor=3.0)
    assert run_caller(run_python, modules, cache) == expected(factor=3.0)
    assert set(first) < set(entries(cache))


HELPERS = '''
import kdsl as kd

LIMIT = {limit}


@kd.func
def clipped(x):
    return min(x, LIMIT)


@kd.func
def through(x):
    return clipped(x) + 1.0
'''

USER = '''
import kdsl as kd
from helpers import through


@kd.kernel
def apply(a):
    for i in kd.prange(a.shape[0]):
        a[i] = through(a[i])
'''


def test_funcs_called_through_other_funcs_and_their_constants_are_in_the_key(
        run_python, tmp_path):
    """A func two calls away, in another module, and the constant it reads."""
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    modules.mkdir()

    def run(limit: float, body: str = "min(x, LIMIT)") -> list[float]:
        text = HELPERS.format(limit=limit).replace("min(x, LIMIT)", body)
        (modules / "helpers.py").write_text(text)
        (modules / "user_kernels.py").write_text(USER)
        for cached in (modules / "__pycache__").glob("*"):
            cached.unlink()
        caller = ("import numpy as np\nfrom user_kernels import apply\n"
                  "a = np.array([1.0, 5.0])\napply(a)\nprint(a.tolist())\n")
        result = run_python(caller, env={"KDSL_CACHE_DIR": str(cache)}, path=modules)
        return eval(result.stdout.strip().splitlines()[-1])

    assert run(3.0) == [2.0, 4.0]
    assert run(4.5) == [2.0, 5.5]
    assert run(4.5, "max(x, LIMIT)") == [5.5, 6.0]
    assert len([p for p in cache.rglob("*") if p.is_file()]) >= 3


def test_argument_types_are_part_of_the_key(run_python, tmp_path):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    modules.mkdir()
    (modules / "untyped.py").write_text(textwrap.dedent('''
        import kdsl as kd

        @kd.kernel
        def halve(a):
            for i in kd.prange(a.shape[0]):
                a[i] = a[i] / 2
    '''))
    code = textwrap.dedent('''
        import numpy as np, untyped
        a = np.array([3.0, 5.0], np.{dtype})
        untyped.halve(a)
        print(a.tolist())
    ''')
    env = {"KDSL_CACHE_DIR": str(cache)}
    assert run_python(code.format(dtype="float64"), env, modules).stdout.split() == ["[1.5,", "2.5]"]
    first = entries(cache)
    assert run_python(code.format(dtype="float32"), env, modules).stdout.split() == ["[1.5,", "2.5]"]
    assert set(first) < set(entries(cache))


def test_cache_off_writes_nothing(run_python, tmp_path):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules)
    assert run_caller(run_python, modules, cache, KDSL_CACHE="0") == expected()
    assert entries(cache) == {}
    assert run_caller(run_python, modules, cache, KDSL_CACHE="0") == expected()
    assert entries(cache) == {}


def test_unusable_cache_directory_only_costs_the_cache(run_python, tmp_path):
    modules = tmp_path / "modules"
    write_module(modules)
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("not a directory")
    for cache in (not_a_directory, not_a_directory / "below"):
        assert run_caller(run_python, modules, cache) == expected()
    assert not_a_directory.read_text() == "not a directory"


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated", "same-size-noise"])
def test_damaged_entry_is_rebuilt(run_python, tmp_path, damage):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules)
    assert run_caller(run_python, modules, cache) == expected()
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert files
    rng = np.random.default_rng(len(damage))
    for path in files:
        data = path.read_bytes()
        if damage == "garbage":
            path.write_bytes(b"not a kdsl cache entry")
        elif damage == "empty":
            path.write_bytes(b"")
        elif damage == "truncated":
            path.write_bytes(data[: len(data) // 2])
        else:
            path.write_bytes(rng.integers(0, 256, len(data), dtype=np.uint8).tobytes())
    assert run_caller(run_python, modules, cache) == expected()
    # the rebuilt entry is good again: a third process loads it without rewriting
    rebuilt = entries(cache)
    assert run_caller(run_python, modules, cache) == expected()
    assert entries(cache) == rebuilt


def test_metadata_damaged_into_an_overflowing_pickle_is_rebuilt(run_python, tmp_path):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules)
    assert run_caller(run_python, modules, cache) == expected()
    # a pickle frame header announcing more bytes than a process can hold
    overflowing = b"\x95\xe2\xbeFP?=\xc3\xcd\xefG\x99\xb5\xf2\xd4o\xf4\xfa"
    for path in cache.rglob("*.meta"):
        path.write_bytes(overflowing)
    assert run_caller(run_python, modules, cache) == expected()


def test_error_lines_follow_the_kernel_when_lines_are_added_above(run_python, tmp_path):
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    modules.mkdir()
    kernel = textwrap.dedent('''
        import kdsl as kd

        @kd.kernel(debug=True)
        def get(a: kd.Array[kd.f32], k: kd.i64):
            return a[k]
    ''')
    code = textwrap.dedent('''
        import numpy as np, located
        try:
            located.get(np.ones(3, np.float32), 5)
        except IndexError as e:
            print(e)
    ''')
    env = {"KDSL_CACHE_DIR": str(cache)}
    path = modules / "located.py"
    path.write_text(kernel)
    line = kernel.splitlines().index("    return a[k]") + 1
    assert f"line {line})" in run_python(code, env, modules).stdout
    path.write_text("# one\n# two\n# three\n" + kernel)
    out = run_python(code, env, modules).stdout
    assert f"line {line + 3})" in out and "return a[k]" in out


def text_section(elf: bytes) -> tuple[int, int]:
    """The file offset and size of an ELF64 file's .text section."""
    import struct

    section_offset, = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)

    def header(k: int) -> tuple[int, int, int]:
        base = section_offset + k * entry_size
        name, = struct.unpack_from("<I", elf, base)
        offset, size = struct.unpack_from("<QQ", elf, base + 0x18)
        return name, offset, size

    _, names_offset, _ = header(names_index)
    for k in range(count):
        name, offset, size = header(k)
        if elf[names_offset + name:names_offset + name + 6] == b".text\0":
            return offset, size
    raise AssertionError("no .text section")


def test_machine_code_damaged_without_changing_size_is_rebuilt_never_run(run_python, tmp_path):
    """Flipped bytes in the text section (the size unchanged) would crash the next process
    (SIGSEGV, SIGILL) if the entry were loaded: its checksum sends it to a rebuild."""
    modules, cache = tmp_path / "modules", tmp_path / "cache"
    write_module(modules)
    assert run_caller(run_python, modules, cache) == expected()
    codes = list(cache.rglob("*.bin"))
    assert codes
    for path in codes:
        data = bytearray(path.read_bytes())
        offset, size = text_section(bytes(data))
        assert size > 16
        for k in range(offset, offset + size):
            data[k] ^= 0xFF  # not an instruction stream any more
        path.write_bytes(bytes(data))
    assert run_caller(run_python, modules, cache) == expected()
    rebuilt = entries(cache)
    assert all(text_section(p.read_bytes()) for p in cache.rglob("*.bin"))
    assert run_caller(run_python, modules, cache) == expected()
    assert entries(cache) == rebuilt


def test_every_entry_is_verified_before_it_is_loaded(tmp_path, monkeypatch):
    from kdsl.runtime import cache

    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    code = bytes(range(256)) * 8
    stored = cache.store("ab" + "0" * 62, code, {"format": "object"})
    assert stored is not None
    hit = cache.load("ab" + "0" * 62)
    assert hit is not None and hit[2] == code and hit[1]["format"] == "object"
    for position in (0, 700, len(code) - 1):  # one flipped bit anywhere, size unchanged
        damaged = bytearray(code)
        damaged[position] ^= 0x10
        stored.write_bytes(bytes(damaged))
        assert cache.load("ab" + "0" * 62) is None
    stored.write_bytes(code)
    meta = stored.with_suffix(".meta")
    raw = bytearray(meta.read_bytes())
    raw[-3] ^= 0x01  # the metadata is checked too
    meta.write_bytes(bytes(raw))
    assert cache.load("ab" + "0" * 62) is None


# --- a full disk ---------------------------------------------------------------------------

FULL_DISK_ERRORS = [errno.ENOSPC, errno.EFBIG]


def fresh_kernel(tag: str):
    """A kernel whose source no other test compiles (a new cache entry)."""
    namespace: dict = {"kd": kd}
    text = (f"def full_disk_{tag}(x, out):\n"
            f"    for i in kd.prange(x.shape[0]):\n"
            f"        out[i] = x[i] * x[i] - 0.25 * x[i]  # {tag}\n")
    filename = f"<full disk kernel {tag}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)
    return kd.kernel(namespace[f"full_disk_{tag}"])


def check_runs(kernel) -> None:
    x = np.linspace(-3.0, 5.0, 41)
    out, expected_out = np.zeros_like(x), np.zeros_like(x)
    kernel(x, out)
    kernel.python(x, expected_out)
    np.testing.assert_allclose(out, expected_out, rtol=1e-14)
    kernel(x * 2.0, out)  # the fast path, the same code
    kernel.python(x * 2.0, expected_out)
    np.testing.assert_allclose(out, expected_out, rtol=1e-14)


def fail_with(code: int):
    def write(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return write


@pytest.mark.parametrize("code", FULL_DISK_ERRORS)
def test_full_disk_runs_the_kernel_from_memory_and_skips_the_cache(tmp_path, monkeypatch, code):
    from kdsl.codegen import cpu
    from kdsl.runtime import cache

    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu, "write_file", fail_with(code))  # the link step's files
    monkeypatch.setattr(cache, "_atomic_write", fail_with(code))  # the cache's files
    with pytest.warns(RuntimeWarning, match="cannot write its compile cache"):
        check_runs(fresh_kernel(f"all_{code}"))
    assert not list((tmp_path / "cache").rglob("*.bin"))


@pytest.mark.parametrize("code", FULL_DISK_ERRORS)
def test_full_disk_at_the_link_step_only(tmp_path, monkeypatch, code):
    from kdsl.codegen import cpu

    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu, "write_file", fail_with(code))
    check_runs(fresh_kernel(f"link_{code}"))
    # the object code was cached instead, and loads in the next process's JIT
    assert list((tmp_path / "cache").rglob("*.bin"))


def test_full_disk_for_the_scratch_library_when_the_cache_is_off(tmp_path, monkeypatch):
    from kdsl.codegen import cpu

    monkeypatch.setenv("KDSL_CACHE", "0")
    real_write = cpu.write_file
    calls: list[str] = []

    def fail_after_linking(path, data):
        calls.append(str(path))
        if not str(path).endswith("kernel.o"):  # the library written to load it
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(path, data)

    monkeypatch.setattr(cpu, "write_file", fail_after_linking)
    check_runs(fresh_kernel("scratch"))
    assert any(c.endswith(".so") for c in calls)


# --- in one process ---------------------------------------------------------------------

SHIFT = 1


@kd.kernel
def shifted(a: kd.Array[kd.i64]):
    for i in kd.prange(a.shape[0]):
        a[i] = a[i] + SHIFT


def test_changed_global_constant_recompiles_in_the_same_process():
    global SHIFT
    a = np.array([10, 20, 30], np.int64)
    try:
        shifted(a)
        np.testing.assert_array_equal(a, [11, 21, 31])
        SHIFT = 5
        shifted(a)
        np.testing.assert_array_equal(a, [16, 26, 36])
        SHIFT = 1
        shifted(a)
        np.testing.assert_array_equal(a, [17, 27, 37])
    finally:
        SHIFT = 1


def test_changed_closure_constant_recompiles():
    scale = 2.0

    @kd.kernel
    def scaled(a: kd.Array[kd.f64]):
        for i in kd.prange(a.shape[0]):
            a[i] = a[i] * scale

    a = np.array([1.0, -3.0])
    scaled(a)
    np.testing.assert_array_equal(a, [2.0, -6.0])
    scale = 0.5  # noqa: F841 - read by the kernel through its closure
    scaled(a)
    np.testing.assert_array_equal(a, [1.0, -3.0])


@pytest.fixture
def emulated_device():
    """A fresh emulated CUDA device installed as the driver."""
    from kdsl.runtime.cuda import driver
    from kdsl.runtime.cuda.emulator import EmulatedDriver

    previous = driver.current_driver()
    driver.set_driver(EmulatedDriver())
    yield
    driver.set_driver(previous)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_damaged_entry_is_rebuilt_when_the_same_process_loads_it_again(
        tmp_path, monkeypatch, device, request):
    """The host program of a CUDA kernel is cached and verified as a CPU kernel is."""
    import gc

    if device == "cuda":
        request.getfixturevalue("emulated_device")
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    x = np.linspace(-3.0, 5.0, 41)

    def run_once() -> np.ndarray:
        kernel = fresh_kernel(f"reloaded_{device}")
        out = np.zeros_like(x)
        if device == "cpu":
            kernel(x, out)
        else:
            result = kd.zeros(x.shape, dtype=kd.f64, device="cuda")
            kernel(kd.array(x, device="cuda"), result)
            out = result.numpy()
        expected_out = np.zeros_like(x)
        kernel.python(x, expected_out)
        np.testing.assert_allclose(out, expected_out, rtol=1e-14)
        return out

    run_once()
    gc.collect()  # the kernel is gone: its code is unloaded
    (code,) = tmp_path.rglob("*.bin")
    offset, size = text_section(code.read_bytes())
    data = bytearray(code.read_bytes())
    data[offset:offset + size] = bytes(b ^ 0xFF for b in data[offset:offset + size])
    code.write_bytes(bytes(data))
    run_once()  # verified, found damaged, rebuilt: never run
    assert code.read_bytes() != bytes(data)

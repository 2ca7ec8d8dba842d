"""Kernels whose LLVM module is compiled in parts on two threads and linked from both
give the results of the kernel's own Python function: parallel regions in either part,
reductions, atomic updates, tensor statements, math functions, run-time errors, and
loading the library again from the disk cache."""

import numpy as np
import pytest
from kdsl_cpu_util import with_threads

import kdsl as kd
from kdsl.codegen import cpu, split_module
from kdsl.runtime import compiler


@pytest.fixture
def always_split(monkeypatch, tmp_path):
    """Every module with a parallel region is split, into a cache of its own; counts the
    modules compiled in parts."""
    monkeypatch.setattr(split_module, "MIN_COST", 0)
    monkeypatch.setattr(split_module, "MIN_SHARE", 0.0)
    monkeypatch.setattr(cpu, "usable_cores", lambda: 2)
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    compiled = []
    real = cpu.compile_parts

    def counting(texts):
        compiled.append(len(texts))
        return real(texts)

    monkeypatch.setattr(cpu, "compile_parts", counting)
    forget_compiled()
    yield compiled
    forget_compiled()


def forget_compiled():
    """Drops the loaded specialisations, as a new process starts without them."""
    compiler._loaded.clear()
    for kernel in (step, checked):
        kernel._specialisations.clear()
        kernel._fast = None
        kernel._fast_calls.clear()


@kd.kernel
def step(pos: kd.Array[kd.vec3], vel: kd.Array[kd.vec3], out: kd.Array[kd.f32, 2],
         grid: kd.Array[kd.f32], dt: kd.f32) -> kd.f32:
    n = pos.shape[0]
    for i in kd.prange(n):
        pos[i] += vel[i] * dt
    energy = 0.0
    for i in kd.prange(n):
        energy += 0.5 * kd.dot(vel[i], vel[i])
    for i in kd.prange(n):
        cell = int(kd.abs(pos[i][0]) * 7.0) % grid.shape[0]
        grid[cell] += 1.0
    out[:, :] = kd.exp(out * 0.5) - kd.sqrt(kd.abs(out))
    return energy + kd.max(out)


def _inputs(rng):
    pos = rng.uniform(-1.0, 1.0, (300, 3)).astype(np.float32)
    vel = rng.uniform(-1.0, 1.0, (300, 3)).astype(np.float32)
    out = rng.uniform(-2.0, 2.0, (17, 23)).astype(np.float32)
    grid = np.zeros(7, np.float32)
    return pos, vel, out, grid, np.float32(0.1)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_split_module_runs_as_the_python_function(always_split, rng, threads):
    args = _inputs(rng)
    reference = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = with_threads(threads, step, *args)
    assert always_split and always_split[-1] == 2
    want = step.python(*reference)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for a, b in zip(args[:4], reference[:4]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_split_library_loads_again_from_the_cache(always_split, rng):
    args = _inputs(rng)
    first = step(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    forget_compiled()  # as a new process would: from the disk cache
    again = step(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    assert len(always_split) == 1  # compiled once, loaded the second time
    assert again == first


@kd.kernel(debug=True)  # asserts are checked
def checked(a: kd.Array[kd.f32, 2], b: kd.Array[kd.f32, 2], out: kd.Array[kd.f32, 2]):
    out[:, :] = a * b + 1.0
    for i in kd.prange(a.shape[0]):
        assert a[i, 0] < 100.0, "too large"


def test_errors_of_either_part_are_reported(always_split, rng):
    a, b = (rng.uniform(-1.0, 1.0, (6, 5)).astype(np.float32) for _ in range(2))
    out = np.zeros_like(a)
    checked(a, b, out)
    np.testing.assert_allclose(out, a * b + 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="shapes"):
        checked(a, np.ones((2, 5), np.float32), out)
    a[3, 0] = 500.0
    with pytest.raises(AssertionError, match="too large"):
        checked(a, b, out)
    assert always_split


@kd.kernel
def doubled(a: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        out[i] = 2.0 * a[i]


def test_small_modules_compile_on_one_thread(rng, monkeypatch, tmp_path):
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    parts = []
    monkeypatch.setattr(cpu, "compile_parts", lambda texts: parts.append(texts) or [])
    a = rng.uniform(-1.0, 1.0, 1000).astype(np.float32)
    out = np.zeros_like(a)
    doubled(a, out)
    assert not parts
    np.testing.assert_array_equal(out, 2.0 * a)


def test_the_symbols_of_object_code():
    code = cpu.compile_to_object(
        'declare double @sin(double)\n'
        'define double @f(double %x) {\n  %y = call double @sin(double %x)\n  ret double %y\n}\n'
        'define double @g(double %x) {\n  ret double %x\n}\n')
    defined, undefined = cpu.elf_symbols(code)
    assert {b"f", b"g"} <= defined and undefined == {b"sin"}
    assert cpu.calls_outside([code])
    assert cpu.elf_symbols(b"not an object") is None
    assert cpu.calls_outside([b"not an object"])


def test_the_parts_load_from_memory_where_the_library_cannot(always_split, rng, monkeypatch):
    from kdsl.codegen import native_code

    monkeypatch.setenv("KDSL_CACHE", "0")
    monkeypatch.setattr(native_code, "load_library_bytes", lambda *args: None)  # a full disk
    args = _inputs(rng)
    reference = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = step(*args)
    assert always_split
    np.testing.assert_allclose(got, step.python(*reference), rtol=1e-5)
    np.testing.assert_allclose(args[3], reference[3])


def test_parts_compile_while_another_thread_holds_llvmlites_lock():
    """llvmlite takes one lock around every LLVM call of every thread: the parts' threads
    skip it (each compiles in a context and with a target machine of its own), so they
    run at once; the objects are those of a compile one part at a time."""
    import threading

    from llvmlite.binding import ffi

    texts = [f"define i32 @part{k}(i32 %x) {{\n  %y = mul i32 %x, {k + 3}\n  ret i32 %y\n}}\n"
             for k in range(2)]
    cpu.llvm()
    done: list[list[bytes]] = []
    worker = threading.Thread(target=lambda: done.append(cpu.compile_parts(texts)), daemon=True)
    with ffi.lib._lock:  # held by this thread until the parts are compiled
        worker.start()
        worker.join(timeout=60)
        assert done, "the parts waited for llvmlite's lock"
    assert [cpu.elf_symbols(o)[0] for o in done[0]] == [{b"part0"}, {b"part1"}]
    assert done[0] == [cpu.compile_to_object(t) for t in texts]

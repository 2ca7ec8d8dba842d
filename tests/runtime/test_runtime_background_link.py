"""A kernel's first compile loads its object code from memory and links the shared library
a later process loads on a thread of its own (kdsl/runtime/loading.py): the code runs at
once, the cache holds the object code until the library replaces it, and every entry
loads again with the results of the kernel's own Python function."""

from __future__ import annotations

import errno
import gc
import os

import numpy as np
import pytest

import kdsl as kd
from kdsl.codegen import cpu, split_module
from kdsl.runtime import cache, compiler, loading


def fresh_kernels(tag: str) -> tuple[kd.Kernel, kd.Kernel]:
    """Two kernels never compiled in this process: one calls only itself, the other libm."""
    namespace: dict = {"kd": kd}
    source = (
        f"def own_{tag}(x: kd.Array[kd.f64], out: kd.Array[kd.f64], s: float):\n"
        f"    for i in kd.prange(x.shape[0]):\n"
        f"        out[i] = x[i] * s - x[i] * x[i]\n"
        f"def libm_{tag}(x: kd.Array[kd.f64], out: kd.Array[kd.f64], s: float):\n"
        f"    for i in range(x.shape[0]):\n"
        f"        out[i] = x[i] % s + kd.atan2(x[i], s)\n"
    )
    import linecache

    filename = f"<background link kernels {tag}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return kd.kernel(namespace[f"own_{tag}"]), kd.kernel(namespace[f"libm_{tag}"])


def check(kernel: kd.Kernel) -> str:
    """Runs the kernel against its Python function; how its code was loaded."""
    x = np.linspace(-3.0, 5.0, 37)
    out, want = np.zeros_like(x), np.zeros_like(x)
    kernel(x, out, 0.75)
    kernel.python(x, want, 0.75)
    np.testing.assert_allclose(out, want, rtol=1e-13)
    assert out.any()
    (specialisation,) = kernel._specialisations.values()
    return specialisation.keep_alive.code.kind


def formats(directory) -> list[str]:
    keys = [p.stem for p in directory.rglob("*.meta")]
    return sorted(hit[1]["format"] for key in keys if (hit := cache.load(key)) is not None)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    yield tmp_path
    loading.wait_for_background_links()


def test_first_call_runs_from_memory_and_the_library_replaces_the_object_code(cache_dir):
    for kernel in fresh_kernels("first"):
        assert check(kernel) == "jit"  # libm's functions are this process's own
        compiler._loaded.clear()
        loading.wait_for_background_links()
        kernel._specialisations.clear()
        kernel._fast, kernel._fast_calls = None, {}
        gc.collect()
        assert check(kernel) == "shared"  # as a later process loads it: no LLVM needed
    assert formats(cache_dir) == ["shared", "shared"]


def test_the_object_code_loads_where_the_library_could_not_be_linked(cache_dir, monkeypatch):
    """A full disk at the link: the entry keeps the object code (of both parts of a split
    module), which loads again in a JIT engine."""
    monkeypatch.setattr(split_module, "MIN_COST", 0)
    monkeypatch.setattr(split_module, "MIN_SHARE", 0.0)
    monkeypatch.setattr(cpu, "usable_cores", lambda: 2)

    def full_disk(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cpu, "write_file", full_disk)
    own, _ = fresh_kernels("unlinked")
    assert check(own) == "jit"
    loading.wait_for_background_links()
    assert formats(cache_dir) == ["objects"]
    compiler._loaded.clear()
    own._specialisations.clear()
    own._fast, own._fast_calls = None, {}
    gc.collect()
    assert check(own) == "jit"
    assert formats(cache_dir) == ["objects"]  # loaded, not rebuilt


def test_without_a_cache_the_library_is_linked_at_once(monkeypatch):
    monkeypatch.setenv("KDSL_CACHE", "0")
    own, _ = fresh_kernels("uncached")
    assert check(own) == "shared"


def test_objects_pack_into_one_entry_and_unpack():
    objects = [b"\x7fELF first", b"", b"\x7fELF third part"]
    data, meta = loading.pack_objects(objects, {"sites": []})
    assert meta == {"sites": [], "format": "objects"}
    assert loading.unpack_objects(data, meta) == objects
    one, meta_one = loading.pack_objects(objects[:1], {})
    assert one == objects[0] and loading.unpack_objects(one, meta_one) == objects[0]
    with pytest.raises(ValueError):
        loading.unpack_objects(data + b"x", meta)
    with pytest.raises(ValueError):
        loading.unpack_objects(data, {"format": "shared"})


def test_the_library_goes_to_the_cache_the_compile_started_with(tmp_path, monkeypatch):
    import threading

    release = threading.Event()
    real_link = cpu.link_shared_library

    def slow_link(code):
        release.wait(30)
        return real_link(code)

    monkeypatch.setattr(cpu, "link_shared_library", slow_link)
    first, later = tmp_path / "first", tmp_path / "later"
    monkeypatch.setenv("KDSL_CACHE_DIR", str(first))
    own, _ = fresh_kernels("moved")
    assert check(own) == "jit"
    monkeypatch.setenv("KDSL_CACHE_DIR", str(later))  # before the library is linked
    release.set()
    loading.wait_for_background_links()
    assert not later.exists()
    monkeypatch.setenv("KDSL_CACHE_DIR", str(first))
    assert formats(first) == ["shared"]



CHILD = '''
import os
import threading
import numpy as np
import kdsl as kd
from kdsl.codegen import cpu
from kdsl.runtime import loading

release = threading.Event()
real_link = cpu.link_shared_library
cpu.link_shared_library = lambda code: (release.wait(30), real_link(code))[1]

@kd.kernel
def twice(x: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        x[i] = x[i] * 2.0

x = np.arange(5.0)
twice(x)
pid = os.fork()  # while the library is being linked
if pid == 0:  # the parent's link is none of the child's own: no wait
    waiting = threading.Thread(target=loading.wait_for_background_links, daemon=True)
    waiting.start()
    waiting.join(10)
    os._exit(1 if waiting.is_alive() else 0)
_, status = os.waitpid(pid, 0)
release.set()  # the process exits once the library is in the cache
print("child", os.waitstatus_to_exitcode(status), x.tolist())
'''


def test_the_process_stores_the_library_before_it_exits_and_a_fork_does_not_wait(
        run_python, tmp_path, monkeypatch):
    (tmp_path / "fork_kernels.py").write_text(CHILD)
    result = run_python("import fork_kernels", env={"KDSL_CACHE_DIR": str(tmp_path / "cache")},
                        path=tmp_path)
    assert "child 0 [0.0, 2.0, 4.0, 6.0, 8.0]" in result.stdout
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    assert formats(tmp_path / "cache") == ["shared"]

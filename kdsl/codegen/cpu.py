"""The CPU target: LLVM initialisation, the host target machine, O3 optimisation, and
machine code, loaded as a shared library (linked with the system linker) or, where no
linker is installed, into llvmlite's JIT.

Loading a cached shared library needs neither llvmlite nor LLVM: a warm start is fast.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_state: dict[str, Any] = {}


def llvm() -> Any:
    """llvmlite's binding layer, initialised once (imported lazily: it costs ~30 ms)."""
    if "binding" not in _state:
        import llvmlite.binding as binding

        binding.initialize_all_targets()
        binding.initialize_all_asmprinters()
        binding.initialize_native_target()
        binding.initialize_native_asmprinter()
        _state["binding"] = binding
    return _state["binding"]


def target_machine() -> Any:
    tm = _state.get("target_machine")
    if tm is None:
        b = llvm()
        target = b.Target.from_default_triple()
        tm = target.create_target_machine(
            cpu=b.get_host_cpu_name(), features=b.get_host_cpu_features().flatten(),
            opt=3, reloc="pic", codemodel="default",
        )
        _state["target_machine"] = tm
    return tm


@functools.cache
def target_description() -> str:
    """What compiled code depends on about this machine: part of every cache key.

    Read from the OS where it can be (so that a warm start need not load LLVM)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "vendor_id"))]
        cpu = hashlib.sha256("".join(sorted(set(lines))).encode()).hexdigest()
    except OSError:
        b = llvm()
        cpu = f"{b.get_host_cpu_name()}|{b.get_host_cpu_features().flatten()}"
    return f"{platform.system()}|{platform.machine()}|{cpu}"


def optimize(llvm_ir: str) -> Any:
    """Parses, verifies and optimises LLVM IR at O3 with loop and SLP vectorisation."""
    b = llvm()
    module = b.parse_assembly(llvm_ir)
    module.verify()
    tm = target_machine()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    pto = b.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pass_builder = b.create_pass_builder(tm, pto)
    pass_builder.getModulePassManager().run(module, pass_builder)
    return module


def emit_object(module: Any) -> bytes:
    return bytes(target_machine().emit_object(module))


def linker() -> str | None:
    for name in ("ld", "ld.lld", "ld.gold"):
        path = shutil.which(name)
        if path:
            return path
    return None


def link_shared_library(code: bytes) -> bytes | None:
    """Links object code into a shared library; None where no linker works."""
    ld = linker()
    if ld is None or platform.system() != "Linux":
        return None
    with tempfile.TemporaryDirectory(prefix="kdsl-link-") as tmp:
        obj, lib = Path(tmp, "kernel.o"), Path(tmp, "kernel.so")
        obj.write_bytes(code)
        result = subprocess.run([ld, "-shared", "-o", str(lib), str(obj), "-lm"],
                                capture_output=True)
        if result.returncode != 0:
            return None
        return lib.read_bytes()


_libraries: list[Any] = []


def load_shared_library(path: str, entry: str, init: str, hooks: Any) -> int:
    lib = ctypes.CDLL(path)
    _libraries.append(lib)
    getattr(lib, init)(hooks)
    return int(ctypes.cast(getattr(lib, entry), ctypes.c_void_p).value or 0)


def _engine() -> Any:
    engine = _state.get("engine")
    if engine is None:
        b = llvm()
        engine = b.create_mcjit_compiler(b.parse_assembly(""), target_machine())
        _state["engine"] = engine
    return engine


def jit_symbols(code: bytes, symbols: list[str]) -> dict[str, int]:
    """Loads object code into llvmlite's JIT; the addresses of ``symbols``."""
    b = llvm()
    with _lock:
        engine = _engine()
        engine.add_object_file(b.ObjectFileRef.from_data(code))
        engine.finalize_object()
        return {s: int(engine.get_function_address(s)) for s in symbols}


def load_object_in_jit(code: bytes, entry: str, init: str, hooks: Any) -> int:
    """Loads object code into llvmlite's JIT (used where no linker is installed)."""
    found = jit_symbols(code, [entry, init])
    address, init_address = found[entry], found[init]
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(init_address)(ctypes.addressof(hooks))
    if not address:
        raise RuntimeError(f"compiled code has no symbol {entry}")
    return int(address)


def scratch_dir() -> str:
    path = _state.get("scratch")
    if path is None:
        path = tempfile.mkdtemp(prefix="kdsl-")
        _state["scratch"] = path
        import atexit

        atexit.register(shutil.rmtree, path, True)
    return path


def write_scratch_library(data: bytes, key: str) -> str:
    path = os.path.join(scratch_dir(), f"{key}.so")
    with open(path, "wb") as f:
        f.write(data)
    return path

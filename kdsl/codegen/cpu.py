"""The CPU target: LLVM initialisation, the host target machine, O3 optimisation,
machine code, and a JIT that loads object code (fresh or from the disk cache)."""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Any

_lock = threading.Lock()
_state: dict[str, Any] = {}


def llvm() -> Any:
    """llvmlite's binding layer, initialised once (imported lazily: it costs ~40 ms)."""
    binding = _state.get("binding")
    if binding is None:
        import llvmlite.binding as binding

        binding.initialize_all_targets()
        binding.initialize_all_asmprinters()
        binding.initialize_native_target()
        binding.initialize_native_asmprinter()
        _state["binding"] = binding
    return binding


def target_machine() -> Any:
    tm = _state.get("target_machine")
    if tm is None:
        b = llvm()
        target = b.Target.from_default_triple()
        tm = target.create_target_machine(
            cpu=b.get_host_cpu_name(), features=b.get_host_cpu_features().flatten(),
            opt=3, reloc="default", codemodel="jitdefault", jit=True,
        )
        _state["target_machine"] = tm
    return tm


def target_description() -> str:
    """What compiled code depends on: part of every cache key."""
    b = llvm()
    return f"{b.get_process_triple()}|{b.get_host_cpu_name()}|{b.get_host_cpu_features().flatten()}"


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


def _engine() -> Any:
    engine = _state.get("engine")
    if engine is None:
        b = llvm()
        engine = b.create_mcjit_compiler(b.parse_assembly(""), target_machine())
        _state["engine"] = engine
    return engine


def load_object(code: bytes, symbol: str) -> int:
    """Loads object code into the JIT and returns the address of ``symbol``."""
    from kdsl.runtime.symbols import register_runtime_symbols

    b = llvm()
    with _lock:
        register_runtime_symbols()
        engine = _engine()
        engine.add_object_file(b.ObjectFileRef.from_data(code))
        engine.finalize_object()
        address = engine.get_function_address(symbol)
    if not address:
        raise RuntimeError(f"compiled code has no symbol {symbol}")
    return int(address)


def load_openmp() -> bool:
    """Loads the OpenMP runtime (libgomp); False if it is not installed."""
    if "openmp" in _state:
        return bool(_state["openmp"])
    name = ctypes.util.find_library("gomp") or "libgomp.so.1"
    try:
        llvm().load_library_permanently(name)
        _state["openmp"] = True
    except RuntimeError:
        _state["openmp"] = False
    return bool(_state["openmp"])

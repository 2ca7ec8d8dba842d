"""LLVM IR to object code, and object code into a JIT engine, through a few dozen C
functions of llvmlite's shared library called with ctypes, without importing
``llvmlite.binding``.

Importing ``llvmlite.binding`` costs about 15 ms of the interpreter's time (ctypes
declarations of several hundred functions), during which no other Python thread runs:
on a first compile, that time came before the module's parts could start compiling.
Compiling a module or its parts (see ``cpu.compile_parts``) and loading the object code
(``native_code.load_object``) need only the functions declared here: a first compile
runs without importing llvmlite.binding at all.

The C signatures are those of the llvmlite versions in ``SUPPORTED``; with any other
version (or no shared library where it is expected) ``functions`` is None, and compiles
and loads go through llvmlite.binding as before. The code made is the same: a target
machine made with the same triple, CPU, features and options as
``cpu.new_target_machine``, the same pipeline and tuning options as ``cpu.optimize``.
IR that ``cpu.optimize`` rewrites after optimising (``NEEDS_BINDING``) takes that path.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from ctypes import POINTER, byref, c_bool, c_char_p, c_int, c_size_t, c_void_p
from typing import Any

from kdsl.timings import stage

# llvmlite releases whose C functions have the signatures declared in ``_SIGNATURES``
SUPPORTED = ("0.50.",)
# what ``cpu.optimize`` must do itself (it reparses or links what LLVM made)
NEEDS_BINDING = ("kdsl.stream", "kdsl.vm.")

_OUT = POINTER(c_char_p)
# name: (argument types, result type)
_SIGNATURES: dict[str, tuple[list[Any], Any]] = {
    "LLVMPY_InitializeNativeTarget": ([], None),
    "LLVMPY_InitializeNativeAsmPrinter": ([], None),
    "LLVMPY_SetCommandLine": ([c_char_p, c_char_p], None),
    "LLVMPY_DisposeString": ([c_void_p], None),
    "LLVMPY_GetDefaultTargetTriple": ([_OUT], None),
    "LLVMPY_GetHostCPUName": ([_OUT], None),
    "LLVMPY_GetHostCPUFeatures": ([_OUT], c_int),
    "LLVMPY_GetTargetFromTriple": ([c_char_p, _OUT], c_void_p),
    "LLVMPY_CreateTargetMachine": ([c_void_p, c_char_p, c_char_p, c_char_p, c_int, c_char_p,
                                    c_char_p, c_int, c_int, c_char_p], c_void_p),
    "LLVMPY_GetTargetMachineTriple": ([c_void_p, _OUT], None),
    "LLVMPY_CreateTargetMachineData": ([c_void_p], c_void_p),
    "LLVMPY_CopyStringRepOfTargetData": ([c_void_p, _OUT], None),
    "LLVMPY_DisposeTargetData": ([c_void_p], None),
    "LLVMPY_ContextCreate": ([], c_void_p),
    "LLVMPY_ContextDispose": ([c_void_p], None),
    "LLVMPY_ParseAssembly": ([c_void_p, c_char_p, _OUT], c_void_p),
    "LLVMPY_VerifyModule": ([c_void_p, _OUT], c_bool),
    "LLVMPY_SetTarget": ([c_void_p, c_char_p], None),
    "LLVMPY_SetDataLayout": ([c_void_p, c_char_p], None),
    "LLVMPY_DisposeModule": ([c_void_p], None),
    "LLVMPY_CreatePipelineTuningOptions": ([], c_void_p),
    "LLVMPY_PTOSetLoopVectorization": ([c_void_p, c_bool], None),
    "LLVMPY_PTOSetSLPVectorization": ([c_void_p, c_bool], None),
    "LLVMPY_PTOSetLoopUnrolling": ([c_void_p, c_bool], None),
    "LLVMPY_DisposePipelineTuningOptions": ([c_void_p], None),
    "LLVMPY_CreatePassBuilder": ([c_void_p, c_void_p], c_void_p),
    "LLVMPY_DisposePassBuilder": ([c_void_p], None),
    "LLVMPY_buildPerModuleDefaultPipeline": ([c_void_p, c_int], c_void_p),
    "LLVMPY_RunNewModulePassManager": ([c_void_p, c_void_p, c_void_p], None),
    "LLVMPY_DisposeNewModulePassManger": ([c_void_p], None),
    "LLVMPY_TargetMachineEmitToMemory": ([c_void_p, c_void_p, c_int, _OUT], c_void_p),
    "LLVMPY_GetBufferStart": ([c_void_p], c_void_p),
    "LLVMPY_GetBufferSize": ([c_void_p], c_size_t),
    "LLVMPY_DisposeMemoryBuffer": ([c_void_p], None),
    "LLVMPY_CreateMCJITCompiler": ([c_void_p, c_void_p, c_bool, _OUT], c_void_p),
    "LLVMPY_CreateObjectFile": ([c_char_p, c_size_t], c_void_p),
    "LLVMPY_MCJITAddObjectFile": ([c_void_p, c_void_p], None),
    "LLVMPY_DisposeObjectFile": ([c_void_p], None),
    "LLVMPY_FinalizeObject": ([c_void_p], None),
    "LLVMPY_GetFunctionAddress": ([c_void_p, c_char_p], ctypes.c_uint64),
    "LLVMPY_DisposeExecutionEngine": ([c_void_p], None),
}

_lock = threading.Lock()
# JIT engines and target machines are made (and engines filled and disposed) one at a time
# in the process, as llvmlite.binding makes them under its lock (disposal may run on any
# thread that collects a kernel's code); compiles run on several threads at once
_engine_lock = threading.RLock()
_state: dict[str, Any] = {}


class Machine:
    """A target machine made here, with what a module compiled by it is given."""

    __slots__ = ("data_layout", "pointer", "triple")

    def __init__(self, pointer: int, triple: bytes, data_layout: bytes) -> None:
        self.pointer = pointer
        self.triple = triple
        self.data_layout = data_layout


def library_path() -> str | None:
    """Where llvmlite's shared library is (found without importing llvmlite.binding);
    None where llvmlite or the library is missing or not of a version in ``SUPPORTED``."""
    import importlib.util

    try:
        import llvmlite
    except ImportError:
        return None
    if not str(getattr(llvmlite, "__version__", "")).startswith(SUPPORTED):
        return None
    spec = importlib.util.find_spec("llvmlite")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders or os.name != "posix":
        return None
    path = os.path.join(folders[0], "binding", "libllvmlite.so")
    return path if os.path.exists(path) else None


def functions() -> Any:
    """llvmlite's C functions, declared, with the host's target initialised and kdsl's
    LLVM options set (once per process); None where they cannot be used here."""
    if "functions" in _state:
        return _state["functions"]
    with _lock:
        if "functions" not in _state:
            _state["functions"] = _load()
    return _state["functions"]


def _load() -> Any:
    path = library_path()
    if path is None:
        return None
    try:
        # the mode llvmlite loads it with: the same mapping, the same LLVM
        lib = ctypes.CDLL(path)
        for name, (argtypes, restype) in _SIGNATURES.items():
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, restype
    except (OSError, AttributeError):
        return None
    from kdsl.codegen.cpu import LLVM_OPTIONS, initialise_llvm_once

    def initialise() -> None:
        lib.LLVMPY_InitializeNativeTarget()
        lib.LLVMPY_InitializeNativeAsmPrinter()
        for option in LLVM_OPTIONS:
            lib.LLVMPY_SetCommandLine(b"kdsl", option.encode())

    initialise_llvm_once(initialise)
    return lib


def _take_string(lib: Any, out: c_char_p) -> str:
    """The text of a string an LLVMPY function wrote, freed."""
    value = out.value or b""
    if out.value is not None:
        lib.LLVMPY_DisposeString(ctypes.cast(out, c_void_p))
    return value.decode()


def host_feature_map(lib: Any) -> dict[str, bool]:
    """The host CPU's features, each with whether it has it, as
    ``llvmlite.binding.get_host_cpu_features()`` reads them."""
    out = c_char_p()
    known = lib.LLVMPY_GetHostCPUFeatures(byref(out))
    text = _take_string(lib, out)
    if not known:
        return {}
    return {f[1:]: f[0] == "+" for f in text.split(",") if f}


def host_features(lib: Any) -> str:
    """The host CPU's features as ``llvmlite.binding.get_host_cpu_features().flatten()``
    gives them: ``+name`` or ``-name``, sorted by name, joined by commas."""
    features = host_feature_map(lib)
    return ",".join(("+" if on else "-") + name for name, on in sorted(features.items()))


def new_machine(opt: int) -> Machine:
    """A target machine for this host, as ``cpu.new_target_machine(opt)`` makes it."""
    with _engine_lock:  # as llvmlite.binding takes its lock for every call outside a compile
        return _new_machine(opt)


def _new_machine(opt: int) -> Machine:
    lib = functions()
    out = c_char_p()
    lib.LLVMPY_GetDefaultTargetTriple(byref(out))
    triple = _take_string(lib, out).encode()
    error = c_char_p()
    target = lib.LLVMPY_GetTargetFromTriple(triple, byref(error))
    if not target:
        raise RuntimeError(_take_string(lib, error))
    lib.LLVMPY_GetHostCPUName(byref(out))
    cpu_name = _take_string(lib, out).encode()
    features = _state.get("features")
    if features is None:
        features = _state["features"] = host_features(lib).encode()
    pointer = lib.LLVMPY_CreateTargetMachine(target, triple, cpu_name, features, opt, b"pic",
                                             b"default", 0, 0, b"")
    if not pointer:
        raise RuntimeError("LLVM could not make a target machine for this host")
    lib.LLVMPY_GetTargetMachineTriple(pointer, byref(out))
    machine_triple = _take_string(lib, out).encode()
    data = lib.LLVMPY_CreateTargetMachineData(pointer)
    lib.LLVMPY_CopyStringRepOfTargetData(data, byref(out))
    layout = _take_string(lib, out).encode()
    lib.LLVMPY_DisposeTargetData(data)
    return Machine(pointer, machine_triple, layout)


def take_machine(opt: int) -> Machine:
    """A spare target machine (made while LLVM loaded) or a new one; one thread's at a
    time: ``give_back_machine`` keeps it for the next compile."""
    with _lock:
        spares = _state.get(f"spare_machines_{opt}")
        if spares:
            return spares.pop()  # type: ignore[no-any-return]
    return new_machine(opt)


def give_back_machine(machine: Machine, opt: int) -> None:
    with _lock:
        _state.setdefault(f"spare_machines_{opt}", []).append(machine)


def can_compile(llvm_ir: str) -> bool:
    """Whether ``compile_to_object`` compiles this text as ``cpu.compile_to_object``
    would (it has what only the latter handles), and the C functions are usable."""
    return functions() is not None and not any(tag in llvm_ir for tag in NEEDS_BINDING)


def compile_to_object(llvm_ir: str, opt: int, level: int,
                      cpu_seconds: list[float] | None = None) -> bytes:
    """``cpu.compile_to_object(llvm_ir, machine, cpu_seconds, level)`` with a target
    machine at code generation level ``opt``: parsed, verified, optimised (loop and SLP
    vectorisation at ``level`` 2 and above) and emitted in an LLVM context of its own."""
    lib = functions()
    machine = take_machine(opt)
    context = lib.LLVMPY_ContextCreate()
    module = None
    try:
        start = time.thread_time()
        with stage("llvm optimize"):
            module = _parse(lib, context, llvm_ir)
            lib.LLVMPY_SetTarget(module, machine.triple)
            lib.LLVMPY_SetDataLayout(module, machine.data_layout)
            _optimize(lib, module, machine, level)
        optimized = time.thread_time()
        with stage("llvm emit"):
            code = _emit(lib, module, machine)
        if cpu_seconds is not None:
            cpu_seconds += [optimized - start, time.thread_time() - optimized]
        return code
    finally:
        if module:
            lib.LLVMPY_DisposeModule(module)
        lib.LLVMPY_ContextDispose(context)
        give_back_machine(machine, opt)


def _parse(lib: Any, context: int, llvm_ir: str) -> int:
    error = c_char_p()
    module = lib.LLVMPY_ParseAssembly(context, llvm_ir.encode(), byref(error))
    if error.value is not None or not module:
        message = _take_string(lib, error)
        if module:
            lib.LLVMPY_DisposeModule(module)
        raise RuntimeError(f"LLVM IR parsing error\n{message}")
    if lib.LLVMPY_VerifyModule(module, byref(error)):
        message = _take_string(lib, error)
        lib.LLVMPY_DisposeModule(module)
        raise RuntimeError(message)
    _take_string(lib, error)
    return int(module)


def _optimize(lib: Any, module: int, machine: Machine, level: int) -> None:
    tuning = lib.LLVMPY_CreatePipelineTuningOptions()
    lib.LLVMPY_PTOSetLoopVectorization(tuning, level >= 2)
    lib.LLVMPY_PTOSetSLPVectorization(tuning, level >= 2)
    lib.LLVMPY_PTOSetLoopUnrolling(tuning, True)
    builder = lib.LLVMPY_CreatePassBuilder(machine.pointer, tuning)
    passes = lib.LLVMPY_buildPerModuleDefaultPipeline(builder, level)
    try:
        lib.LLVMPY_RunNewModulePassManager(passes, module, builder)
    finally:
        lib.LLVMPY_DisposeNewModulePassManger(passes)
        lib.LLVMPY_DisposePassBuilder(builder)
        lib.LLVMPY_DisposePipelineTuningOptions(tuning)


def _emit(lib: Any, module: int, machine: Machine) -> bytes:
    error = c_char_p()
    buffer = lib.LLVMPY_TargetMachineEmitToMemory(machine.pointer, module, 1, byref(error))
    if not buffer:
        raise RuntimeError(_take_string(lib, error))
    try:
        return ctypes.string_at(lib.LLVMPY_GetBufferStart(buffer),
                                lib.LLVMPY_GetBufferSize(buffer))
    finally:
        lib.LLVMPY_DisposeMemoryBuffer(buffer)


def load_objects(objects: list[bytes],
                 symbols: list[str]) -> tuple[dict[str, int], Callable[[], None]]:
    """Object code loaded into a JIT engine of its own, as ``native_code.load_object``
    does through llvmlite.binding: the addresses of ``symbols`` and the function that
    frees the engine (with the code and its target machine); RuntimeError when a symbol
    is missing."""
    with _engine_lock:
        return _load_objects(objects, symbols)


def _load_objects(objects: list[bytes],
                  symbols: list[str]) -> tuple[dict[str, int], Callable[[], None]]:
    import platform

    lib = functions()
    error = c_char_p()
    context = lib.LLVMPY_ContextCreate()  # the engine's empty module's, freed after it
    module = _parse(lib, context, "")
    # the engine owns the machine and the module: a machine no other compile uses
    machine = take_machine(3)
    # llvmlite's own memory manager where llvmlite uses it by default (64-bit ARM)
    own_memory = platform.machine().lower() in ("arm64", "aarch64")
    engine = lib.LLVMPY_CreateMCJITCompiler(module, machine.pointer, own_memory, byref(error))
    if not engine:  # LLVM's engine builder freed the module and the machine it took
        message = _take_string(lib, error)
        lib.LLVMPY_ContextDispose(context)
        raise RuntimeError(message)

    def unload() -> None:
        with _engine_lock:
            lib.LLVMPY_DisposeExecutionEngine(engine)
            lib.LLVMPY_ContextDispose(context)

    try:
        for data in objects:
            wrapper = lib.LLVMPY_CreateObjectFile(data, len(data))
            if not wrapper:  # not object code LLVM can read
                raise RuntimeError("object code LLVM cannot read")
            lib.LLVMPY_MCJITAddObjectFile(engine, wrapper)  # takes the code: a copy
            lib.LLVMPY_DisposeObjectFile(wrapper)
        lib.LLVMPY_FinalizeObject(engine)
        addresses = {s: int(lib.LLVMPY_GetFunctionAddress(engine, s.encode("ascii")))
                     for s in symbols}
    except BaseException:
        unload()
        raise
    missing = [s for s, a in addresses.items() if not a]
    if missing:
        unload()
        raise RuntimeError(f"compiled code has no symbol {', '.join(missing)}")
    return addresses, unload


def warm_up(machines: dict[int, int]) -> None:
    """Makes spare target machines (``{opt: count}``) and compiles an empty function:
    LLVM sets up its optimisation and code generation on first use (a few milliseconds)."""
    for opt, count in machines.items():
        for _ in range(count):
            give_back_machine(new_machine(opt), opt)
    compile_to_object("define void @kdsl.warm_up() {\n  ret void\n}\n", 3, 3)

"""The CPU target: LLVM initialisation, the host target machine, O3 optimisation,
machine code, and linking it into a shared library with the system linker (loading is in
``native_code``).

Loading a cached shared library needs neither llvmlite nor LLVM: a warm start is fast.
"""

from __future__ import annotations

import functools
import os
import platform
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kdsl.digests import sha256
from kdsl.timings import note, stage

_lock = threading.Lock()
_llvm_lock = threading.Lock()
_initialise_lock = threading.Lock()
_state: dict[str, Any] = {}
# LLVM's command-line options for kdsl's code: an array of 3x3 matrices is read with a
# stride of 9 elements: above LLVM's default limit of 8 its loop vectoriser gathers every
# component (3-20x slower than loading whole rows and shuffling them apart); rows written
# with a gap (three columns of an (N, 4) array) are stored with one masked store of whole
# rows that never writes the gap (another thread may own it), where LLVM otherwise
# scatters every component (4x slower)
LLVM_OPTIONS = ("-max-interleave-group-factor=16", "-enable-masked-interleaved-mem-accesses")


def llvm() -> Any:
    """llvmlite's binding layer, initialised once (imported lazily: it costs ~30 ms)."""
    if "binding" not in _state:
        with _llvm_lock:
            if "binding" not in _state:
                import llvmlite.binding as binding

                def initialise() -> None:
                    binding.initialize_native_target()
                    binding.initialize_native_asmprinter()
                    for option in LLVM_OPTIONS:
                        binding.set_option("kdsl", option)

                initialise_llvm_once(initialise)
                _install_private_calls()
                _state["binding"] = binding
    return _state["binding"]


def initialise_llvm_once(initialise: Callable[[], None]) -> None:
    """Runs ``initialise`` once per process: it registers the host's target (only that
    one: every target's registration costs 1 ms more, and device code goes through
    libNVVM, not through LLVM's own NVPTX target) and sets ``LLVM_OPTIONS``, through
    llvmlite.binding or through ``llvm_direct``, which call the same LLVM."""
    with _initialise_lock:
        if not _state.get("initialised"):
            initialise()
            _state["initialised"] = True


class _PrivateCalls:
    """Stands in for the lock llvmlite takes around every call of LLVM's C API (one lock
    for every thread, which would run the parts of a module compiled on threads one
    after the other): a thread compiling in an LLVM context and with a target machine of
    its own (``private_llvm_calls``) skips it; every other call takes it as before."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.local = threading.local()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if getattr(self.local, "private", False):
            return True
        return bool(self.lock.acquire(blocking, timeout))

    def release(self) -> None:
        if not getattr(self.local, "private", False):
            self.lock.release()


def _install_private_calls() -> None:
    """Puts ``_PrivateCalls`` in place of llvmlite's lock (left as it is in an llvmlite
    that keeps it elsewhere: the parts then compile one after the other)."""
    from llvmlite.binding import ffi

    llvm_lock: Any = getattr(ffi.lib, "_lock", None)
    inner = getattr(llvm_lock, "_lock", None)
    if inner is not None and hasattr(inner, "acquire") and hasattr(inner, "release"):
        _state["private_calls"] = llvm_lock._lock = _PrivateCalls(inner)


@contextmanager
def private_llvm_calls() -> Iterator[None]:
    """Within the block, this thread's LLVM calls run alongside other threads' (for LLVM
    objects only this thread uses: a context, its modules, a target machine)."""
    private = _state.get("private_calls")
    if private is None:
        yield
        return
    private.local.private = True
    try:
        yield
    finally:
        private.local.private = False


def start_loading_llvm() -> None:
    """Loads LLVM (``llvm()``) on a thread of its own, for a compile that needs it once
    its frontend, passes and code generation are done: loading LLVM's shared library
    waits on the disk and the dynamic loader, not on the interpreter, so it overlaps them."""
    if "binding" in _state or "loader" in _state:
        return
    with _lock:
        if "loader" in _state:
            return
        _state["loader"] = True
    import _thread

    # not threading.Thread: its start waits until the new thread runs (milliseconds on a
    # busy machine), and nothing waits for this one (a compile's llvm() takes its lock)
    _thread.start_new_thread(_load_quietly, ())


def _load_quietly() -> None:
    try:
        _map_llvm_library()
        from kdsl.codegen import llvm_direct

        # with llvmlite's C functions at hand, a compile and the loading of its code
        # need no llvmlite.binding (15 ms of the interpreter's time to import)
        if llvm_direct.functions() is not None:
            llvm_direct.warm_up({3: min(usable_cores(), 2), LIGHT_CODEGEN: 1})
            return
        llvm()
        _warm_up()
    except Exception:  # noqa: BLE001 - the compile's own call to llvm() reports it
        pass


def _warm_up() -> None:
    """Optimises and compiles an empty function: LLVM sets up its optimisation and code
    generation on their first use (a few milliseconds), here while the interpreter runs
    the compile's frontend. LLVM calls only: no import on this thread (an import the
    compile's thread makes meanwhile could wait for it)."""
    b = llvm()
    machine = target_machine()
    for _ in range(min(usable_cores(), 2)):  # for the parts a split compile hands threads
        give_back_machine(new_target_machine())
    give_back_machine(new_target_machine(LIGHT_CODEGEN), LIGHT_CODEGEN)
    context = b.create_context()
    try:
        module = b.parse_assembly("define void @kdsl.warm_up() {\n  ret void\n}\n", context=context)
        module.triple, module.data_layout = machine.triple, str(machine.target_data)
        tuning = b.create_pipeline_tuning_options(speed_level=3)
        passes = b.create_pass_builder(machine, tuning)
        passes.getModulePassManager().run(module, passes)
        machine.emit_object(module)
        module.close()
    finally:
        context.close()


def _map_llvm_library() -> None:
    """Maps llvmlite's shared library through libc's ``dlopen``, a foreign call that
    releases the interpreter's lock (``ctypes.CDLL`` holds it for the whole load, which
    is most of loading LLVM): llvmlite's own load then finds the library mapped."""
    import ctypes
    import importlib.util

    spec = importlib.util.find_spec("llvmlite")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders or platform.system() != "Linux":
        return
    libc = ctypes.CDLL(None)
    dlopen = libc.dlopen
    dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
    # the mode ctypes.CDLL uses: the same mapping serves llvmlite's load
    dlopen(os.path.join(folders[0], "binding", "libllvmlite.so").encode(),
           os.RTLD_NOW | os.RTLD_LOCAL)


# the code generator's optimisation level for code that runs once per call and has no
# loop (a split module's entry point and argument checks): fast instruction selection
# and register allocation, a third of the time of level 3's
LIGHT_CODEGEN = 0
# the optimisation pipeline's level for it: none (LLVM's O0 runs the always-inliner only;
# its code runs no faster at O1 or O3, measured, and costs as much again to optimise)
LIGHT_PIPELINE = 0


def new_target_machine(opt: int = 3) -> Any:
    """A target machine for this host (AVX2, AVX-512 where present), position independent;
    ``opt`` is the code generator's optimisation level."""
    b = llvm()
    target = b.Target.from_default_triple()
    return target.create_target_machine(
        cpu=b.get_host_cpu_name(), features=b.get_host_cpu_features().flatten(),
        opt=opt, reloc="pic", codemodel="default",
    )


def take_machine(opt: int = 3) -> Any:
    """A target machine for one thread's compile: a spare one (made while LLVM loaded, off
    the compile's path) or a new one. ``give_back_machine`` keeps it for the next."""
    with _lock:
        spares = _state.get(f"spare_machines_{opt}")
        if spares:
            return spares.pop()
    return new_target_machine(opt)


def give_back_machine(machine: Any, opt: int = 3) -> None:
    with _lock:
        _state.setdefault(f"spare_machines_{opt}", []).append(machine)


def target_machine() -> Any:
    """The target machine shared by optimisation and code emission."""
    tm = _state.get("target_machine")
    if tm is None:
        tm = new_target_machine()
        _state["target_machine"] = tm
    return tm


@functools.cache
def target_description() -> str:
    """What compiled code depends on about this machine: part of every cache key.

    Read from the OS where it can be (so that a warm start need not load LLVM)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "vendor_id"))]
        cpu = sha256("".join(sorted(set(lines))).encode()).hexdigest()
    except OSError:
        b = llvm()
        cpu = f"{b.get_host_cpu_name()}|{b.get_host_cpu_features().flatten()}"
    return f"{platform.system()}|{platform.machine()}|{cpu}"


def optimize(llvm_ir: str, context: Any = None, machine: Any = None, level: int = 3) -> Any:
    """Parses, verifies and optimises LLVM IR at O3 with loop and SLP vectorisation (for
    ``machine``, by default the shared target machine), or at a lower ``level`` without
    vectorisation."""
    b = llvm()
    module = b.parse_assembly(llvm_ir, context=context)
    module.verify()
    tm = machine or target_machine()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    pto = b.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = level >= 2
    pto.slp_vectorization = level >= 2
    pto.loop_unrolling = True
    pass_builder = b.create_pass_builder(tm, pto)
    pass_builder.getModulePassManager().run(module, pass_builder)
    if "kdsl.stream" in llvm_ir:  # stores to stream (streaming_stores.py): tagged, now marked
        from kdsl.codegen.streaming_stores import mark_streaming_stores

        optimized = module
        module = b.parse_assembly(mark_streaming_stores(str(optimized)), context=context)
        optimized.close()
    if "kdsl.vm." in llvm_ir:  # calls the compiler's own vector math
        from kdsl.codegen.vector_variants import inline_variants

        inline_variants(module, tm, context)
    return module


def emit_object(module: Any, machine: Any = None) -> bytes:
    return bytes((machine or target_machine()).emit_object(module))


def compile_to_object(llvm_ir: str, machine: Any = None,
                      cpu_seconds: list[float] | None = None, level: int = 3) -> bytes:
    """Optimised object code for LLVM IR, compiled in an LLVM context of its own that is
    freed afterwards (the global context keeps every type and constant it ever saw).
    Another thread passes a target machine of its own (one is not shared by threads);
    ``cpu_seconds`` receives this thread's processor time optimising and emitting;
    ``level`` is the optimisation pipeline's (see ``optimize``)."""
    b = llvm()
    context = b.create_context()
    try:
        start = time.thread_time()
        with stage("llvm optimize"):
            module = optimize(llvm_ir, context, machine, level)
        optimized = time.thread_time()
        try:
            with stage("llvm emit"):
                return emit_object(module, machine)
        finally:
            module.close()
            if cpu_seconds is not None:
                cpu_seconds += [optimized - start, time.thread_time() - optimized]
    finally:
        context.close()


def compile_parts(texts: Sequence[str], light: frozenset[int] = frozenset()) -> list[bytes]:
    """Object code for each part of a split module: the first on this thread, the others
    each on a thread of its own (LLVM runs without the interpreter's lock). Each thread
    starts as soon as its part's text is read from ``texts`` (which may render it then),
    before the first part's. The parts in ``light`` (by default those ``texts`` names, see
    ``split_module.PartTexts``) have no loop and no parallel region: they are compiled at
    the light levels (``LIGHT_PIPELINE``, ``LIGHT_CODEGEN``)."""
    from kdsl.codegen import llvm_direct

    objects: list[bytes] = [b""] * len(texts)
    failures: list[BaseException] = []
    cpu_seconds: list[list[float]] = [[] for _ in texts]
    light = light or getattr(texts, "light", frozenset())

    def compile_part(k: int, text: str) -> None:
        try:
            opt, level = (LIGHT_CODEGEN, LIGHT_PIPELINE) if k in light else (3, 3)
            if llvm_direct.can_compile(text):
                objects[k] = llvm_direct.compile_to_object(text, opt, level, cpu_seconds[k])
                return
            with private_llvm_calls():  # a machine of its own, made without the lock too
                machine = take_machine(opt)
                objects[k] = compile_to_object(text, machine, cpu_seconds[k], level)
            give_back_machine(machine, opt)
        except BaseException as error:  # noqa: BLE001 - raised again on the caller's thread
            failures.append(error)

    threads = []
    try:
        for k in range(1, len(texts)):
            with stage("llvm ir text"):
                text = texts[k]
            thread = threading.Thread(target=compile_part, args=(k, text),
                                      name=f"kdsl-llvm-{k}")
            thread.start()
            threads.append(thread)
        with stage("llvm ir text"):
            text = texts[0]
        # not the shared target machine: another thread may use it
        compile_part(0, text)
    finally:
        with stage("llvm other threads"):  # what this thread waits for them
            for thread in threads:
                thread.join()
    if failures:
        raise failures[0]
    for k, seconds in enumerate(cpu_seconds):
        if seconds:
            note(f"llvm part {k} CPU {sum(seconds) * 1e3:.1f} ms (optimize {seconds[0] * 1e3:.1f}"
                 f", emit {seconds[1] * 1e3:.1f})")
    return objects


@functools.cache
def host_cpu_features() -> dict[str, bool]:
    """The host CPU's features by name (``llvmlite.binding.get_host_cpu_features()``),
    read through ``llvm_direct`` where it can: code generation asks, and a first compile
    need not import llvmlite.binding for it."""
    from kdsl.codegen import llvm_direct

    lib = llvm_direct.functions()
    if lib is not None:
        return llvm_direct.host_feature_map(lib)
    return dict(llvm().get_host_cpu_features())


def compile_module(llvm_ir: str) -> bytes:
    """Object code for a whole module (``compile_to_object``), through ``llvm_direct``
    where it can (without importing llvmlite.binding)."""
    from kdsl.codegen import llvm_direct

    if not llvm_direct.can_compile(llvm_ir):
        return compile_to_object(llvm_ir)
    return llvm_direct.compile_to_object(llvm_ir, 3, 3)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def linker() -> str | None:
    from kdsl.files import which

    for name in ("ld", "ld.lld", "ld.gold"):
        path = which(name)
        if path:
            return path
    return None


def link_shared_library(code: bytes | list[bytes]) -> bytes | None:
    """Links object code (one object or several) into a shared library; None where no
    linker works or its files cannot be written (a full disk: the code is then loaded
    from memory)."""
    ld = linker()
    if ld is None or platform.system() != "Linux":
        return None
    from kdsl.files import scratch_folder

    objects = [code] if isinstance(code, bytes) else code
    try:
        with scratch_folder("kdsl-link-") as tmp:
            paths = [Path(tmp, f"part{k}-kernel.o" if k else "kernel.o")
                     for k in range(len(objects))]
            lib = Path(tmp, "kernel.so")
            for path, data in zip(paths, objects):
                write_file(path, data)
            # libm only where the code calls out (searching for it is half the link)
            libraries = []
            if calls_outside(objects):
                libraries = ["-lm", *(lib for data in objects for lib in vector_math_libraries(data))]
            if run_quietly([ld, "-shared", "-o", str(lib), *map(str, paths),
                            *dict.fromkeys(libraries)]) != 0:
                return None
            return lib.read_bytes()
    except OSError:
        return None


def run_quietly(command: list[str]) -> int:
    """Runs a program with its output discarded; its exit status. Through posix_spawn:
    no fork of this process, and none of the subprocess module's import time."""
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
    pid = os.posix_spawn(command[0], command, os.environ, file_actions=quiet)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:  # pragma: no cover - retried by Python itself since 3.5
            continue
    return os.waitstatus_to_exitcode(status)


def external_symbols(objects: list[bytes]) -> set[bytes] | None:
    """The symbols the objects refer to that none of them defines (calls into libm or
    libc); None where an object cannot be read."""
    defined: set[bytes] = set()
    undefined: set[bytes] = set()
    for data in objects:
        symbols = elf_symbols(data)
        if symbols is None:
            return None
        defined |= symbols[0]
        undefined |= symbols[1]
    return undefined - defined


def calls_outside(objects: list[bytes]) -> bool:
    """Whether object code refers to symbols none of the objects defines (calls into libm
    or libc); True where an object cannot be read, where nothing is assumed."""
    external = external_symbols(objects)
    return external is None or bool(external)


def has_undefined_symbols(code: bytes) -> bool:
    """Whether an ELF64 little-endian object refers to symbols it does not define (calls
    into libm or libc); True for anything else, where nothing is assumed."""
    return calls_outside([code])


def elf_symbols(code: bytes) -> tuple[set[bytes], set[bytes]] | None:
    """The names of the symbols an ELF64 little-endian object defines and of those it
    refers to without defining; None for anything else."""
    try:
        if code[:6] != b"\x7fELF\x02\x01":
            return None
        (shoff,) = struct.unpack_from("<Q", code, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", code, 0x3A)
        defined: set[bytes] = set()
        undefined: set[bytes] = set()
        for k in range(shnum):
            header = shoff + k * shentsize
            (kind,) = struct.unpack_from("<I", code, header + 4)
            if kind != 2:  # SHT_SYMTAB
                continue
            offset, size, link = struct.unpack_from("<QQI", code, header + 0x18)
            (names,) = struct.unpack_from("<Q", code, shoff + link * shentsize + 0x18)
            for entry in range(offset + 24, offset + size, 24):  # entry 0 is the null symbol
                name, info, _, section = struct.unpack_from("<IBBH", code, entry)
                if name == 0 or info >> 4 == 0:  # unnamed, or local (STB_LOCAL)
                    continue
                end = code.index(b"\0", names + name)
                (undefined if section == 0 else defined).add(code[names + name:end])
        return defined, undefined
    except (struct.error, ValueError):
        return None


def vector_math_libraries(code: bytes) -> list[str]:
    """The linker's arguments for libmvec where the code calls it (``_ZGV`` names)."""
    if b"_ZGV" not in code:
        return []
    from kdsl.codegen.vector_math import library_path

    path = library_path()
    return [] if path is None else [f"-l:{path}"]


def write_file(path: Path, data: bytes) -> None:
    """Writes a file the linker reads (one place a full disk shows)."""
    path.write_bytes(data)


def scratch_dir() -> str:
    path = _state.get("scratch")
    if path is None:
        import atexit
        import shutil
        import tempfile

        path = tempfile.mkdtemp(prefix="kdsl-")
        _state["scratch"] = path

        atexit.register(shutil.rmtree, path, True)
    return path

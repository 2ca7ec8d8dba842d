"""Machine code loaded into this process: a shared library (dlopen) or, where no linker
works or no file can be written, an object file in a JIT engine of its own.

A ``LoadedCode`` unloads its code when the last reference to it goes: the specialisations
that call it hold it, so once nothing can call the code, its memory is returned (a
notebook that redefines kernels, a program that generates many, does not grow).
"""

from __future__ import annotations

import ctypes
import itertools
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

_live: weakref.WeakSet[LoadedCode] = weakref.WeakSet()
_scratch_names = itertools.count()


class LoadedCode:
    """Loaded machine code and the addresses of its symbols; unloaded when collected."""

    def __init__(self, addresses: dict[str, int], unload: Callable[[], None], kind: str) -> None:
        self.addresses = addresses
        self.kind = kind  # "shared" or "jit"
        # the finalizer holds what unloading needs, never self; at exit the process goes
        # away with the code still loaded (other objects' finalizers may still call it)
        self._finalizer = weakref.finalize(self, unload)
        self._finalizer.atexit = False
        _live.add(self)

    def keep_forever(self) -> None:
        """Never unloads the code (the runtime's own helpers): no longer counted as live.
        What unloading would free (a JIT engine) is kept with the code."""
        self._never_freed = self._finalizer.detach()
        _live.discard(self)

    def __getitem__(self, symbol: str) -> int:
        return self.addresses[symbol]


def live_count() -> int:
    """How many pieces of machine code are loaded now (what tests watch for leaks)."""
    return len(_live)


def _dlclose(handle: int) -> None:
    import _ctypes

    try:
        _ctypes.dlclose(handle)  # type: ignore[attr-defined]
    except OSError:
        pass


def load_library(path: str, symbols: list[str]) -> LoadedCode:
    """Loads a shared library; OSError when it cannot be loaded, AttributeError when a
    symbol is missing (nothing stays loaded then)."""
    library = ctypes.CDLL(path)
    handle = library._handle
    try:
        addresses = {s: int(ctypes.cast(getattr(library, s), ctypes.c_void_p).value or 0)
                     for s in symbols}
    except AttributeError:
        _dlclose(handle)
        raise
    return LoadedCode(addresses, lambda: _dlclose(handle), "shared")


def load_library_bytes(data: bytes, symbols: list[str], name: str) -> LoadedCode | None:
    """Loads a shared library from memory through a scratch file (removed once loaded);
    None where the file cannot be written (a full disk) or loaded."""
    from kdsl.codegen.cpu import scratch_dir, write_file

    try:
        path = os.path.join(scratch_dir(), f"{name}-{os.getpid()}-{next(_scratch_names)}.so")
        write_file(Path(path), data)
    except OSError:
        return None
    try:
        return load_library(path, symbols)
    except OSError:
        return None
    finally:
        try:
            os.unlink(path)  # the loaded library stays mapped
        except OSError:
            pass


def unresolved_symbols(objects: list[bytes]) -> list[str] | None:
    """The symbols the objects call outside themselves that this process has not loaded
    (a JIT engine resolves them among what is loaded: libm's, for one); None where an
    object cannot be read."""
    from kdsl.codegen.cpu import external_symbols

    external = external_symbols(objects)
    if external is None:
        return None
    if not external:
        return []
    process = ctypes.CDLL(None)
    return sorted(name.decode() for name in external if not hasattr(process, name.decode()))


def load_object(code: bytes | list[bytes], symbols: list[str],
                resolvable: bool = False) -> LoadedCode:
    """Loads object code (one object, or the objects of a module compiled in parts) into
    a JIT engine of its own (disposed with the code); RuntimeError when a symbol is
    missing, or when the code calls outside itself what this process has not loaded
    (an object cached by another process: ``resolvable`` where the caller checked)."""
    from kdsl.codegen import llvm_direct
    from kdsl.codegen.cpu import llvm, take_machine

    objects = [code] if isinstance(code, bytes) else code
    # LLVM's engine aborts the process on a symbol it cannot resolve: an object cached by
    # another process may call into a library this one has not loaded
    missing = [] if resolvable else unresolved_symbols(objects)
    if missing:
        raise RuntimeError(f"object code calls {', '.join(missing)}, not loaded here")
    if llvm_direct.functions() is not None:  # without importing llvmlite.binding
        addresses, unload = llvm_direct.load_objects(objects, symbols)
        return LoadedCode(addresses, unload, "jit")
    b = llvm()
    # the engine owns its target machine and frees it with itself: never a shared one (a
    # spare one made while LLVM loaded, where there is one: off the first compile's path)
    engine = b.create_mcjit_compiler(b.parse_assembly(""), take_machine())
    for data in objects:
        engine.add_object_file(b.ObjectFileRef.from_data(data))
    engine.finalize_object()
    addresses = {s: int(engine.get_function_address(s)) for s in symbols}
    missing = [s for s, a in addresses.items() if not a]
    if missing:
        engine.close()
        raise RuntimeError(f"compiled code has no symbol {', '.join(missing)}")
    return LoadedCode(addresses, engine.close, "jit")


def load_linked_or_in_jit(code: bytes, symbols: list[str], name: str) -> LoadedCode:
    """Object code linked into a shared library and loaded, or loaded into a JIT engine
    where linking or writing the library fails."""
    from kdsl.codegen.cpu import link_shared_library

    library = link_shared_library(code)
    loaded = load_library_bytes(library, symbols, name) if library is not None else None
    return loaded if loaded is not None else load_object(code, symbols)


def call_init(code: LoadedCode, init: str, hooks: Any) -> None:
    """Hands a module the runtime's table of hooks (kept alive by the caller)."""
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(code[init])(ctypes.addressof(hooks))

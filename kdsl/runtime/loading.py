"""From a cache key to loaded machine code: a verified disk-cache entry, or a fresh build
that is stored (when the disk allows) and loaded (from memory when it does not).

Shared by CPU kernels and the host programs of CUDA kernels. The loaded code lives as long
as the specialisations that call it (see ``codegen.native_code``), and one key is loaded
once per process while anything holds it.

A build may leave its linking to ``load_or_build`` (``link_later``): where the object
code calls nothing outside itself, it is loaded from memory at once (a JIT engine loads
it in about a millisecond, the system linker takes several), stored as object code, and
linked on a thread of its own into the shared library that replaces that entry: what a
later process loads without LLVM. The process waits for that thread before it exits.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kdsl.runtime import cache
from kdsl.timings import note, stage

if TYPE_CHECKING:
    from kdsl.codegen.native_code import LoadedCode

# (object code: one object or several, shared library or None, metadata with its "format")
Build = Callable[[], tuple["bytes | list[bytes]", "bytes | None", dict]]

# several objects in one cache entry (format "objects"): this tag, their count, their sizes
_OBJECTS_TAG = b"kdsl-objects\0\0\0\0"
_background_links: dict[str, threading.Event] = {}  # set once the library is stored
_background_lock = threading.Lock()
_exit_hooks: list[bool] = []  # the exit and fork hooks, once installed


def load_or_build(key: str, symbols: list[str], build: Build,
                  link_later: bool = False) -> tuple[LoadedCode, dict]:
    """The loaded code of ``key`` (with the addresses of ``symbols``) and its metadata.
    With ``link_later``, ``build`` links nothing (it returns no library)."""
    from kdsl.codegen import native_code

    wait_for_background_links(key)
    with stage("cache read"):
        hit = cache.load(key)
    if hit is not None:
        path, meta, data = hit
        try:
            with stage("load"):
                if meta["format"] == "shared":
                    return native_code.load_library(str(path), symbols), meta
                return native_code.load_object(unpack_objects(data, meta), symbols), meta
        except (OSError, AttributeError, RuntimeError, KeyError, ValueError, struct.error):
            pass  # unloadable: compiled afresh below
    code, library, meta = build()
    if link_later:
        from_memory = _load_and_link_in_background(key, code, symbols, meta)
        if from_memory is not None:
            return from_memory
        from kdsl.codegen.cpu import link_shared_library

        with stage("link"):
            library = link_shared_library(code)
        meta = dict(meta, format="object" if library is None else "shared")
    with stage("cache write"):
        # several objects (a module compiled in parts) come with the library linked from them
        written = code if library is None else library
        stored = cache.store(key, written, meta) if isinstance(written, bytes) else None
    loaded = None
    if library is not None:
        if stored is not None:
            try:
                loaded = native_code.load_library(str(stored), symbols)
            except OSError:
                loaded = None
        if loaded is None:
            loaded = native_code.load_library_bytes(library, symbols, key[:24])
    if loaded is None:  # no linker, or no file could be written: from memory
        loaded = native_code.load_object(code, symbols)
        if meta["format"] != "object":
            meta = dict(meta, format="object")
    return loaded, meta


def _load_and_link_in_background(key: str, code: bytes | list[bytes], symbols: list[str],
                                 meta: dict) -> tuple[LoadedCode, dict] | None:
    """Object code loaded from memory, stored as it is, and linked into the shared library
    that replaces it in the cache on a thread of its own; None where that cannot be done
    (the cache off, no linker, calls outside the code: then it is linked now)."""
    from kdsl.codegen import cpu, native_code

    objects = [code] if isinstance(code, bytes) else list(code)
    if not cache.cache_enabled() or cpu.linker() is None:
        return None
    if native_code.unresolved_symbols(objects) != []:  # unreadable, or not loaded here
        return None
    with stage("load"):
        loaded = native_code.load_object(objects, symbols, resolvable=True)
    packed, packed_meta = pack_objects(objects, meta)
    with stage("cache write"):
        stored = cache.store(key, packed, packed_meta)
    if stored is not None:  # where nothing could be stored, nothing will be linked either
        # the entry's directory now: KDSL_CACHE_DIR may change before the thread stores
        _start_link(key, objects, meta, stored.parent.parent)
        note("linked in the background")
    return loaded, dict(meta, format="object")


def _start_link(key: str, objects: list[bytes], meta: dict, root: Path) -> None:
    """Links on a thread the caller does not wait for (``threading.Thread.start`` waits
    until the new thread runs, milliseconds on a busy machine); the process waits for it
    at exit, a child forked meanwhile does not."""
    import _thread

    done = threading.Event()
    with _background_lock:
        _background_links[key] = done
        if not _exit_hooks:
            import atexit
            import os

            atexit.register(wait_for_background_links)
            os.register_at_fork(after_in_child=_forget_links_in_child)
            _exit_hooks.append(True)
    _thread.start_new_thread(_link_and_store, (key, objects, meta, root, done))


def _forget_links_in_child() -> None:
    """In a forked child: the parent's links are none of its own (their threads are not
    in it), and their lock may have been held when it was forked."""
    global _background_lock
    _background_lock = threading.Lock()
    _background_links.clear()


def _link_and_store(key: str, objects: list[bytes], meta: dict, root: Path,
                    done: threading.Event) -> None:
    from kdsl.codegen.cpu import link_shared_library

    try:
        library = link_shared_library(objects)
        if library is not None:
            cache.store(key, library, dict(meta, format="shared"), root)
    finally:
        with _background_lock:
            if _background_links.get(key) is done:
                del _background_links[key]
        done.set()


def wait_for_background_links(key: str | None = None) -> None:
    """Waits for the shared libraries being linked on other threads (of ``key``, or all)
    to be in the cache."""
    with _background_lock:
        pending = list(_background_links.values()) if key is None else \
            [e for e in [_background_links.get(key)] if e is not None]
    for done in pending:
        done.wait()


def pack_objects(objects: list[bytes], meta: dict) -> tuple[bytes, dict]:
    """One object as it is (format "object"), several in one entry (format "objects")."""
    if len(objects) == 1:
        return objects[0], dict(meta, format="object")
    header = _OBJECTS_TAG + struct.pack(f"<{len(objects) + 1}Q", len(objects),
                                        *map(len, objects))
    return header + b"".join(objects), dict(meta, format="objects")


def unpack_objects(data: bytes, meta: dict) -> bytes | list[bytes]:
    """The object code of an entry of format "object" or "objects"; ValueError for any
    other."""
    if meta["format"] == "object":
        return data
    if meta["format"] != "objects" or not data.startswith(_OBJECTS_TAG):
        raise ValueError(f"not object code: {meta['format']!r}")
    start = len(_OBJECTS_TAG)
    (count,) = struct.unpack_from("<Q", data, start)
    sizes = struct.unpack_from(f"<{count}Q", data, start + 8)
    objects, offset = [], start + 8 * (count + 1)
    for size in sizes:
        objects.append(data[offset:offset + size])
        offset += size
    if offset != len(data):
        raise ValueError("damaged object code")
    return objects

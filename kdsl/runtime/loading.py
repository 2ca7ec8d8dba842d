"""From a cache key to loaded machine code: a verified disk-cache entry, or a fresh build
that is stored (when the disk allows) and loaded (from memory when it does not).

Shared by CPU kernels and the host programs of CUDA kernels. The loaded code lives as long
as the specialisations that call it (see ``codegen.native_code``), and one key is loaded
once per process while anything holds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kdsl.runtime import cache
from kdsl.timings import stage

if TYPE_CHECKING:
    from kdsl.codegen.native_code import LoadedCode

# (object code: one object or several, shared library or None, metadata with its "format")
Build = Callable[[], tuple["bytes | list[bytes]", "bytes | None", dict]]


def load_or_build(key: str, symbols: list[str], build: Build) -> tuple[LoadedCode, dict]:
    """The loaded code of ``key`` (with the addresses of ``symbols``) and its metadata."""
    from kdsl.codegen import native_code

    with stage("cache read"):
        hit = cache.load(key)
    if hit is not None:
        path, meta, data = hit
        try:
            with stage("load"):
                if meta["format"] == "shared":
                    return native_code.load_library(str(path), symbols), meta
                return native_code.load_object(data, symbols), meta
        except (OSError, AttributeError, RuntimeError, KeyError):
            pass  # unloadable: compiled afresh below
    code, library, meta = build()
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

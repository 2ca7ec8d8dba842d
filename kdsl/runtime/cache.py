"""The disk cache of machine code: ``KDSL_CACHE_DIR`` (default ``~/.cache/kdsl``);
``KDSL_CACHE=0`` turns it off.

A key is a hash of everything the code depends on (see ``compiler.cache_key``), so an
entry is never stale: a changed source, constant, argument type, target or kdsl version
gives a new key. Entries are written atomically; an unreadable entry is ignored.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path
from typing import Any


def cache_enabled() -> bool:
    return os.environ.get("KDSL_CACHE", "1") not in ("0", "false", "False", "no", "off")


def cache_dir() -> Path:
    configured = os.environ.get("KDSL_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "kdsl"


def _paths(key: str) -> tuple[Path, Path]:
    directory = cache_dir() / key[:2]
    return directory / f"{key}.bin", directory / f"{key}.meta"


def load(key: str) -> tuple[Path, Any] | None:
    """The path of a cached library or object file, and its metadata; None on a miss."""
    if not cache_enabled():
        return None
    code_path, meta_path = _paths(key)
    try:
        meta = pickle.loads(meta_path.read_bytes())
        size = code_path.stat().st_size
    except Exception:  # noqa: BLE001 - any damaged entry is a miss, rebuilt and rewritten
        return None
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("size") != size:
        return None
    return code_path, meta


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def store(key: str, code: bytes, meta: dict) -> Path | None:
    """Writes code and metadata (metadata last: an entry is complete once it exists)."""
    if not cache_enabled():
        return None
    code_path, meta_path = _paths(key)
    try:
        _atomic_write(code_path, code)
        _atomic_write(meta_path, pickle.dumps(dict(meta, key=key, size=len(code))))
    except OSError:
        return None  # a read-only or full disk only costs a recompile next time
    return code_path

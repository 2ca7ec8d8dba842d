"""The disk cache of machine code: ``KDSL_CACHE_DIR`` (default ``~/.cache/kdsl``);
``KDSL_CACHE=0`` turns it off.

A key is a hash of everything the code depends on (see ``compiler.cache_key``), so an
entry is never stale: a changed source, constant, argument type, target or kdsl version
gives a new key. Entries are written atomically, and every entry is verified before it
is used: the metadata file starts with the SHA-256 of the rest, and the metadata holds
the SHA-256 of the code. A damaged entry (even one whose size did not change) is a miss,
rebuilt and rewritten; it never runs. A cache that cannot be written (a read-only or
full disk) costs only the cache: the code runs from memory, with one warning.
"""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path

from kdsl.digests import sha256
from kdsl.files import unique_file

_DIGEST = sha256().digest_size
_warned: set[str] = set()


def cache_enabled() -> bool:
    return os.environ.get("KDSL_CACHE", "1") not in ("0", "false", "False", "no", "off")


def cache_dir() -> Path:
    configured = os.environ.get("KDSL_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "kdsl"


def _paths(key: str, root: Path | None = None) -> tuple[Path, Path]:
    directory = (root or cache_dir()) / key[:2]
    return directory / f"{key}.bin", directory / f"{key}.meta"


def checksum(data: bytes) -> str:
    return sha256(data).hexdigest()


def load(key: str) -> tuple[Path, dict, bytes] | None:
    """The path of a cached library or object file, its metadata and its bytes, all
    verified against their checksums; None on a miss or a damaged entry."""
    if not cache_enabled():
        return None
    code_path, meta_path = _paths(key)
    try:
        raw = meta_path.read_bytes()
        if len(raw) <= _DIGEST or sha256(raw[_DIGEST:]).digest() != raw[:_DIGEST]:
            return None
        meta = pickle.loads(raw[_DIGEST:])
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        code = code_path.read_bytes()
    except Exception:  # noqa: BLE001 - any damaged entry is a miss, rebuilt and rewritten
        return None
    if meta.get("size") != len(code) or meta.get("sha256") != checksum(code):
        return None
    return code_path, meta, code


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = unique_file(str(path.parent), ".tmp-")
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


def store(key: str, code: bytes, meta: dict, root: Path | None = None) -> Path | None:
    """Writes code and metadata (metadata last: an entry is complete once it exists) in
    the cache directory (``root`` where given: the one a build started with); None where
    the cache is off or cannot be written."""
    if not cache_enabled():
        return None
    code_path, meta_path = _paths(key, root)
    try:
        _atomic_write(code_path, code)
        body = pickle.dumps(dict(meta, key=key, size=len(code), sha256=checksum(code)))
        _atomic_write(meta_path, sha256(body).digest() + body)
    except OSError as error:
        _warn_once(error, root)
        return None  # a read-only or full disk only costs a recompile next time
    return code_path


def _warn_once(error: OSError, root: Path | None = None) -> None:
    directory = str(root or cache_dir())
    if directory in _warned:
        return
    _warned.add(directory)
    warnings.warn(f"kdsl cannot write its compile cache in {directory} ({error.strerror or error}); "
                  "compiled kernels run from memory and are not cached", RuntimeWarning,
                  stacklevel=4)

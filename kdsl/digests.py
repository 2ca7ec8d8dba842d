"""SHA-256 for cache keys and checksums, from Python's own module where it has one: that
imports in a fifth of a millisecond, where ``hashlib`` (OpenSSL) takes about 2.5 ms, a
quarter of a warm-cache first call."""

from __future__ import annotations

try:
    from _sha256 import sha256  # Python 3.11 and earlier
except ImportError:  # pragma: no cover - depends on the Python version
    try:
        from _sha2 import sha256  # type: ignore[no-redef]  # Python 3.12 and later
    except ImportError:
        from hashlib import sha256  # type: ignore[no-redef, assignment]

__all__ = ["sha256"]

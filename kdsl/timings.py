"""``KDSL_TIMINGS=1``: where a specialisation's compile time goes, one line per
specialisation on stderr (dependencies, frontend, passes, codegen, LLVM, linking, the
disk cache and loading)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


def enabled() -> bool:
    return os.environ.get("KDSL_TIMINGS", "0") not in ("0", "", "false", "False", "no", "off")


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Adds the time of the block to ``name`` in the report being made (if any)."""
    stages: dict[str, float] | None = getattr(_local, "stages", None)
    if stages is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        stages[name] = stages.get(name, 0.0) + time.perf_counter() - start


@contextmanager
def compile_report(kernel_name: str) -> Iterator[None]:
    """Prints the stages timed inside the block, when ``KDSL_TIMINGS`` is set."""
    if not enabled() or getattr(_local, "stages", None) is not None:
        yield
        return
    _local.stages, _local.notes = {}, []
    start = time.perf_counter()
    try:
        yield
    finally:
        stages, _local.stages = _local.stages, None
        notes, _local.notes = _local.notes, None
        total = time.perf_counter() - start
        parts = [f"{name} {seconds * 1e3:.1f} ms" for name, seconds in stages.items()]
        other = total - sum(stages.values())
        parts.append(f"other (imports, setup) {max(other, 0.0) * 1e3:.1f} ms")
        remarks = "".join(f"; {n}" for n in notes)
        print(f"kdsl timings: {kernel_name}: {', '.join(parts)}{remarks}; total "
              f"{total * 1e3:.1f} ms", file=sys.stderr)


def note(text: str) -> None:
    """Adds a remark to the report being made on this thread (if any), printed after its
    stages: what other threads did for it meanwhile (their time is no stage of its own)."""
    notes: list[str] | None = getattr(_local, "notes", None)
    if notes is not None:
        notes.append(text)

"""The number of threads parallel loops use: ``kd.set_num_threads`` or KDSL_NUM_THREADS."""

from __future__ import annotations

import ctypes
import numbers
import os

# read by compiled code through the symbol kdsl_num_threads
NUM_THREADS = ctypes.c_int32(0)


def _default() -> int:
    env = os.environ.get("KDSL_NUM_THREADS")
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"KDSL_NUM_THREADS must be a positive integer, got {env!r}") from None
        if value >= 1:
            return value
        raise ValueError(f"KDSL_NUM_THREADS must be a positive integer, got {env!r}")
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def set_num_threads(n: int) -> None:
    """Sets how many threads parallel loops run on (1 runs them serially)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"set_num_threads needs a positive integer, got {n!r}")
    NUM_THREADS.value = int(n)


def get_num_threads() -> int:
    return int(NUM_THREADS.value)


NUM_THREADS.value = _default()

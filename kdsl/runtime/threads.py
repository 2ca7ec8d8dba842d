"""How parallel loops use threads: the count (``kd.set_num_threads`` or KDSL_NUM_THREADS),
the least work worth a team, and serial loops in a child forked after threads started.

Compiled code reads ``SETTINGS`` through the ``requested_threads`` hook at every parallel
loop: ``threads`` is the team size it asks for, ``min_work`` the estimated work (iterations
times the body's cost, see codegen.parallel_cost) below which the loop runs on the calling
thread, where starting a team would cost more than it saves.
"""

from __future__ import annotations

import ctypes
import numbers
import os

# Starting and joining a team costs about 1-2 us on idle cores, and up to a scheduler
# time slice when the cores are shared; a unit of work is about one IR operation
# (0.1-1 ns), so loops with less than about 10 us of work run serially.
DEFAULT_MIN_WORK = 1 << 17


class ParallelSettings(ctypes.Structure):
    """What compiled parallel loops read; the field order is part of the code's ABI."""

    _fields_ = [("threads", ctypes.c_int32), ("reserved", ctypes.c_int32),
                ("min_work", ctypes.c_int64)]


SETTINGS = ParallelSettings(1, 0, DEFAULT_MIN_WORK)
_requested = 1
_in_forked_child = False


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
    global _requested
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"set_num_threads needs a positive integer, got {n!r}")
    _requested = int(n)
    SETTINGS.threads = 1 if _in_forked_child else _requested


def get_num_threads() -> int:
    return _requested


def set_min_parallel_work(work: int) -> int:
    """Sets the estimated work below which a parallel loop runs on the calling thread
    (0: every loop starts a team); returns the previous value."""
    if isinstance(work, bool) or not isinstance(work, numbers.Integral) or work < 0:
        raise ValueError(f"set_min_parallel_work needs a non-negative integer, got {work!r}")
    previous = int(SETTINGS.min_work)
    SETTINGS.min_work = int(work)
    return previous


def run_serially_after_fork() -> None:
    """In a child forked after the OpenMP runtime was loaded: its thread pool did not
    survive the fork (only the forking thread does), and waiting for it would hang, so
    parallel loops run on the calling thread from now on."""
    global _in_forked_child
    _in_forked_child = True
    SETTINGS.threads = 1


set_num_threads(_default())

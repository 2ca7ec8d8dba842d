"""Random numbers in kernels: a counter-based generator (Philox-4x32-10), and its
plain-Python reference.

Every draw is one Philox block, a pure function of a key and a counter of four 32-bit
words, so the numbers do not depend on which thread (or GPU lane) runs an iteration:

- key: the seed of ``kd.seed(seed)`` (64 bits: low word, high word);
- counter word 3: the call number, counting calls of kernels that draw random numbers
  since the last ``kd.seed`` (0 for the first);
- counter word 2: which of the kernel's own parallel loops draws (0 for the first one
  the call runs, 1 for the next, ...; a parallel loop inside a serial loop counts once
  per execution), or 0xFFFFFFFF for serial code outside parallel loops;
- counter word 1: the iteration's index in its parallel loop, counted from 0 in the
  loop's order (row-major over ``kd.ndrange`` axes, whatever the start values), or 0 in
  serial code;
- counter word 0: the draw's number within its iteration (or within the serial code of
  the call), counting every ``kd.random``, ``kd.randn`` and ``kd.randint`` in the order
  the iteration runs them.

Each word is taken modulo 2**32. A call of a func that draws numbers is one draw of its
caller; the first two words of that block key the func's own stream (call number 0).
``kernel.python`` runs the same stream, so a kernel and its plain-Python run give the
same numbers when both start from the same ``kd.seed``.
"""

from __future__ import annotations

import itertools
import math
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import Any

from kdsl.records import dataclass

MASK32 = 0xFFFFFFFF
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUNDS = 10
SERIAL_LOOP = MASK32  # counter word 2 of draws outside parallel loops


def philox4x32(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """Philox-4x32-10 (Salmon et al., SC 2011) of a counter of four 32-bit words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(PHILOX_ROUNDS):
        p0 = PHILOX_M0 * c0
        p1 = PHILOX_M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32)
        k0 = (k0 + PHILOX_W0) & MASK32
        k1 = (k1 + PHILOX_W1) & MASK32
    return c0, c1, c2, c3


def uniform_from_words(a: int, b: int) -> float:
    """A float in [0, 1) from 53 bits of two words."""
    return ((a >> 5) * 67108864 + (b >> 6)) * (1.0 / 9007199254740992.0)


def normal_from_block(block: tuple[int, int, int, int]) -> float:
    """A standard normal number (Box-Muller) from one block."""
    u1 = uniform_from_words(block[0], block[1])
    u2 = uniform_from_words(block[2], block[3])
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


def integer_from_block(block: tuple[int, int, int, int], low: int, high: int) -> int:
    """An integer in [low, high) (``low`` where ``high <= low``) from one block."""
    span = high - low if high > low else 1
    return low + ((block[0] << 32) | block[1]) % span


# --- the seed and the call counter (shared by compiled and plain-Python runs) -----------


@dataclass
class _Seed:
    key: tuple[int, int] = (0, 0)
    calls: Iterator[int] = field(default_factory=itertools.count)


_seed = _Seed()
_seed_lock = threading.Lock()


def seed(value: int) -> None:
    """Seeds the random numbers of kernels (a 64-bit integer) and restarts the call count."""
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise TypeError(f"kd.seed() takes an integer, got {type(value).__name__}")
    value = int(value)
    if not 0 <= value < 2**64:
        raise ValueError(f"kd.seed() takes an integer in [0, 2**64), got {value}")
    global _seed
    with _seed_lock:
        _seed = _Seed((value & MASK32, value >> 32))


def next_call() -> tuple[int, int, int]:
    """The key words and the call number of a new kernel call that draws numbers."""
    current = _seed
    return current.key[0], current.key[1], next(current.calls) & MASK32


# --- plain-Python mode --------------------------------------------------------------------


class CallStream:
    """The counters of one plain-Python run of a kernel."""

    def __init__(self, kernel_code: Any, key_and_call: tuple[int, int, int] | None = None) -> None:
        self.key0, self.key1, self.call = key_and_call or next_call()
        self.kernel_code = kernel_code
        self.loops = 0
        self.loop = SERIAL_LOOP
        self.iteration = 0
        self.draws = 0
        self.in_parallel = False

    def block(self) -> tuple[int, int, int, int]:
        counter = (self.draws & MASK32, self.iteration & MASK32, self.loop, self.call)
        self.draws += 1
        return philox4x32(counter, (self.key0, self.key1))

    def parallel(self, iterations: Iterable[Any]) -> ParallelIterations:
        return ParallelIterations(self, iterations)

    def run_parallel(self, iterations: Iterable[Any]) -> Iterator[Any]:
        """One of the kernel's parallel loops: each iteration draws its own numbers."""
        serial_draws = self.draws
        self.loop, self.loops = self.loops & MASK32, self.loops + 1
        self.in_parallel = True
        try:
            for index, item in enumerate(iterations):
                self.iteration, self.draws = index, 0
                yield item
        finally:
            self.in_parallel = False
            self.loop, self.iteration, self.draws = SERIAL_LOOP, 0, serial_draws


class ParallelIterations:
    """The iterations of a parallel loop in plain-Python mode (``serial`` are the same
    iterations for ``kd.static``, which unrolls the loop: it counts as serial code)."""

    def __init__(self, stream: CallStream, iterations: Iterable[Any]) -> None:
        self.stream = stream
        self.serial = iterations

    def __iter__(self) -> Iterator[Any]:
        return self.stream.run_parallel(self.serial)


_active = threading.local()


def active_stream() -> CallStream | None:
    return getattr(_active, "stream", None)


def run_with_stream(kernel_code: Any, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` as one kernel call with its own random stream."""
    previous = active_stream()
    _active.stream = CallStream(kernel_code)
    try:
        return fn(*args)
    finally:
        _active.stream = previous


def call_drawing_func(fn: Any, args: tuple, kwargs: dict | None = None) -> Any:
    """A func that draws numbers, called in a kernel's plain-Python run: the call is one
    draw of the caller, whose first two words key the func's own stream (call 0)."""
    caller = active_stream()
    if caller is None:
        return fn(*args, **(kwargs or {}))
    block = caller.block()
    _active.stream = CallStream(fn.__code__, (block[0], block[1], 0))
    try:
        return fn(*args, **(kwargs or {}))
    finally:
        _active.stream = caller


def parallel_iterations(iterations: Iterable[Any], depth: int = 2) -> Iterable[Any]:
    """``iterations`` of a ``kd.prange``/``kd.ndrange`` loop in plain-Python mode: those of
    a parallel loop written in the kernel itself advance the random stream's counters."""
    stream = active_stream()
    if stream is None or stream.in_parallel or sys._getframe(depth).f_code is not stream.kernel_code:
        return iterations
    return stream.parallel(iterations)


def _block() -> tuple[int, int, int, int]:
    stream = active_stream()
    if stream is None:  # outside kernels: each draw is a call of its own
        key0, key1, call = next_call()
        return philox4x32((0, 0, SERIAL_LOOP, call), (key0, key1))
    return stream.block()


def random() -> float:
    """A float in [0, 1), uniformly distributed (53 random bits)."""
    block = _block()
    return uniform_from_words(block[0], block[1])


def randn() -> float:
    """A standard normal float (mean 0, variance 1)."""
    return normal_from_block(_block())


def randint(low: int, high: int) -> int:
    """An integer in [low, high), as NumPy's ``randint`` (``low`` when ``high <= low``)."""
    return integer_from_block(_block(), int(low), int(high))

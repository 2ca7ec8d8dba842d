"""The CUDA version of the radix sort (``radix_sort(keys[, values])``): a stable LSD sort,
8 bits a pass, whose offsets come from the device's block scan.

As on the CPU (sort_source.py), the keys less the smallest are sorted, so passes above the
highest bit of the largest difference are not made. Each pass cuts the keys into many
short tiles, one thread each (up to thousands of threads, where the CPU's version has
one block per core): every tile counts its digits into a digit-major table
(``counts[digit * tiles + tile]``), one exclusive block scan of the table
(``device_scan``, kdsl/codegen/device_scan.py) gives each tile its first slot for each
digit, and every tile moves its keys (and values) there in its own order, which keeps
the sort stable. A few keys (up to ``SMALL``) are sorted by insertion in one thread.
"""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.generated import ONE_TRIP, as_func, define, kd_name
from kdsl.primitives.keys import key_func_source, key_type
from kdsl.primitives.sort_source import BUCKETS, DIGIT_BITS, sort_prologue

MIN_TILE = 256  # keys a thread counts and moves: at least 256 (the table of counts has at
MAX_TILE = 4096  # most as many entries as there are keys), at most 4096; 4096 tiles between


def _count_source() -> str:
    return "\n".join([
        "@kd.func",
        "def count(sk, counts, tile, shift, low):",
        "    n = sk.shape[0]",
        f"    tiles = counts.shape[0] // {BUCKETS}",
        "    for c in kd.prange(tiles):",
        f"        for z in range({BUCKETS}):",
        "            counts[z * tiles + c] = 0",
        f"        {ONE_TRIP}",
        "            for m in range(c * tile, min((c + 1) * tile, n)):",
        f"                digit = kd.i64(((key_of(sk[m]) - low) >> shift) & {BUCKETS - 1})",
        "                slot = digit * tiles + c",  # the tile's own counter: no atomics
        "                counts[slot] = counts[slot] + 1",
    ]) + "\n"


def _scatter_source(with_values: bool) -> str:
    params = "sk, sv, dk, dv" if with_values else "sk, dk"
    return "\n".join([
        "@kd.func",
        f"def scatter({params}, starts, tile, shift, low):",
        "    n = sk.shape[0]",
        f"    tiles = starts.shape[0] // {BUCKETS}",
        "    for c in kd.prange(tiles):",
        f"        {ONE_TRIP}",
        "            for m in range(c * tile, min((c + 1) * tile, n)):",
        "                k = sk[m]",
        f"                slot = kd.i64(((key_of(k) - low) >> shift) & {BUCKETS - 1}) * tiles + c",
        "                j = starts[slot]",
        "                starts[slot] = j + 1",
        "                dk[j] = k",
        *(["                dv[j] = sv[m]"] if with_values else []),
    ]) + "\n"


def _sort_source(t: T.ScalarType, values: T.ScalarType | None) -> str:
    with_values = values is not None
    passes = -(-key_type(t).bits // DIGIT_BITS)
    k = kd_name(key_type(t))
    params = "keys, values" if with_values else "keys"
    forward = "keys, values, kb, vb" if with_values else "keys, kb"
    backward = "kb, vb, keys, values" if with_values else "kb, keys"
    buffers = [f"    kb = kd.empty(n, {kd_name(t)})"]
    if values is not None:
        buffers.append(f"    vb = kd.empty(n, {kd_name(values)})")
    copy_back = ["            keys[m] = kb[m]"] + (["            values[m] = vb[m]"] if with_values else [])
    return "\n".join([
        *sort_prologue(params, k, passes, with_values),
        f"    tile = min(max(n // 4096, {MIN_TILE}), {MAX_TILE})",
        "    tiles = (n + tile - 1) // tile",
        f"    counts = kd.empty({BUCKETS} * tiles, kd.i32)",
        f"    starts = kd.empty({BUCKETS} * tiles, kd.i64)",
        *buffers,
        "    in_buffer = False",
        "    for p in range(passes):",
        f"        shift = p * {DIGIT_BITS}",
        "        if in_buffer:",
        "            count(kb, counts, tile, shift, low)",
        "        else:",
        "            count(keys, counts, tile, shift, low)",
        "        device_scan(counts, starts, True)",
        "        if in_buffer:",
        f"            scatter({backward}, starts, tile, shift, low)",
        "        else:",
        f"            scatter({forward}, starts, tile, shift, low)",
        "        in_buffer = not in_buffer",
        "    if in_buffer:",
        "        for m in kd.prange(n):",
        *copy_back,
    ]) + "\n"


@functools.cache
def device_radix_sort_func(t: T.ScalarType, values: T.ScalarType | None) -> Any:
    """The CUDA func ``radix_sort(keys[, values])`` for keys of type ``t``."""
    from kdsl.primitives.device import device_scan

    source = "\n".join([key_func_source(t), _count_source(), _scatter_source(values is not None),
                        _sort_source(t, values)])
    return as_func(define(source, "radix_sort", f"device radix sort {t} {values}",
                          {"device_scan": device_scan}))

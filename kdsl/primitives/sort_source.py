"""A parallel, stable LSD radix sort in the kernel language, 8 bits a pass.

A first parallel pass finds the smallest and largest key: digits above the highest bit
in which they differ are the same in every key, so those passes are not made. Each pass
cuts the array into blocks: the blocks count their digits in parallel, one
serial scan over (digit, block) gives each block its first slot for each digit, and the
blocks scatter in parallel, each in its own order (which keeps the sort stable). A pass
whose digit is the same for every key moves nothing. Keys (and the values that go with
them) move between the arrays and one buffer each; an odd number of passes ends with a
copy back.
"""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.generated import as_func, define, kd_name
from kdsl.primitives.keys import key_func_source, key_type

DIGIT_BITS = 8
BUCKETS = 1 << DIGIT_BITS


def _pass_source(with_values: bool) -> str:
    params = "sk, sv, dk, dv, hist, shift" if with_values else "sk, dk, hist, shift"
    move = ["            dk[j] = k", "            dv[j] = sv[m]"] if with_values else [
        "            dk[j] = k"]
    return "\n".join([
        "@kd.func",
        f"def radix_pass({params}):",
        "    n = sk.shape[0]",
        "    nb = hist.shape[0]",
        "    for b in kd.prange(nb):",
        f"        for z in range({BUCKETS}):",
        "            hist[b, z] = 0",
        "        for i in range(b * n // nb, (b + 1) * n // nb):",
        f"            hist[b, kd.i64((key_of(sk[i]) >> shift) & {BUCKETS - 1})] += 1",
        "    total = 0",
        "    moves = True",
        f"    for d in range({BUCKETS}):",
        "        start = total",
        "        for b in range(nb):",
        "            count = hist[b, d]",
        "            hist[b, d] = total",
        "            total += count",
        "        if total - start == n:",
        "            moves = False",
        "    if moves:",
        "        for c in kd.prange(nb):",
        "            for m in range(c * n // nb, (c + 1) * n // nb):",
        "                k = sk[m]",
        f"                digit = kd.i64((key_of(k) >> shift) & {BUCKETS - 1})",
        "                j = hist[c, digit]",
        "                hist[c, digit] = j + 1",
        *["    " + m for m in move],
        "    return moves",
    ]) + "\n"


def _sort_source(t: T.ScalarType, values: T.ScalarType | None) -> str:
    """``radix_sort(keys[, values])``: sorts 1-D ``keys`` in place (with ``values``)."""
    with_values = values is not None
    passes = -(-key_type(t).bits // DIGIT_BITS)
    params = "keys, values" if with_values else "keys"
    buffers = [f"    kb = kd.empty(n, {kd_name(t)})"]
    if values is not None:
        buffers.append(f"    vb = kd.empty(n, {kd_name(values)})")
    forward = "keys, values, kb, vb" if with_values else "keys, kb"
    backward = "kb, vb, keys, values" if with_values else "kb, keys"
    copy_back = ["            keys[i] = kb[i]"] + (["            values[i] = vb[i]"] if with_values else [])
    k = kd_name(key_type(t))
    return "\n".join([
        "@kd.func",
        f"def radix_sort({params}):",
        "    n = keys.shape[0]",
        "    if n < 2:",
        "        return",
        # digits above the highest bit in which the smallest and largest key differ are
        # the same in every key: those passes are skipped without counting
        f"    low = ~{k}(0)",
        f"    high = {k}(0)",
        "    for i in kd.prange(n):",
        "        key = key_of(keys[i])",
        "        low = min(low, key)",
        "        high = max(high, key)",
        "    varying = low ^ high",
        "    passes = 0",
        f"    for p in range({passes}):",
        f"        if (varying >> (p * {DIGIT_BITS})) != 0:",
        "            passes = p + 1",
        *buffers,
        "    nb = min(max(n // 65536, 1), 64)",
        f"    hist = kd.empty((nb, {BUCKETS}), kd.i64)",
        "    in_buffer = False",
        "    for pass_number in range(passes):",
        f"        shift = pass_number * {DIGIT_BITS}",
        "        if in_buffer:",
        f"            moved = radix_pass({backward}, hist, shift)",
        "        else:",
        f"            moved = radix_pass({forward}, hist, shift)",
        "        if moved:",
        "            in_buffer = not in_buffer",
        "    if in_buffer:",
        "        for i in kd.prange(n):",
        *copy_back,
    ]) + "\n"


@functools.cache
def radix_sort_func(t: T.ScalarType, values: T.ScalarType | None) -> Any:
    """The func ``radix_sort(keys[, values])`` for keys of type ``t``."""
    source = "\n".join([key_func_source(t), _pass_source(values is not None),
                        _sort_source(t, values)])
    return as_func(define(source, "radix_sort", f"radix sort {t} {values}"))


@functools.cache
def float_sort_func(t: T.ScalarType) -> Any:
    """``radix_sort(keys)`` for floats, in place: the keys turned into unsigned integers
    once, sorted as those, and turned back (rather than each pass converting each key)."""
    from kdsl.primitives.keys import invertible_key_sources

    source = invertible_key_sources(t) + "\n" + "\n".join([
        "@kd.func",
        "def radix_sort(keys):",
        "    n = keys.shape[0]",
        f"    ordered = kd.empty(n, {kd_name(key_type(t))})",
        "    for i in kd.prange(n):",
        "        ordered[i] = sort_key(keys[i])",
        "    unsigned_sort(ordered)",
        "    for i in kd.prange(n):",
        "        keys[i] = value_of_key(ordered[i])",
    ]) + "\n"
    return as_func(define(source, "radix_sort", f"float sort {t}",
                          {"unsigned_sort": radix_sort_func(key_type(t), None)}))


def sort_func(t: T.ScalarType) -> Any:
    """The in-place sort of 1-D arrays of ``t``."""
    return float_sort_func(t) if t.is_float else radix_sort_func(t, None)

"""A parallel, stable LSD radix sort in the kernel language, 8 bits a pass.

A first parallel pass finds the smallest and largest key; the passes sort the keys less
the smallest, so digits above the highest bit of the largest difference are zero in every
key and those passes are not made (keys within 2^24 of each other take three passes,
wherever they lie). Each pass
cuts the array into blocks: the blocks count their digits in parallel, one
serial scan over (digit, block) gives each block its first slot for each digit, and the
blocks scatter in parallel, each in its own order (which keeps the sort stable). A pass
whose digit is the same for every key moves nothing. Keys (and the values that go with
them) move between the arrays and one buffer each; an odd number of passes ends with a
copy back. A few keys (up to ``SMALL``) are sorted by insertion instead.
"""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.generated import ONE_TRIP, as_func, define, kd_name
from kdsl.primitives.keys import key_func_source, key_type

DIGIT_BITS = 8
BUCKETS = 1 << DIGIT_BITS
SMALL = 32  # at most this many keys are sorted by insertion


def _count_source() -> str:
    """``count(sk, slots, shift, low)``: each block's counts of the digits of its keys
    less ``low``."""
    return "\n".join([
        "@kd.func",
        "def count(sk, slots, shift, low):",
        "    n = sk.shape[0]",
        "    nb = slots.shape[0]",
        "    for c in kd.prange(nb):",
        f"        for z in range({BUCKETS}):",
        "            slots[c, z] = 0",
        f"        {ONE_TRIP}",
        "            for m in range(c * n // nb, (c + 1) * n // nb):",
        f"                slots[c, kd.i64(((key_of(sk[m]) - low) >> shift) & {BUCKETS - 1})] += 1",
    ]) + "\n"


def _scatter_source(with_values: bool) -> str:
    """``scatter(sk[, sv], dk[, dv], slots, shift, low)``: one pass, each block moving its
    keys (and values) to the slots ``slots[block]`` gives their digits."""
    params = "sk, sv, dk, dv, slots, shift, low" if with_values else "sk, dk, slots, shift, low"
    return "\n".join([
        "@kd.func",
        f"def scatter({params}):",
        "    n = sk.shape[0]",
        "    nb = slots.shape[0]",
        "    for c in kd.prange(nb):",
        f"        {ONE_TRIP}",
        "            for m in range(c * n // nb, (c + 1) * n // nb):",
        "                k = sk[m]",
        f"                digit = kd.i64(((key_of(k) - low) >> shift) & {BUCKETS - 1})",
        "                j = slots[c, digit]",
        "                slots[c, digit] = j + 1",
        "                dk[j] = k",
        *(["                dv[j] = sv[m]"] if with_values else []),
    ]) + "\n"


def sort_prologue(params: str, k: str, passes: int, with_values: bool) -> list[str]:
    """The lines that open ``radix_sort`` on every device: a few keys (up to ``SMALL``)
    sorted by a stable insertion sort, else ``low``, the smallest key, and ``passes``, the
    passes the keys less ``low`` need (digits above the highest bit of the largest
    difference are zero in every key, so those passes are not made). ``k`` names the
    key type, ``passes`` the most passes it can need."""
    insert_value = ["            v = values[i]"] if with_values else []
    shift_value = ["                values[j] = values[j - 1]"] if with_values else []
    place_value = ["            values[j] = v"] if with_values else []
    return [
        "@kd.func",
        f"def radix_sort({params}):",
        "    n = keys.shape[0]",
        f"    if n <= {SMALL}:",
        "        for i in range(1, n):",
        "            x = keys[i]",
        *insert_value,
        "            kx = key_of(x)",
        "            j = i",
        "            while j > 0 and key_of(keys[j - 1]) > kx:",
        "                keys[j] = keys[j - 1]",
        *shift_value,
        "                j -= 1",
        "            keys[j] = x",
        *place_value,
        "        return",
        f"    low = ~{k}(0)",
        f"    high = {k}(0)",
        "    for i in kd.prange(n):",
        "        key = key_of(keys[i])",
        "        low = min(low, key)",
        "        high = max(high, key)",
        "    span = high - low",
        "    passes = 0",
        f"    for p in range({passes}):",
        f"        if (span >> (p * {DIGIT_BITS})) != 0:",
        "            passes = p + 1",
    ]


def _sort_source(t: T.ScalarType, values: T.ScalarType | None) -> str:
    """``radix_sort(keys[, values])``: sorts 1-D ``keys`` in place (with ``values``)."""
    with_values = values is not None
    passes = -(-key_type(t).bits // DIGIT_BITS)
    params = "keys, values" if with_values else "keys"
    k = kd_name(key_type(t))
    buffers = [f"    kb = kd.empty(n, {kd_name(t)})"]
    if values is not None:
        buffers.append(f"    vb = kd.empty(n, {kd_name(values)})")
    forward = "keys, values, kb, vb" if with_values else "keys, kb"
    backward = "kb, vb, keys, values" if with_values else "kb, keys"
    copy_back = ["            keys[m] = kb[m]"] + (["            values[m] = vb[m]"] if with_values else [])
    return "\n".join([
        *sort_prologue(params, k, passes, with_values),
        "    nb = min(max(n // 65536, 1), 64)",
        f"    slots = kd.empty((nb, {BUCKETS}), kd.i64)",
        *buffers,
        "    in_buffer = False",
        "    for p in range(passes):",
        f"        shift = p * {DIGIT_BITS}",
        "        if in_buffer:",
        "            count(kb, slots, shift, low)",
        "        else:",
        "            count(keys, slots, shift, low)",
        # counts to first slots; a digit all keys share moves nothing: no pass is made
        "        total = 0",
        "        moves = True",
        f"        for e in range({BUCKETS}):",
        "            start = total",
        "            for c in range(nb):",
        "                here = slots[c, e]",
        "                slots[c, e] = total",
        "                total += here",
        "            if total - start == n:",
        "                moves = False",
        "        if moves:",
        "            if in_buffer:",
        f"                scatter({backward}, slots, shift, low)",
        "            else:",
        f"                scatter({forward}, slots, shift, low)",
        "            in_buffer = not in_buffer",
        "    if in_buffer:",
        "        for m in kd.prange(n):",
        *copy_back,
    ]) + "\n"


@functools.cache
def radix_sort_func(t: T.ScalarType, values: T.ScalarType | None) -> Any:
    """The func ``radix_sort(keys[, values])`` for keys of type ``t``."""
    from kdsl.primitives.device_sort_source import device_radix_sort_func

    source = "\n".join([key_func_source(t), _count_source(), _scatter_source(values is not None),
                        _sort_source(t, values)])
    func = as_func(define(source, "radix_sort", f"radix sort {t} {values}"))
    func.device_version = device_radix_sort_func(t, values)  # outside parallel loops on CUDA
    return func


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
    """The in-place sort of 1-D arrays of ``t`` (kernels' ``kd.sort``)."""
    return float_sort_func(t) if t.is_float else radix_sort_func(t, None)

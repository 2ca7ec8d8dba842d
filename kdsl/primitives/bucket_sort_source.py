"""The in-place sort of many keys: one parallel pass cuts them into cache-sized buckets,
then each bucket is sorted in cache (``kd.sort`` from Python of large arrays of 32-bit
numbers and int64).

The keys are sorted as order-preserving unsigned keys (keys.py) less the smallest.

1. A parallel pass finds the smallest and largest key; if they are equal there is
   nothing to do.
2. A parallel pass counts the keys in up to 2^15 fine bins over that range, per block.
   Consecutive fine bins are grouped into buckets of about ``TARGET`` keys, so buckets
   have even sizes whatever the keys' distribution (a fine bin holding more than
   ``TARGET`` keys is a bucket of its own, split again below).
3. The blocks scatter their keys (as unsigned keys) to a buffer in bucket order, in
   parallel.
4. Groups of consecutive buckets are sorted in parallel, each bucket by one thread, in
   cache, into its final place in the array: a bucket whose keys lie in a narrow range
   by counting sort (it writes each key as often as it was counted); a few keys by
   insertion; up to ``CACHE`` keys by an LSD radix sort of up to 11 bits a pass (only the
   bits of the bucket's own range; two or three passes go between the buffer and
   the group's scratch, in cache, then one sequential copy writes the array); a
   larger bucket is first split serially by its top 11 bits into sub-buckets that are
   sorted the same way (a stack of segments per group, each segment in the buffer or in
   the array). A segment's keys are known to lie
   between bounds (the edges of the bucket's first and last nonempty fine bins, or of
   the sub-bucket's digit), so no pass looks for its smallest and largest key.

The keys move to the buffer and back once, so the array is read about four times and
written twice, and every pass after the scatter works in cache.
"""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.generated import ONE_TRIP, as_func, define, kd_name
from kdsl.primitives.keys import invertible_key_sources, key_type

TARGET = 1 << 15  # keys per bucket of the parallel split
CACHE = 1 << 16  # at most this many keys are sorted by LSD radix in cache, more are split
RADIX_BITS = 11  # bits per pass of the in-cache sorts
WORK = 1 << 14  # counters per group (counting sort of ranges below this, radix digits)
DENSE = 4  # counting sort when the range is at most this many times the number of keys
EXPAND = 8  # copies of a key the counting sort writes at once
SMALL = 32  # at most this many keys are sorted by insertion
# an index ``& NONNEG`` is provably non-negative: the loops pay no wrap for Python's
# negative indices
NONNEG = (1 << 63) - 1
STACK = 8192  # segments waiting per group
FINE_BITS = 15  # at most 2^15 fine bins
BLOCKS = 8  # blocks of the parallel passes
GROUPS = 16  # groups of buckets sorted in parallel
# The types sorted this way (float64 keys crowd into few buckets by exponent and leave
# sub-buckets of many bits that the LSD radix sort handles better).
TYPES = (T.i32, T.u32, T.f32, T.i64)
# Arrays of at least this many bytes (as large as the last-level cache, where each pass
# of the LSD radix sort has to go to main memory); smaller ones sort faster by LSD radix.
MIN_BYTES = 1 << 25


def _conversion_sources(t: T.ScalarType) -> str:
    """``sort_key(x)`` and ``value_of_key(k)``: the order-preserving key of a ``t`` and
    back, exactly (for floats, NaNs become positive NaNs)."""
    if t.is_float:
        return invertible_key_sources(t)
    k = kd_name(key_type(t))
    v = kd_name(t)
    top = f"({k}(1) << {key_type(t).bits - 1})"
    flip = f" ^ {top}" if t.is_signed else ""
    return "\n".join([
        "@kd.func",
        "def sort_key(x):",
        f"    return {k}(x){flip}",
        "",
        "",
        "@kd.func",
        "def value_of_key(key):",
        f"    return {v}(key{flip})",
    ]) + "\n"


def _lines(*parts: list[str] | str) -> list[str]:
    out: list[str] = []
    for part in parts:
        out.extend([part] if isinstance(part, str) else part)
    return out


def _indent(lines: list[str], spaces: int) -> list[str]:
    return [" " * spaces + line for line in lines]


def _each_key(in_keys: str, body: list[str], first: str = "lo", last: str = "hi") -> list[str]:
    """A loop over the segment setting ``k`` to each key, read from the array when
    ``in_keys`` holds, from the buffer otherwise."""
    return _lines(
        f"if {in_keys}:",
        f"    for q in range({first}, {last}):",
        "        k = sort_key(keys[q])",
        _indent(body, 8),
        "else:",
        f"    for q in range({first}, {last}):",
        "        k = kb[q]",
        _indent(body, 8),
    )


def _count_digits(k: str, bits: int) -> list[str]:
    """Counts the digits of ``d`` (8 spaces in): the first two without a loop (the one
    pass or two passes most segments take), any further ones in a loop."""
    return _indent(_lines(
        "work[g, kd.i64(d & mask)] += 1",
        "work[g, radix_at + kd.i64((d >> second) & mask)] += 1",
        "for p in range(2, passes):",
        f"    work[g, ((p * radix) & {NONNEG}) + kd.i64((d >> ({k}(p * digit) & {k}({bits - 1}))) & mask)] += 1",
    ), 8)


def _segment_source(k: str, bits: int) -> str:
    """``sort_segments(keys, kb, lo, hi, low, high, work, stack_lo, stack_hi, stack_low,
    stack_high, g)``: sorts the keys of ``kb[lo:hi]`` (all within ``low`` to ``high``)
    into ``keys[lo:hi]``, serially, with row ``g`` of the counters and the stack."""
    counting = _lines(
        "for z in range(span + 1):",
        "    work[g, z] = 0",
        _each_key("in_keys", ["work[g, kd.i64(k - low)] += 1"]),
        "p = lo",
        # EXPAND copies of each key are written at once (a count above EXPAND takes a
        # loop); the copies past its count are overwritten by the keys after it
        "for z in range(span + 1):",
        f"    c = work[g, z] & {NONNEG}",
        f"    v = value_of_key(low + {k}(z))",
        f"    if p + {EXPAND} <= hi:",
        f"        for r in range({EXPAND}):",
        "            keys[p + r] = v",
        f"        for r in range({EXPAND}, c):",
        "            keys[p + r] = v",
        "    else:",
        "        for r in range(c):",
        "            keys[p + r] = v",
        "    p += c",
    )
    lsd = _lines(
        f"passes = (width + {RADIX_BITS - 1}) // {RADIX_BITS}",
        "digit = (width + passes - 1) // passes",
        "radix = kd.i64(1) << digit",
        f"mask = {k}(radix - 1)",
        "for z in range(passes * radix):",
        "    work[g, z] = 0",
        # the keys are copied to the other side while counted when an even number of
        # passes from the array (or an odd one from the buffer) would end in the buffer
        "copy = (passes % 2 == 1) == in_keys",
        f"second = {k}(digit) & {k}({bits - 1})",
        f"radix_at = radix & {NONNEG}",
        "if in_keys:",
        "    for q in range(lo, hi):",
        "        k = sort_key(keys[q])",
        "        d = k - low",
        _count_digits(k, bits),
        "        if copy:",
        "            kb[q] = k",
        "else:",
        "    for q in range(lo, hi):",
        "        k = kb[q]",
        "        d = k - low",
        _count_digits(k, bits),
        "        if copy:",
        "            keys[q] = value_of_key(k)",
        "if copy:",
        "    in_keys = not in_keys",
        "for p in range(passes):",
        "    total = lo",
        "    for z in range(p * radix, (p + 1) * radix):",
        "        c = work[g, z]",
        "        work[g, z] = total",
        "        total += c",
        "for p in range(passes):",
        f"    at = (p * radix) & {NONNEG}",
        f"    shift = {k}(p * digit) & {k}({bits - 1})",
        "    if in_keys:",
        "        for q in range(lo, hi):",
        "            k = sort_key(keys[q])",
        "            z = at + kd.i64(((k - low) >> shift) & mask)",
        f"            j = work[g, z] & {NONNEG}",
        "            work[g, z] = j + 1",
        "            kb[j] = k",
        "    else:",
        "        for q in range(lo, hi):",
        "            k = kb[q]",
        "            z = at + kd.i64(((k - low) >> shift) & mask)",
        f"            j = work[g, z] & {NONNEG}",
        "            work[g, z] = j + 1",
        "            keys[j] = value_of_key(k)",
        "    in_keys = not in_keys",
    )
    # two or three passes of a segment that fits the group's scratch: between the scratch
    # and the buffer (whose lines of the segment are in cache), then one sequential copy
    # into the array (scattered writes there would each wait for a line from memory)
    scratch_passes = _lines(
        f"passes = (width + {RADIX_BITS - 1}) // {RADIX_BITS}",
        "digit = (width + passes - 1) // passes",
        "radix = kd.i64(1) << digit",
        f"mask = {k}(radix - 1)",
        f"second = {k}(digit) & {k}({bits - 1})",
        f"third = {k}(2 * digit) & {k}({bits - 1})",
        f"radix_at = radix & {NONNEG}",
        f"radix_at2 = (2 * radix) & {NONNEG}",
        "for z in range(passes * radix):",
        "    work[g, z] = 0",
        _each_key("in_keys", ["d = k - low",
                              "work[g, kd.i64(d & mask)] += 1",
                              "work[g, radix_at + kd.i64((d >> second) & mask)] += 1",
                              "if passes == 3:",
                              "    work[g, radix_at2 + kd.i64((d >> third) & mask)] += 1"]),
        # the first and third passes write the scratch (from 0), the second the buffer
        "for p in range(passes):",
        "    total = lo if p == 1 else kd.i64(0)",
        "    for z in range(p * radix, (p + 1) * radix):",
        "        c = work[g, z]",
        "        work[g, z] = total",
        "        total += c",
        _each_key("in_keys", ["z = kd.i64((k - low) & mask)",
                              f"j = work[g, z] & {NONNEG}",
                              "work[g, z] = j + 1",
                              "scratch[g, j] = k"]),
        "for q in range(m):",
        "    k = scratch[g, q]",
        "    z = radix_at + kd.i64(((k - low) >> second) & mask)",
        f"    j = work[g, z] & {NONNEG}",
        "    work[g, z] = j + 1",
        "    kb[j] = k",
        "if passes == 3:",
        "    for q in range(lo, hi):",
        "        k = kb[q]",
        "        z = radix_at2 + kd.i64(((k - low) >> third) & mask)",
        f"        j = work[g, z] & {NONNEG}",
        "        work[g, z] = j + 1",
        "        scratch[g, j] = k",
        "    for q in range(m):",
        "        keys[lo + q] = value_of_key(scratch[g, q])",
        "else:",
        "    for q in range(lo, hi):",
        "        keys[q] = value_of_key(kb[q])",
    )
    split = _lines(
        f"shift = {k}(width - {RADIX_BITS})",
        f"for z in range({1 << RADIX_BITS}):",
        "    work[g, z] = 0",
        _each_key("in_keys", ["work[g, kd.i64((k - low) >> shift)] += 1"]),
        "total = lo",
        f"for z in range({1 << RADIX_BITS}):",
        "    c = work[g, z]",
        "    work[g, z] = total",
        "    if c > 0:",
        # the sub-bucket lies where the keys are not now, its keys within these bounds
        "        stack_lo[g, sp] = total if in_keys else -1 - total",
        "        stack_hi[g, sp] = total + c",
        f"        sub_low = low + ({k}(z) << shift)",
        "        stack_low[g, sp] = sub_low",
        f"        stack_high[g, sp] = sub_low + min(high - sub_low, ({k}(1) << shift) - 1)",
        "        sp += 1",
        "    total += c",
        "if in_keys:",
        "    for q in range(lo, hi):",
        "        k = sort_key(keys[q])",
        "        z = kd.i64((k - low) >> shift)",
        f"        j = work[g, z] & {NONNEG}",
        "        work[g, z] = j + 1",
        "        kb[j] = k",
        "else:",
        "    for q in range(lo, hi):",
        "        k = kb[q]",
        "        z = kd.i64((k - low) >> shift)",
        f"        j = work[g, z] & {NONNEG}",
        "        work[g, z] = j + 1",
        "        keys[j] = value_of_key(k)",
    )
    small = _lines(
        "if in_keys:",
        "    for q in range(lo, hi):",
        "        kb[q] = sort_key(keys[q])",
        "for i in range(lo + 1, hi):",
        "    x = kb[i]",
        "    j = i",
        "    while j > lo and kb[j - 1] > x:",
        "        kb[j] = kb[j - 1]",
        "        j -= 1",
        "    kb[j] = x",
        "for q in range(lo, hi):",
        "    keys[q] = value_of_key(kb[q])",
    )
    body = _lines(
        "sp -= 1",
        "first = stack_lo[g, sp]",
        "hi = stack_hi[g, sp]",
        "in_keys = first < 0",  # a segment in the array is stored as -1 - lo
        f"lo = (-1 - first if in_keys else first) & {NONNEG}",
        "m = hi - lo",
        f"if m <= {SMALL}:",
        _indent(small, 4),
        "    continue",
        "low = stack_low[g, sp]",
        "high = stack_high[g, sp]",
        "if low == high:",
        "    if not in_keys:",
        "        v = value_of_key(low)",
        "        for q in range(lo, hi):",
        "            keys[q] = v",
        "    continue",
        "span = kd.i64(high - low)" if bits == 32 else "wide = high - low",
        *([] if bits == 32 else [f"span = kd.i64(wide) if wide < {k}({WORK}) else kd.i64({WORK})"]),
        f"if span < {WORK} and span <= {DENSE} * m:",
        _indent(counting, 4),
        "    continue",
        "width = 0",
        f"while width < {bits} and ((high - low) >> {k}(width)) != 0:",
        "    width += 1",
        f"if m <= {CACHE} and width > {RADIX_BITS} and width <= {3 * RADIX_BITS}:",
        _indent(scratch_passes, 4),
        "    continue",
        f"if m <= {CACHE} or width <= {RADIX_BITS} or sp + {1 << RADIX_BITS} > stack_lo.shape[1]:",
        _indent(lsd, 4),
        "    continue",
        split,
    )
    return "\n".join(_lines(
        "@kd.func",
        "def sort_segments(keys, kb, lo0, hi0, low0, high0, work, scratch, stack_lo, stack_hi,",
        "                  stack_low, stack_high, g):",
        "    stack_lo[g, 0] = lo0",
        "    stack_hi[g, 0] = hi0",
        "    stack_low[g, 0] = low0",
        "    stack_high[g, 0] = high0",
        "    sp = 1",
        "    while sp > 0:",
        _indent(body, 8),
    )) + "\n"


def _sort_source(t: T.ScalarType) -> str:
    """``bucket_sort(keys)``: sorts 1-D ``keys`` in place."""
    k = kd_name(key_type(t))
    bits = key_type(t).bits
    return "\n".join(_lines(
        "@kd.func",
        "def bucket_sort(keys):",
        "    n = keys.shape[0]",
        f"    if n <= {SMALL}:",
        "        for i in range(1, n):",
        "            x = keys[i]",
        "            kx = sort_key(x)",
        "            j = i",
        "            while j > 0 and sort_key(keys[j - 1]) > kx:",
        "                keys[j] = keys[j - 1]",
        "                j -= 1",
        "            keys[j] = x",
        "        return",
        f"    low = ~{k}(0)",
        f"    high = {k}(0)",
        "    for i in kd.prange(n):",
        "        key = sort_key(keys[i])",
        "        low = min(low, key)",
        "        high = max(high, key)",
        "    if low == high:",
        "        return",
        "    width = 0",
        f"    while width < {bits} and ((high - low) >> {k}(width)) != 0:",
        "        width += 1",
        "    size_bits = 0",
        "    while (n >> size_bits) != 0:",
        "        size_bits += 1",
        # fine bins: about one per 16 keys, at most 2^15, at most one per key value
        f"    fine_bits = min(min(max(size_bits - 4, 8), {FINE_BITS}), width)",
        f"    shift = {k}(width - fine_bits) & {k}({bits - 1})",
        "    bins = kd.i64((high - low) >> shift) + 1",
        f"    nb = min(max(n // 65536, 1), {BLOCKS})",
        "    fine = kd.empty((nb, bins), kd.i32)",
        "    for c in kd.prange(nb):",
        "        for f in range(bins):",
        "            fine[c, f] = 0",
        f"        {ONE_TRIP}",
        "            for i in range(c * n // nb, (c + 1) * n // nb):",
        f"                fine[c, kd.i64((sort_key(keys[i]) - low) >> (shift & {k}({bits - 1})))] += 1",
        # consecutive fine bins grouped into buckets of about TARGET keys (at most 2^15
        # buckets: a u16 each keeps the table small in cache)
        "    bucket_of = kd.empty(bins, kd.u16)",
        # the bounds of each bucket's keys: its first and last nonempty fine bins
        f"    bucket_low = kd.empty(bins, {k})",
        f"    bucket_high = kd.empty(bins, {k})",
        "    buckets = 0",
        "    held = kd.i64(0)",
        "    for f in range(bins):",
        "        here = kd.i64(0)",
        "        for c in range(nb):",
        "            here += kd.i64(fine[c, f])",
        f"        if held > 0 and held + here > {TARGET}:",
        "            buckets += 1",
        "            held = 0",
        "        bucket_of[f] = kd.u16(buckets)",
        "        if here > 0:",
        f"            edge = low + ({k}(f) << shift)",
        "            if held == 0:",
        "                bucket_low[buckets] = edge",
        f"            bucket_high[buckets] = edge + min(high - edge, ({k}(1) << shift) - 1)",
        "        held += here",
        "    buckets += 1",
        "    slots = kd.empty((nb, buckets), kd.i64)",
        "    for c in kd.prange(nb):",
        "        for e in range(buckets):",
        "            slots[c, e] = 0",
        f"        {ONE_TRIP}",
        "            for f in range(bins):",
        "                slots[c, bucket_of[f]] += kd.i64(fine[c, f])",
        "    starts = kd.empty(buckets + 1, kd.i64)",
        "    total = kd.i64(0)",
        "    for e in range(buckets):",
        "        starts[e] = total",
        "        for c in range(nb):",
        "            here = slots[c, e]",
        "            slots[c, e] = total",
        "            total += here",
        "    starts[buckets] = n",
        f"    kb = kd.empty(n, {k})",
        "    for c in kd.prange(nb):",
        f"        {ONE_TRIP}",
        "            for i in range(c * n // nb, (c + 1) * n // nb):",
        "                key = sort_key(keys[i])",
        f"                to = bucket_of[kd.i64((key - low) >> (shift & {k}({bits - 1})))]",
        f"                slot = slots[c, to] & {NONNEG}",
        "                slots[c, to] = slot + 1",
        "                kb[slot] = key",
        f"    groups = min(buckets, {GROUPS})",
        f"    work = kd.empty((groups, {WORK}), kd.i64)",
        f"    scratch = kd.empty((groups, {CACHE}), {k})",
        f"    stack_lo = kd.empty((groups, {STACK}), kd.i64)",
        f"    stack_hi = kd.empty((groups, {STACK}), kd.i64)",
        f"    stack_low = kd.empty((groups, {STACK}), {k})",
        f"    stack_high = kd.empty((groups, {STACK}), {k})",
        "    for g in kd.prange(groups):",
        "        for e in range(g * buckets // groups, (g + 1) * buckets // groups):",
        "            sort_segments(keys, kb, starts[e], starts[e + 1], bucket_low[e], bucket_high[e],",
        "                          work, scratch, stack_lo, stack_hi, stack_low, stack_high, g)",
    )) + "\n"


@functools.cache
def bucket_sort_func(t: T.ScalarType) -> Any:
    """The func ``bucket_sort(keys)`` for 1-D keys of type ``t`` (one of ``TYPES``)."""
    bits = key_type(t).bits
    source = "\n".join([_conversion_sources(t), _segment_source(kd_name(key_type(t)), bits),
                        _sort_source(t)])
    return as_func(define(source, "bucket_sort", f"bucket sort {t}"))

"""Binary search (NumPy's ``searchsorted``) and sums over runs of equal sorted keys."""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.generated import as_func, define, kd_name
from kdsl.primitives.keys import less_func_source
from kdsl.primitives.scan_source import scan_func


def _search_one_source(side: str) -> str:
    # left: the first i with not a[i] < x; right: the first i with x < a[i]
    test = "less(a[mid], x)" if side == "left" else "not less(x, a[mid])"
    return "\n".join([
        "@kd.func",
        "def search_one(a, x):",
        "    lo = 0",
        "    hi = a.shape[0]",
        "    while lo < hi:",
        "        mid = (lo + hi) // 2",
        f"        if {test}:",
        "            lo = mid + 1",
        "        else:",
        "            hi = mid",
        "    return lo",
    ]) + "\n"


_SEARCH_MANY = """
@kd.func
def search_many(a, v, out):
    for j in kd.prange(v.shape[0]):
        out[j] = search_one(a, v[j])
"""


@functools.cache
def search_funcs(t: T.ScalarType, side: str) -> tuple[Any, Any]:
    """``search_one(a, x) -> i64`` and ``search_many(a, v, out)`` over sorted ``a`` of type
    ``t`` (values converted to ``t`` by the caller)."""
    source = less_func_source(t) + "\n" + _search_one_source(side) + _SEARCH_MANY
    one = define(source, "search_one", f"searchsorted {t} {side}")
    many = define(source, "search_many", f"searchsorted {t} {side}")
    return as_func(one), as_func(many)


def _segment_source(key: T.ScalarType, total: T.ScalarType) -> str:
    k, r = kd_name(key), kd_name(total)
    return f"""
@kd.func
def same(p, q):
    return p == q or (p != p and q != q)


@kd.func
def segment_sum(keys, values):
    n = keys.shape[0]
    heads = kd.empty(n, kd.i64)
    for i in kd.prange(n):
        heads[i] = 1 if i == 0 or not same(keys[i - 1], keys[i]) else 0
    rank = kd.empty(n, kd.i64)
    m = scan(heads, rank)
    starts = kd.empty(m + 1, kd.i64)
    for i in kd.prange(n):
        if heads[i] == 1:
            starts[rank[i]] = i
    starts[m] = n
    unique = kd.empty(m, {k})
    sums = kd.empty(m, {r})
    for s in kd.prange(m):
        unique[s] = keys[starts[s]]
        total = {r}(0)
        for i in range(starts[s], starts[s + 1]):
            total = total + {r}(values[i])
        sums[s] = total
    return unique, sums
"""


@functools.cache
def segment_sum_func(key: T.ScalarType, total: T.ScalarType) -> Any:
    """``segment_sum(keys, values) -> (unique, sums)`` over runs of equal sorted keys."""
    return as_func(define(_segment_source(key, total), "segment_sum", f"segment sum {key} {total}",
                          {"scan": scan_func(T.i64, True)}))

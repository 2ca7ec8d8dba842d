"""The kernels behind the primitives called from Python: each calls one generated func."""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.bucket_sort_source import bucket_sort_func
from kdsl.primitives.generated import as_func, as_kernel, define, kd_name
from kdsl.primitives.keys import key_func_source, key_type
from kdsl.primitives.scan_source import scan_func
from kdsl.primitives.search_source import search_funcs, segment_sum_func
from kdsl.primitives.sort_source import SMALL, radix_sort_func, sort_func


@functools.cache
def scan_kernel(result: T.ScalarType, exclusive: bool) -> Any:
    source = "def run_scan(a, out):\n    scan(a, out)\n"
    return as_kernel(define(source, "run_scan", f"scan kernel {result} {exclusive}",
                            {"scan": scan_func(result, exclusive)}))


@functools.cache
def new_scan_kernel(result: T.ScalarType, exclusive: bool) -> Any:
    """The running sums of a 1-D array as a new array: made by the kernel, so memory
    that an earlier result gave back is reused (a repeated call touches no fresh pages)."""
    source = "\n".join([
        "def run_new_scan(a):",
        f"    out = kd.empty(a.shape[0], {kd_name(result)})",
        "    scan(a, out)",
        "    return out",
    ]) + "\n"
    return as_kernel(define(source, "run_new_scan", f"new scan kernel {result} {exclusive}",
                            {"scan": scan_func(result, exclusive)}))


@functools.cache
def scan_rows_kernel(result: T.ScalarType, exclusive: bool) -> Any:
    """Running sums along the last axis of a 2-D array, its rows in parallel."""
    r = kd_name(result)
    step = (["            out[j, i] = s", "            s = s + v"] if exclusive
            else ["            s = s + v", "            out[j, i] = s"])
    source = "\n".join([
        "def run_scan_rows(a, out):",
        "    for j in kd.prange(a.shape[0]):",
        f"        s = {r}(0)",
        "        for i in range(a.shape[1]):",
        f"            v = {r}(a[j, i])",
        *step,
    ]) + "\n"
    return as_kernel(define(source, "run_scan_rows", f"scan rows kernel {result} {exclusive}"))


@functools.cache
def scan_axis_kernel(ndim: int, axis: int, result: T.ScalarType, exclusive: bool) -> Any:
    """Running sums along ``axis`` of an array of ``ndim`` axes (at most 4), the lines in
    parallel (each scanned by one thread)."""
    from kdsl.frontend.scan_axes import scan_axis_func

    source = "def run_scan_axis(a, out):\n    scan_axis(a, out)\n"
    return as_kernel(define(source, "run_scan_axis",
                            f"scan axis kernel {ndim} {axis} {result} {exclusive}",
                            {"scan_axis": scan_axis_func(ndim, axis, result, exclusive)}))


@functools.cache
def sort_kernel(t: T.ScalarType) -> Any:
    source = "def run_sort(keys):\n    radix_sort(keys)\n"
    return as_kernel(define(source, "run_sort", f"sort kernel {t}",
                            {"radix_sort": sort_func(t)}))


def _rows_source(name: str, params: str, call: str) -> str:
    """A kernel applying ``call`` (of row ``r``) to each row of a 2-D array: short rows
    (sorted by insertion) each by one thread, longer ones one after another, each by the
    whole device (on a CUDA device, the primitive outside a parallel loop)."""
    return "\n".join([
        f"def {name}({params}):",
        f"    if a.shape[1] <= {SMALL}:",
        "        for r in kd.prange(a.shape[0]):",
        f"            {call}",
        "    else:",
        "        for r in range(a.shape[0]):",
        f"            {call}",
    ]) + "\n"


@functools.cache
def sort_rows_kernel(t: T.ScalarType) -> Any:
    """Sorts each row of a 2-D array in place."""
    source = _rows_source("run_sort_rows", "a", "radix_sort(a[r])")
    return as_kernel(define(source, "run_sort_rows", f"sort rows kernel {t}",
                            {"radix_sort": sort_func(t)}))


@functools.cache
def argsort_rows_kernel(t: T.ScalarType) -> Any:
    """The stable order of each row of a 2-D array ``a``, written to ``out``'s rows."""
    source = _rows_source("run_argsort_rows", "a, out", "argsort_into(a[r], out[r])")
    return as_kernel(define(source, "run_argsort_rows", f"argsort rows kernel {t}",
                            {"argsort_into": argsort_func(t)}))


@functools.cache
def take_rows_kernel() -> Any:
    """``buffer[i, :] = values[order[i], :]`` for 2-D ``values`` and ``buffer``."""
    source = "\n".join([
        "def run_take_rows(values, order, buffer):",
        "    for i, j in kd.ndrange(values.shape[0], values.shape[1]):",
        "        buffer[i, j] = values[order[i], j]",
    ]) + "\n"
    return as_kernel(define(source, "run_take_rows", "take rows kernel"))


@functools.cache
def copy_kernel() -> Any:
    """``target[...] = source`` for 2-D arrays of one shape."""
    source = "\n".join([
        "def run_copy(source, target):",
        "    for i, j in kd.ndrange(source.shape[0], source.shape[1]):",
        "        target[i, j] = source[i, j]",
    ]) + "\n"
    return as_kernel(define(source, "run_copy", "copy kernel"))


@functools.cache
def convert_kernel(t: T.ScalarType) -> Any:
    """``target[i] = t(source[i])`` for 1-D arrays of one length (on a CUDA device: a
    change of element type without a trip through the host)."""
    source = "\n".join([
        "def run_convert(source, target):",
        "    for i in kd.prange(source.shape[0]):",
        f"        target[i] = {kd_name(t)}(source[i])",
    ]) + "\n"
    return as_kernel(define(source, "run_convert", f"convert kernel {t}"))


@functools.cache
def bucket_sort_kernel(t: T.ScalarType) -> Any:
    """The in-place sort of a large 1-D array by buckets sorted in cache (bucket_sort_source)."""
    source = "def run_bucket_sort(keys):\n    bucket_sort(keys)\n"
    return as_kernel(define(source, "run_bucket_sort", f"bucket sort kernel {t}",
                            {"bucket_sort": bucket_sort_func(t)}))


@functools.cache
def sort_by_key_kernel(t: T.ScalarType, values: T.ScalarType) -> Any:
    source = "def run_sort_by_key(keys, values):\n    radix_sort(keys, values)\n"
    return as_kernel(define(source, "run_sort_by_key", f"sort by key kernel {t} {values}",
                            {"radix_sort": radix_sort_func(t, values)}))


@functools.cache
def argsort_func(t: T.ScalarType) -> Any:
    """``argsort_into(keys, out)``: the stable order of 1-D ``keys`` written to ``out``."""
    source = "\n".join([
        "def argsort_into(keys, out):",
        "    n = keys.shape[0]",
        f"    ordered = kd.empty(n, {kd_name(key_type(t))})",
        "    for i in kd.prange(n):",
        "        ordered[i] = key_of(keys[i])",
        "        out[i] = i",
        "    radix_sort(ordered, out)",
    ]) + "\n"
    source = key_func_source(t) + "\n" + source
    return as_func(define(source, "argsort_into", f"argsort {t}",
                          {"radix_sort": radix_sort_func(key_type(t), T.i64)}))


@functools.cache
def argsort_kernel(t: T.ScalarType) -> Any:
    source = "def run_argsort(keys, out):\n    argsort_into(keys, out)\n"
    return as_kernel(define(source, "run_argsort", f"argsort kernel {t}",
                            {"argsort_into": argsort_func(t)}))


@functools.cache
def search_kernel(t: T.ScalarType, side: str) -> Any:
    source = "def run_search(a, v, out):\n    search_many(a, v, out)\n"
    return as_kernel(define(source, "run_search", f"searchsorted kernel {t} {side}",
                            {"search_many": search_funcs(t, side)[1]}))


@functools.cache
def segment_sum_kernel(key: T.ScalarType, total: T.ScalarType) -> Any:
    source = "def run_segment_sum(keys, values):\n    return segment_sum(keys, values)\n"
    return as_kernel(define(source, "run_segment_sum", f"segment sum kernel {key} {total}",
                            {"segment_sum": segment_sum_func(key, total)}))

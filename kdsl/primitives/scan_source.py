"""Parallel prefix sums in the kernel language: each block of the array sums itself in
parallel, one serial scan over the block sums gives each block its start, and the blocks
write their running sums in parallel (two reads and one write of the array)."""

from __future__ import annotations

import functools
from typing import Any

from kdsl import types as T
from kdsl.primitives.generated import ONE_TRIP, as_func, define, kd_name


def _scan_source(result: T.ScalarType, exclusive: bool) -> str:
    r = kd_name(result)
    step = (["                out[m] = s", "                s = s + v"] if exclusive
            else ["                s = s + v", "                out[m] = s"])
    return "\n".join([
        "@kd.func",
        "def scan(a, out):",
        "    n = a.shape[0]",
        "    nb = min(max(n // 32768, 1), 256)",
        f"    sums = kd.empty(nb, {r})",
        "    for b in kd.prange(nb):",
        f"        s = {r}(0)",
        f"        {ONE_TRIP}",
        "            for i in range(b * n // nb, (b + 1) * n // nb):",
        f"                s = s + {r}(a[i])",
        "        sums[b] = s",
        f"    total = {r}(0)",
        "    for q in range(nb):",
        "        t = sums[q]",
        "        sums[q] = total",
        "        total = total + t",
        "    for c in kd.prange(nb):",
        "        s = sums[c]",
        f"        {ONE_TRIP}",
        "            for m in range(c * n // nb, (c + 1) * n // nb):",
        f"                v = {r}(a[m])",
        *step,
        "    return total",
    ]) + "\n"


def _device_scan_source(result: T.ScalarType, exclusive: bool) -> str:
    """The CUDA version: the block scan of kdsl/codegen/device_scan.py, then the total."""
    r = kd_name(result)
    last = f"out[n - 1] + {r}(a[n - 1])" if exclusive else "out[n - 1]"
    return "\n".join([
        "@kd.func",
        "def scan(a, out):",
        "    n = a.shape[0]",
        f"    device_scan(a, out, {exclusive})",
        f"    total = {r}(0)",
        "    if n > 0:",
        f"        total = {last}",
        "    return total",
    ]) + "\n"


@functools.cache
def scan_func(result: T.ScalarType, exclusive: bool) -> Any:
    """``scan(a, out) -> total``: the inclusive (or exclusive) running sums of 1-D ``a``
    in type ``result`` written to ``out``; returns the sum of all of ``a``. Called outside
    parallel loops in CUDA code, its device version runs instead (a block scan)."""
    from kdsl.primitives.device import device_scan

    label = f"scan {result} {'exclusive' if exclusive else ''}"
    func = as_func(define(_scan_source(result, exclusive), "scan", label))
    func.device_version = as_func(define(_device_scan_source(result, exclusive), "scan",
                                         f"device {label}", {"device_scan": device_scan}))
    return func

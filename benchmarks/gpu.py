"""kdsl on an NVIDIA GPU against CuPy and PyTorch (where installed), measured in one run,
and against the measured device-to-device copy bandwidth:
``python benchmarks/gpu.py [--quick]``.

Every kdsl result is checked against NumPy on the host before it is timed. Times are the
best of several synchronised repetitions. Ratios are peer time / kdsl time (>= 1.0 means
kdsl is faster); "of copy" is the fraction of the copy bandwidth a streaming kernel
reaches (bytes it must move / time, over the bandwidth of a device-to-device copy).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kernels_kdsl as K  # noqa: E402

import kdsl as kd  # noqa: E402

try:
    import cupy as cp
except ImportError:  # pragma: no cover
    cp = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def best(fn: Callable[[], object], repeat: int, sync: Callable[[], None]) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def sync_all() -> None:
    kd.synchronize()
    if cp is not None:
        cp.cuda.runtime.deviceSynchronize()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


def row(name: str, kdsl_time: float, peers: dict[str, float], note: str = "") -> None:
    ratios = "  ".join(f"vs {k} {v / kdsl_time:6.2f}x" for k, v in peers.items())
    print(f"{name:34s} kdsl {kdsl_time * 1e3:9.3f} ms  {ratios}  {note}", flush=True)


def copy_bandwidth(n: int, repeat: int) -> float:
    from kdsl.runtime.cuda.driver import get_driver

    a = kd.zeros(n, kd.f32, device="cuda")
    b = kd.zeros(n, kd.f32, device="cuda")
    t = best(lambda: get_driver().copy_device(b.ptr, a.ptr, a.nbytes), repeat, sync_all)
    return 2 * a.nbytes / t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else 10
    rng = np.random.default_rng(0)
    from kdsl.runtime.cuda.driver import get_driver

    driver = get_driver()
    print(f"device: {driver.device_name()}, sm_{''.join(map(str, driver.compute_capability()))}")
    n = 1 << (22 if args.quick else 26)
    bandwidth = copy_bandwidth(n, repeat)
    print(f"device-to-device copy: {bandwidth / 1e9:.1f} GB/s")

    # --- saxpy -----------------------------------------------------------------------
    x_h = rng.random(n, dtype=np.float32)
    y_h = rng.random(n, dtype=np.float32)
    x, y, out = (kd.array(v, device="cuda") for v in (x_h, y_h, np.zeros_like(x_h)))
    K.saxpy(np.float32(2.0), x, y, out)
    assert np.allclose(out.numpy(), 2 * x_h + y_h, rtol=1e-6)
    t = best(lambda: K.saxpy(np.float32(2.0), x, y, out), repeat, sync_all)
    peers = {}
    if cp is not None:
        cx, cy = cp.asarray(x_h), cp.asarray(y_h)
        peers["cupy"] = best(lambda: cp.add(cp.multiply(cx, 2.0, dtype=cp.float32), cy), repeat, sync_all)
    if torch is not None:
        tx, ty = torch.from_numpy(x_h).cuda(), torch.from_numpy(y_h).cuda()
        peers["torch"] = best(lambda: torch.add(ty, tx, alpha=2.0), repeat, sync_all)
    row(f"saxpy 2^{n.bit_length() - 1}", t, peers, f"{3 * 4 * n / t / bandwidth:.2f} of copy")

    # --- sum ---------------------------------------------------------------------------
    s = K.total(x)
    assert abs(s - x_h.sum(dtype=np.float64)) <= 1e-3 * abs(x_h.sum())
    t = best(lambda: K.total(x), repeat, sync_all)
    peers = {}
    if cp is not None:
        peers["cupy"] = best(lambda: float(cx.sum()), repeat, sync_all)
    if torch is not None:
        peers["torch"] = best(lambda: float(tx.sum()), repeat, sync_all)
    row(f"sum 2^{n.bit_length() - 1}", t, peers, f"{4 * n / t / bandwidth:.2f} of copy")

    # --- n-body -----------------------------------------------------------------------
    for count in ((4096,) if args.quick else (16384, 65536)):
        pos_h = rng.random((count, 3), dtype=np.float32) * 10
        pos = kd.array(pos_h, kd.vec3, device="cuda")
        acc = kd.zeros(count, kd.vec3, device="cuda")
        K.forces(pos, acc, np.float32(2.5))
        t = best(lambda pos=pos, acc=acc: K.forces(pos, acc, np.float32(2.5)), repeat, sync_all)
        row(f"n-body N={count}", t, {}, f"{count * count / t / 1e9:.1f} Gpair/s")

    # --- Jacobi -----------------------------------------------------------------------
    size = 1024 if args.quick else 4096
    grid_h = rng.random((size, size), dtype=np.float32)
    a, b = kd.array(grid_h, device="cuda"), kd.array(grid_h, device="cuda")
    t = best(lambda: K.jacobi(a, b, 10), repeat, sync_all) / 10
    peers = {}
    if cp is not None:
        ca, cb = cp.asarray(grid_h), cp.asarray(grid_h)

        def cupy_step() -> None:
            cb[1:-1, 1:-1] = 0.25 * (ca[:-2, 1:-1] + ca[2:, 1:-1] + ca[1:-1, :-2] + ca[1:-1, 2:])

        peers["cupy"] = best(cupy_step, repeat, sync_all)
    row(f"Jacobi {size}^2 (per iteration)", t, peers, f"{2 * 4 * size * size / t / bandwidth:.2f} of copy")

    # --- scatter ------------------------------------------------------------------------
    particles = 1 << 20 if args.quick else 10_000_000
    px = kd.array(rng.random(particles, dtype=np.float32), device="cuda")
    py = kd.array(rng.random(particles, dtype=np.float32), device="cuda")
    mass = kd.array(rng.random(particles, dtype=np.float32), device="cuda")
    grid = kd.zeros((256, 256), kd.f32, device="cuda")
    t = best(lambda: K.scatter(px, py, mass, grid), repeat, sync_all)
    row(f"scatter {particles} -> 256^2", t, {})

    primitives(rng, 1 << (20 if args.quick else 24), repeat)

    # --- compile and launch -------------------------------------------------------------
    code = (
        "import time, numpy as np, kdsl as kd, sys; sys.path.insert(0, 'benchmarks');"
        "import kernels_kdsl as K;"
        "p = kd.zeros(64, kd.vec3, device='cuda'); a = kd.zeros(64, kd.vec3, device='cuda');"
        "t = time.perf_counter(); K.forces(p, a, np.float32(2.5)); kd.synchronize();"
        "print((time.perf_counter() - t) * 1e3)"
    )
    cold = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**__import__("os").environ, "KDSL_CACHE": "0"})
    print(f"cold compile of n-body to a loaded module: {cold.stdout.strip() or cold.stderr[-400:]} ms")
    a1, a2, a3 = (kd.zeros(16, kd.f32, device="cuda") for _ in range(3))
    K.trivial_parallel(a1, a2, a3)
    sync_all()
    calls = 2000
    start = time.perf_counter()
    for _ in range(calls):
        K.trivial_parallel(a1, a2, a3)
    sync_all()
    print(f"launch overhead (one prange kernel, 3 arrays): {(time.perf_counter() - start) / calls * 1e6:.1f} us")
    return 0


def primitives(rng: np.random.Generator, n: int, repeat: int) -> None:
    """cumsum (the block scan of warp shuffles), argsort and sort (the radix sort over it)
    of ``n`` keys, each checked against NumPy first."""
    torch_cuda = torch is not None and torch.cuda.is_available()
    ints_h = rng.integers(-1000, 1000, n).astype(np.int32)
    floats_h = rng.standard_normal(n).astype(np.float32)
    for label, keys_h in (("i32", ints_h), ("f32", floats_h)):
        keys = kd.array(keys_h, device="cuda")
        got = kd.cumsum(keys).numpy()
        assert np.allclose(got, np.cumsum(keys_h.astype(np.float64)), rtol=1e-3, atol=1e-2 * np.sqrt(n))
        t = best(lambda keys=keys: kd.cumsum(keys), repeat, sync_all)
        peers = {}
        if cp is not None:
            ck = cp.asarray(keys_h)
            peers["cupy"] = best(lambda ck=ck: cp.cumsum(ck), repeat, sync_all)
        if torch_cuda:
            tk = torch.from_numpy(keys_h).cuda()
            peers["torch"] = best(lambda tk=tk: torch.cumsum(tk, 0), repeat, sync_all)
        row(f"cumsum {label} 2^{n.bit_length() - 1}", t, peers, f"{(4 + 8) * n / t / 1e9:.0f} GB/s")

        assert np.array_equal(kd.argsort(keys).numpy(), np.argsort(keys_h, kind="stable"))
        t = best(lambda keys=keys: kd.argsort(keys), repeat, sync_all)
        peers = {}
        if cp is not None:
            peers["cupy"] = best(lambda ck=ck: cp.argsort(ck), repeat, sync_all)
        if torch_cuda:
            peers["torch"] = best(lambda tk=tk: torch.argsort(tk, stable=True), repeat, sync_all)
        row(f"argsort {label} 2^{n.bit_length() - 1}", t, peers)

        work = kd.array(keys_h, device="cuda")
        kd.sort(work)
        assert np.array_equal(work.numpy(), np.sort(keys_h))
        t = best(lambda work=work, keys=keys: (get_driver_copy(work, keys), kd.sort(work)),
                 repeat, sync_all)
        peers = {}
        if cp is not None:
            peers["cupy"] = best(lambda ck=ck: cp.sort(ck), repeat, sync_all)
        if torch_cuda:
            peers["torch"] = best(lambda tk=tk: torch.sort(tk), repeat, sync_all)
        row(f"sort {label} 2^{n.bit_length() - 1} (copy + in place)", t, peers)


def get_driver_copy(target: Any, source: Any) -> None:
    """``target[:] = source`` on the device (the keys to sort again)."""
    from kdsl.runtime.cuda.driver import get_driver

    get_driver().copy_device(target.ptr, source.ptr, source.nbytes)


if __name__ == "__main__":
    raise SystemExit(main())

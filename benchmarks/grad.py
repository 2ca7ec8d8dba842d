"""Gradients against their forward kernels, in one run: ``python benchmarks/grad.py``.

Rows: the n-body potential energy (N = 4096 f32, ``kd.prange`` over i, serial j) and its
gradient with respect to the positions; the same energy under ``jax.jit(jax.grad(...))``
on the CPU where JAX is installed; the compile time of the gradient against that of the
forward kernel (empty cache directories, in this process). Every gradient is checked
against the others (or a float64 NumPy reference on a subset) before timing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

SOFTENING = 0.01


def energy_source() -> Any:
    import kdsl as kd

    @kd.kernel
    def potential_energy(pos: kd.Array[kd.vec3]) -> kd.f32:
        n = pos.shape[0]
        total = 0.0
        for i in kd.prange(n):
            e = 0.0
            for j in range(n):
                d = pos[i] - pos[j]
                e += 1.0 / kd.sqrt(kd.dot(d, d) + SOFTENING)
            total += e
        return total

    return potential_energy


def best_time(fn: Callable[[], Any], seconds: float = 2.0, repeats: int = 10) -> float:
    fn()
    best = float("inf")
    started = time.perf_counter()
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        if time.perf_counter() - started > seconds:
            break
    return best


def reference_gradient(pos: np.ndarray, rows: int) -> np.ndarray:
    """d energy / d pos for the first ``rows`` particles, in float64 with NumPy."""
    p = pos.astype(np.float64)
    out = np.zeros((rows, 3))
    for i in range(rows):
        d = p[i] - p
        inv3 = (np.einsum("ij,ij->i", d, d) + SOFTENING) ** -1.5
        out[i] = -2.0 * (inv3[:, None] * d).sum(axis=0)  # i appears as i and as j
    return out


def jax_gradient(pos: np.ndarray) -> tuple[Callable[[], Any], np.ndarray] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_platforms", "cpu")

    def energy(p: Any) -> Any:
        d = p[:, None, :] - p[None, :, :]
        return jnp.sum(1.0 / jnp.sqrt(jnp.sum(d * d, axis=-1) + SOFTENING))

    grad = jax.jit(jax.grad(energy))
    x = jnp.asarray(pos)
    result = np.asarray(grad(x))
    return (lambda: grad(x).block_until_ready()), result


def compile_times(n: int) -> tuple[float, float]:
    """Seconds to compile the forward kernel and its gradient, empty caches."""
    import kdsl as kd

    @kd.kernel
    def warm_up(x: kd.Array[kd.f32]) -> kd.f32:  # loads LLVM before anything is timed
        s = 0.0
        for i in kd.prange(x.shape[0]):
            s += x[i]
        return s

    warm_up(np.ones(4, np.float32))
    pos = np.random.default_rng(0).random((n, 3)).astype(np.float32)
    kernel = energy_source()
    t = time.perf_counter()
    kernel(pos)
    forward = time.perf_counter() - t
    g = kd.grad(kernel)
    t = time.perf_counter()
    g(pos)
    return forward, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--quick", action="store_true", help="N = 512, few repeats")
    args = parser.parse_args()
    n = 512 if args.quick else args.n
    os.environ["KDSL_CACHE_DIR"] = tempfile.mkdtemp(prefix="kdsl-grad-bench-")
    import kdsl as kd

    forward_compile, gradient_compile = compile_times(64)
    pos = np.random.default_rng(1).random((n, 3)).astype(np.float32) * 10.0
    kernel = energy_source()
    g = kd.grad(kernel)
    grad_kdsl = g(pos)
    expected = reference_gradient(pos, 16)
    error = np.abs(grad_kdsl[:16] - expected).max() / np.abs(expected).max()
    status = "ok" if error < 1e-3 else f"FAIL (relative error {error:.2e})"
    forward_s = best_time(lambda: kernel(pos))
    gradient_s = best_time(lambda: g(pos))
    print(f"n-body energy, N = {n}, f32, {kd.get_num_threads()} threads  [{status}]")
    print(f"  forward            {forward_s * 1e3:9.2f} ms")
    print(f"  gradient           {gradient_s * 1e3:9.2f} ms   gradient / forward = "
          f"{gradient_s / forward_s:.2f}  (target <= 3)")
    print(f"  kept for the reverse sweep: {g.saved_bytes} bytes")
    jax_run = jax_gradient(pos)
    if jax_run is None:
        print("  jax.jit(jax.grad)  skipped (jax not installed)")
    else:
        run, result = jax_run
        agree = np.abs(result - grad_kdsl).max() / np.abs(result).max()
        jax_s = best_time(run)
        print(f"  jax.jit(jax.grad)  {jax_s * 1e3:9.2f} ms   jax / kdsl gradient = "
              f"{jax_s / gradient_s:.2f}  (agreement {agree:.1e})")
    print(f"compile (cold cache): forward {forward_compile * 1e3:.0f} ms, gradient "
          f"{gradient_compile * 1e3:.0f} ms, ratio {gradient_compile / forward_compile:.2f} "
          "(target <= 2)")
    if status != "ok":
        sys.exit(1)


if __name__ == "__main__":
    main()

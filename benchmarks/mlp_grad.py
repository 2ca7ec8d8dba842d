"""A training step of a 2-layer MLP, forward and backward, in one run:
``python benchmarks/mlp_grad.py`` (``--small`` for a quick check).

loss = mean((tanh(x @ w1 + b1) @ w2 - y) ** 2), batch 4096, width 256, float32; one step
computes the loss and its gradients with respect to w1, b1 and w2. Rows: kdsl
(``kd.value_and_grad`` of the whole-array kernel), PyTorch on the CPU with kdsl's thread
count (``torch.set_num_threads``) where installed, and NumPy with the backward pass
written by hand. The gradients are checked against each other before timing; timings are
interleaved (each round times every row once) and the best of the rounds is reported.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def loss_kernel() -> Any:
    import kdsl as kd

    @kd.kernel
    def mlp_loss(x: kd.Array[kd.f32, 2], w1: kd.Array[kd.f32, 2], b1: kd.Array[kd.f32],
                 w2: kd.Array[kd.f32, 2], y: kd.Array[kd.f32, 2]) -> kd.f32:
        h = kd.tanh(x @ w1 + b1)
        return kd.mean((h @ w2 - y) ** 2)

    return mlp_loss


def numpy_step(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray,
               y: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    h = np.tanh(x @ w1 + b1)
    r = h @ w2 - y
    loss = float(np.mean(r * r))
    d_out = r * np.float32(2.0 / r.size)
    d_w2 = h.T @ d_out
    d_z = (d_out @ w2.T) * (1.0 - h * h)
    return loss, x.T @ d_z, d_z.sum(axis=0), d_w2


def torch_step(torch: Any) -> Callable[..., Any]:
    def step(x: Any, w1: Any, b1: Any, w2: Any, y: Any) -> Any:
        for p in (w1, b1, w2):
            p.grad = None
        loss = torch.mean((torch.tanh(x @ w1 + b1) @ w2 - y) ** 2)
        loss.backward()
        return loss.item(), w1.grad, b1.grad, w2.grad

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true", help="batch 256, width 32")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    import os

    import kdsl as kd

    batch, width = (256, 32) if args.small else (4096, 256)
    rng = np.random.default_rng(0)
    f32 = np.float32
    x = rng.standard_normal((batch, width)).astype(f32)
    y = rng.standard_normal((batch, width)).astype(f32)
    w1 = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(f32)
    b1 = (0.1 * rng.standard_normal(width)).astype(f32)
    w2 = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(f32)
    threads = kd.get_num_threads()

    step = kd.value_and_grad(loss_kernel(), (1, 2, 3))
    started = time.perf_counter()
    value, grads = step(x, w1, b1, w2, y)
    compile_s = time.perf_counter() - started
    reference = numpy_step(x, w1, b1, w2, y)
    assert np.isclose(value, reference[0], rtol=1e-4), (value, reference[0])
    for got, expected in zip(grads, reference[1:]):
        np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-3 * np.abs(expected).max())

    rows: dict[str, Callable[[], Any]] = {
        "kdsl": lambda: step(x, w1, b1, w2, y),
        "numpy (hand-written backward)": lambda: numpy_step(x, w1, b1, w2, y),
    }
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(threads)
        tensors = [torch.from_numpy(a) for a in (x, w1, b1, w2, y)]
        for t in tensors[1:4]:
            t.requires_grad_(True)
        run_torch = torch_step(torch)
        loss, *tgrads = run_torch(*tensors)
        for got, expected in zip(grads, tgrads):
            np.testing.assert_allclose(got, expected.numpy(), rtol=2e-3,
                                       atol=2e-3 * float(expected.abs().max()))
        rows[f"torch (CPU, {threads} threads)"] = lambda: run_torch(*tensors)
    best = {name: float("inf") for name in rows}
    for fn in rows.values():
        fn()
    for _ in range(args.rounds):
        for name, fn in rows.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    flops = 2.0 * batch * width * width * 5  # 2 forward products, 3 backward
    print(f"MLP training step, batch {batch}, width {width}, f32, {threads} threads, "
          f"load average {os.getloadavg()[0]:.1f}; kdsl gradient compiled in {compile_s:.1f} s")
    kdsl_time = best["kdsl"]
    for name, seconds in best.items():
        print(f"  {name:34s} {seconds * 1e3:9.2f} ms  {flops / seconds / 1e9:7.1f} GFLOP/s  "
              f"kdsl / this = {kdsl_time / seconds:5.2f}")


if __name__ == "__main__":
    main()

"""Gradients through ``kd.Tape`` against the forward run, in one process:
``python benchmarks/tape.py`` (``--quick`` for small sizes).

Rows: the n-body potential energy of benchmarks/grad.py (one kernel call recorded, then
``tape.backward``) next to ``kd.grad`` of the same kernel; the gallery's soft-body throw
(gallery/soft_body_throw.py: a Python loop of in-place time steps recorded by the tape)
with its forward run alone, recorded, and the backward pass; the Python cost of one
recorded call and of one call on the way back. Gradients are checked against ``kd.grad``
(n-body) before timing.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from grad import best_time, energy_source  # type: ignore[import-not-found]  # noqa: E402


def tape_row(kernel: Any, pos: np.ndarray, forward_s: float, grad_s: float | None = None) -> None:
    """The energy's gradient through a tape (record the call, then backward)."""
    import kdsl as kd

    x = kd.array(pos, requires_grad=True)

    def through_tape() -> None:
        with kd.Tape() as tape:
            energy = kernel(x)
        tape.backward(energy)
        tape.zero()

    through_tape()
    expected = kd.grad(kernel)(pos)
    with kd.Tape() as tape:
        energy = kernel(x)
    tape.backward(energy)
    error = np.abs(x.grad.numpy() - expected).max() / np.abs(expected).max()
    status = "gradient ok" if error < 1e-5 else f"gradient FAIL (relative error {error:.2e})"
    tape_s = best_time(through_tape)
    ratio = tape_s / forward_s
    line = (f"  through kd.Tape    {tape_s * 1e3:9.2f} ms   tape / forward = "
            f"{ratio:.2f}  (target <= 3: {_verdict(ratio)})  [{status}]")
    if grad_s is not None:
        line += f"; tape / kd.grad = {tape_s / grad_s:.2f}"
    print(line)


def _verdict(ratio: float) -> str:
    return "met" if ratio <= 3 else "MISSED"


def nbody(n: int) -> None:
    import kdsl as kd

    kernel = energy_source()
    pos = np.random.default_rng(1).random((n, 3)).astype(np.float32) * 10.0
    g = kd.grad(kernel)
    g(pos)
    forward_s = best_time(lambda: kernel(pos))
    grad_s = best_time(lambda: g(pos))
    print(f"n-body energy, N = {n}, f32, {kd.get_num_threads()} threads")
    print(f"  forward            {forward_s * 1e3:9.2f} ms")
    print(f"  kd.grad            {grad_s * 1e3:9.2f} ms   gradient / forward = "
          f"{grad_s / forward_s:.2f}")
    tape_row(kernel, pos, forward_s, grad_s)


def load_gallery(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"gallery_{name}", ROOT / "gallery" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _soft_body_phases(side: int, steps: int) -> tuple[Any, Any, Any, list[Any]]:
    """The gallery's soft-body throw as three timed phases: the forward run, the run
    recorded on a tape, and the tape's backward; and the list holding the last recorded
    tape and its loss."""
    import kdsl as kd

    throw = load_gallery("soft_body_throw")
    scene = throw.Scene(side, "cpu")
    dt = throw.FLIGHT_SECONDS / steps
    recorded: list[Any] = []

    def forward() -> None:
        scene.run(steps, dt)

    def record() -> None:
        if recorded:  # done with, as in a training loop: its copies' memory is reused
            recorded[0].reset()
            recorded.clear()
        with kd.Tape() as tape:
            loss, _ = scene.run(steps, dt)
        recorded[:] = [tape, loss]

    def backward() -> None:
        tape, loss = recorded
        tape.backward(loss)
        tape.zero()

    return forward, record, backward, recorded


def soft_body(side: int, steps: int) -> None:
    import kdsl as kd

    forward, record, backward, recorded = _soft_body_phases(side, steps)
    record()
    backward()
    rows = []  # interleaved, best of each
    for _ in range(5):
        rows.append((best_time(forward, 0.5, 2), best_time(record, 0.5, 2),
                     best_time(backward, 0.5, 2)))
    forward_s, record_s, backward_s = (min(r[k] for r in rows) for k in range(3))
    print(f"soft-body throw (gallery), {side * side} masses, {steps} steps, "
          f"{kd.get_num_threads()} threads; the tape keeps {recorded[0].memory_bytes / 1e6:.1f} MB")
    print(f"  forward            {forward_s * 1e3:9.2f} ms")
    print(f"  recorded forward   {record_s * 1e3:9.2f} ms   recorded / forward = "
          f"{record_s / forward_s:.2f}")
    print(f"  backward           {backward_s * 1e3:9.2f} ms   backward / forward = "
          f"{backward_s / forward_s:.2f}; (recorded + backward) / forward = "
          f"{(record_s + backward_s) / forward_s:.2f}  "
          f"(target <= 3: {_verdict((record_s + backward_s) / forward_s)})")


def soft_body_cpu_time(side: int, steps: int) -> None:
    """The soft-body row's three times in CPU time of the process on one thread (best
    of interleaved runs), so that other processes' load does not count."""
    import kdsl as kd

    forward, record, backward, _ = _soft_body_phases(side, steps)
    threads = kd.get_num_threads()
    kd.set_num_threads(1)
    try:
        record()
        backward()
        best = [float("inf")] * 3
        for _ in range(10):
            for k, fn in enumerate((forward, record, backward)):
                started = time.process_time()
                fn()
                best[k] = min(best[k], time.process_time() - started)
    finally:
        kd.set_num_threads(threads)
    forward_s, record_s, backward_s = best
    print(f"  one thread, CPU time: forward {forward_s * 1e3:.2f} ms, recorded "
          f"{record_s * 1e3:.2f} ms, backward {backward_s * 1e3:.2f} ms; (recorded + "
          f"backward) / forward = {(record_s + backward_s) / forward_s:.2f}")


def per_call(steps: int = 300) -> None:
    """The Python cost of a call: the soft-body step on a 3 x 3 body (kernels of well under
    a microsecond), per step, called with kdsl arrays and with NumPy arrays, recorded, and
    its product on the way back. CPU time of the process (one thread), so that other
    processes' load does not count."""
    import kdsl as kd

    throw = load_gallery("soft_body_throw")
    scene = throw.Scene(3, "cpu")
    dt = throw.FLIGHT_SECONDS / steps
    arrays = (scene.x, scene.v, scene.f, scene.neighbours, scene.rest)
    plain = tuple(a.numpy() for a in arrays)
    constants = (throw.STIFFNESS, throw.DAMPING, dt)
    recorded: list[Any] = []

    def with_kd_arrays() -> None:
        for _ in range(steps):
            throw.step(*arrays, *constants)

    def with_numpy_arrays() -> None:
        for _ in range(steps):
            throw.step(*plain, *constants)

    def record() -> None:
        if recorded:
            recorded[0].reset()
            recorded.clear()
        with kd.Tape() as tape:
            throw.set_velocity(scene.v, scene.v0)
            for _ in range(steps):
                throw.step(*arrays, *constants)
            loss = throw.pose_error(scene.x, scene.target)
        recorded[:] = [tape, loss]

    def backward() -> None:
        tape, loss = recorded
        tape.backward(loss)
        tape.zero()

    def cpu_time(fn: Any) -> float:
        best = float("inf")
        for _ in range(20):
            started = time.process_time()
            fn()
            best = min(best, time.process_time() - started)
        return best / steps * 1e6

    threads = kd.get_num_threads()
    kd.set_num_threads(1)
    try:
        for fn in (with_kd_arrays, with_numpy_arrays, record, backward):
            fn()
            fn()
        times = [cpu_time(fn) for fn in (with_kd_arrays, with_numpy_arrays, record, backward)]
    finally:
        kd.set_num_threads(threads)
    print(f"one call, in CPU microseconds (soft-body step, {len(scene.x0)} masses, one thread)")
    print(f"  kdsl arrays {times[0]:6.2f}   NumPy arrays {times[1]:6.2f}   recorded "
          f"{times[2]:6.2f}   backward {times[3]:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--side", type=int, default=32)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    args = parser.parse_args()
    if args.quick:
        args.n, args.side, args.steps = 512, 12, 100
    nbody(args.n)
    soft_body(args.side, args.steps)
    soft_body_cpu_time(args.side, args.steps)
    per_call()


if __name__ == "__main__":
    main()

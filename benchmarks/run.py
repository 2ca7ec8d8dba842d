"""kdsl against NumPy and Numba, measured in one run: ``python benchmarks/run.py [--quick]``.

Prints a table of best-of-N times per call and the speed of kdsl relative to each peer
(``vs numpy`` = numpy time / kdsl time, so >= 1.0 means kdsl is faster). Every kdsl
result is checked against NumPy (and Numba) before it is timed; a mismatch prints a FAIL
line, marks the row, and makes the exit status 1. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# OpenBLAS's idle threads spin for about 0.1 s after each call (its THREAD_TIMEOUT, 2^28
# cycles) before they sleep; kdsl's spin some 25 us. In rows that time the sides in turn
# on a 2-core machine, the spinning thread took a core from whichever side ran next (the
# kdsl matrix products ran at one thread's speed half the time). OpenBLAS is given about
# kdsl's wait (2^16 cycles) before NumPy loads it, unless the user set it.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")

import llvmlite  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402
import workloads  # noqa: E402
import workloads_math  # noqa: E402
from harness import Config, Row, print_table  # noqa: E402

import kdsl as kd  # noqa: E402


@dataclass(frozen=True)
class Workload:
    run: Callable[[workloads.Context], list[Row]]
    description: str


WORKLOADS: dict[str, Workload] = {
    "saxpy": Workload(workloads.saxpy, "out = a*x + y; bandwidth vs copy"),
    "sum": Workload(workloads.reduction, "scalar += reduction in a prange loop"),
    "nbody": Workload(workloads.nbody, "all-pairs Lennard-Jones with kd.vec3 (API.md example)"),
    "jacobi": Workload(workloads.jacobi, "2-D Jacobi, whole time loop in one kernel call"),
    "scatter": Workload(workloads.scatter, "particle-to-grid scatter with atomic +="),
    "call": Workload(workloads.call_overhead, "per-call overhead, three small arrays"),
    "chain": Workload(workloads.chain, "5-op elementwise chain as one tensor statement"),
    "chain4": Workload(workloads_math.transcendental_chain,
                       "exp, sin, tanh, log chain (vectorised math), vs PyTorch too"),
    "stencil": Workload(workloads.jacobi_slices, "2-D Jacobi written with slices (tensor)"),
    "softmax": Workload(workloads.softmax, "row-wise softmax with axis reductions (tensor)"),
    "softmax-rows": Workload(workloads_math.softmax_rows,
                             "softmax into out and returning, vs PyTorch too"),
    "layernorm": Workload(workloads_math.layer_norm_rows,
                          "layer norm into out and returning, vs PyTorch too"),
    "mlp": Workload(workloads.mlp, "2-layer MLP forward, tanh(x @ w1 + b1) @ w2 (tensor)"),
    "matmul": Workload(workloads.matmul, "a @ b vs BLAS and a naive Numba triple loop"),
    "compile": Workload(workloads.compile_time, "import, cold and warm-cache compile"),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="kdsl against NumPy and Numba, measured in one run (see benchmarks/README.md).",
        epilog="workloads:\n" + "\n".join(f"  {k:8} {w.description}" for k, w in WORKLOADS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer repeats")
    parser.add_argument(
        "--only",
        action="append",
        choices=list(WORKLOADS),
        metavar="NAME",
        help="run only this workload (repeatable)",
    )
    parser.add_argument("--threads", type=int, help="threads for kdsl and numba (default: all)")
    return parser.parse_args(argv)


def print_header(config: Config, quick: bool) -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"kdsl {kd.__version__} | numpy {np.__version__} | numba {numba.__version__} | "
        f"llvmlite {llvmlite.__version__} | Python {platform.python_version()}"
    )
    print(
        f"{_cpu_name()}, {os.cpu_count()} logical cores | threads: kdsl "
        f"{kd.get_num_threads()}, numba {numba.get_num_threads()} | load average {load}"
    )
    busy = os.getloadavg()[0]
    if busy > 0.5 * (os.cpu_count() or 1):
        print(
            f"WARNING: the machine is busy (load {busy:.2f} on {os.cpu_count()} cores): "
            "parallel timings will be unreliable"
        )
    print(
        f"mode: {'quick' if quick else 'full'} | best of up to {config.repeats} runs "
        f"after a warm-up | ratio = peer time / kdsl time (>= 1.0: kdsl faster)"
    )


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_workload(name: str, ctx: workloads.Context) -> list[Row]:
    print(f"[{name}] {WORKLOADS[name].description} ...", flush=True)
    try:
        return WORKLOADS[name].run(ctx)
    except Exception as exc:  # report and go on with the other workloads
        traceback.print_exc()
        print(f"FAIL {name}: {type(exc).__name__}: {exc}".splitlines()[0])
        return [Row(name, "", notes=[f"error: {type(exc).__name__}"], ok=False)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        kd.set_num_threads(args.threads)
        numba.set_num_threads(args.threads)
    config = Config.quick() if args.quick else Config.full()
    print_header(config, args.quick)
    ctx = workloads.Context(config)
    started = time.perf_counter()
    rows: list[Row] = []
    for name in args.only or list(WORKLOADS):
        rows.extend(run_workload(name, ctx))
    print()
    print_table(rows)
    copy_bw = ctx.copy_bandwidth_if_measured()
    if copy_bw is not None:
        print(
            f"\ncopy bandwidth (n=2^{config.stream_n.bit_length() - 1} f32, read+write): "
            f"np.copyto {copy_bw.numpy / 1e9:.1f} GB/s, numba prange copy "
            f"{copy_bw.numba / 1e9:.1f} GB/s; the better one is the reference"
        )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"total {time.perf_counter() - started:.0f} s | load average at the end {load}")
    failed = [r.workload for r in rows if not r.ok]
    if failed:
        print("FAIL: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs a random program compiled and as its own Python, and the long bug hunt by hand:
``python tests/cpu/kdsl_random_programs.py 3000 --seed 1`` runs 3000 programs of every
kind, reports every failure with its program and inputs, and a summary; ``--start N``
with a count of N + 1 reruns program N alone; ``--cuda`` also runs each program on the
CUDA device (``KDSL_TEST_CUDA`` chooses a GPU or the emulator)."""

import kdsl_cuda_testing as cuda_testing
import numpy as np
from hypothesis import reject
from kdsl_cpu_util import assert_same, clone, kernel_from_source
from kdsl_random_generator import ProgramGenerator


class InvalidProgram(Exception):
    """The program's own Python fails on these inputs."""


def run_generated(source, inputs, rtol=0.0, atol=0.0):
    """``run_program`` inside a hypothesis test: an invalid program is rejected."""
    try:
        run_program(source, inputs, rtol, atol)
    except InvalidProgram:
        reject()


def run_program(source, inputs, rtol=0.0, atol=0.0, device=False):
    """Runs the program compiled and as Python on the same inputs; ``device``: also on
    the CUDA device (emulated where there is no GPU)."""
    kernel = kernel_from_source(source, prefix="prog")
    xs, ys, ns, ms, a, kk = inputs
    x_dtype = np.float32 if "# x: f32" in source else np.float64
    args = (np.array(xs, x_dtype), np.array(ys), np.array(ns, np.int64), np.array(ms, np.int32),
            a, kk, np.full((len(xs), 4), -1.0), np.full((len(xs), 4), -1, np.int64),
            np.arange(7, dtype=np.int64) * 3 - 9)
    python_args = clone(args)
    device_args = clone(args)
    with np.errstate(all="ignore"):
        try:
            expected = kernel.python(*python_args)
        except OverflowError as exc:  # NumPy 2 refuses a Python int too large for the other
            raise InvalidProgram(exc) from None  # operand: no meaning, not a kdsl bug
    actual = kernel(*args)
    try:
        assert_same(actual, expected, rtol, atol)
        for k in (6, 7, 8):
            assert_same(args[k], python_args[k], rtol, atol, what=("out", "iout", "hist")[k - 6])
        if device:
            cuda_testing.check_on_device(kernel, device_args, expected, python_args, rtol, atol)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- program ---\n{source}") from None


def random_inputs(rng):
    """Inputs drawn as ``program_inputs`` draws them, from a ``random.Random``."""
    size = rng.randint(1, 40)
    xs = [rng.uniform(-100, 100) for _ in range(size)]
    ys = [rng.uniform(-100, 100) for _ in range(size)]
    ns = [rng.randint(-10_000, 10_000) for _ in range(size)]
    ms = [rng.randint(-100_000, 100_000) for _ in range(size)]
    return xs, ys, ns, ms, rng.uniform(-10, 10), rng.randint(-20, 20)


def random_program(seed, number):
    """Program ``number`` of a hunt from ``seed``: (source, inputs, tolerance)."""
    import random

    rng = random.Random(f"{seed}-{number}")
    # exactly rounded programs only: with fast-math, an int() of a float may differ by one
    kind = rng.choice(["int", "exact", "exact"])
    mode = rng.choice([True, False, None, None])
    return ProgramGenerator(rng.randint, kind, mode).program(False), random_inputs(rng), 0.0


def hunt(count, seed=0, start=0, device=False):
    """Runs programs ``start`` to ``count - 1`` of ``seed``; prints each failure (a
    mismatch, or an error of the compiled kernel on a program Python runs) and a summary.
    Returns the number of failures."""
    import collections
    import sys
    import time

    failures = collections.Counter()
    began = time.time()
    for number in range(start, count):
        source, inputs, tolerance = random_program(seed, number)
        try:
            run_program(source, inputs, rtol=tolerance, atol=tolerance, device=device)
        except InvalidProgram:
            failures["(not counted) the program's Python raised OverflowError"] += 0
        except Exception as exc:  # every failure is reported, the hunt goes on
            message = f"{type(exc).__name__}: {exc}"
            headline = message.splitlines()[0][:100]
            failures[headline] += 1
            print(f"=== program {number} (seed {seed}) fails: {headline}\n{message}\n"
                  f"--- inputs ---\n{inputs!r}\n", flush=True)
        if (number + 1) % 100 == 0:
            print(f"... {number + 1 - start} programs, {sum(failures.values())} failures, "
                  f"{time.time() - began:.0f} s", file=sys.stderr, flush=True)
    print(f"{count - start} programs, {sum(failures.values())} failures")
    for headline, times in failures.most_common():
        print(f"{times:6d}  {headline}")
    return sum(failures.values())


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Hunt for kdsl bugs with random kernels "
                                                 "compared against their own Python.")
    parser.add_argument("count", type=int, nargs="?", default=1000, help="programs to run")
    parser.add_argument("--seed", type=int, default=0, help="a different seed, other programs")
    parser.add_argument("--start", type=int, default=0,
                        help="the first program (to reproduce one: --start N with count N + 1)")
    parser.add_argument("--cuda", action="store_true",
                        help="also run each program on the CUDA device (emulated without a GPU)")
    arguments = parser.parse_args()
    raise SystemExit(1 if hunt(arguments.count, arguments.seed, arguments.start, arguments.cuda)
                     else 0)

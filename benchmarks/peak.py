"""Facts for the matrix-product rows: the machine's peak floating-point rate and the
thread count of NumPy's BLAS (OpenBLAS), set to kdsl's so that both use the same cores.

Peak = cores x FMA units per core x vector lanes x 2 (a multiply and an add) x clock:
- cores: the threads kdsl runs on;
- FMA units: 2 per core (every x86 server core since Haswell and Zen 1);
- lanes: 512-bit vectors with AVX-512 (16 f32, 8 f64), 256-bit otherwise; on AMD Zen 4
  (family 25) AVX-512 runs on 256-bit units, so 256-bit lanes are counted there;
- clock: measured, a chain of dependent integer adds and xors (one cycle each on every
  x86 core since the Pentium Pro) timed in CPU time, which includes the turbo clock the
  core actually runs at; /proc/cpuinfo's "cpu MHz" is the nominal clock only.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass
from functools import cache

import kdsl as kd


@kd.kernel
def _dependent_chain(n: kd.i64, seed: kd.i64) -> kd.i64:
    x = seed
    for i in range(n):
        x = (x + i) ^ 12345  # two dependent one-cycle operations per iteration
    return x


@dataclass(frozen=True)
class Peak:
    ghz: float
    fma_units: int
    vector_bits: int

    def gflops(self, cores: int, itemsize: int) -> float:
        lanes = self.vector_bits // (8 * itemsize)
        return cores * self.fma_units * lanes * 2 * self.ghz

    def describe(self, cores: int) -> str:
        return (f"peak = {cores} cores x {self.fma_units} FMA units x {self.vector_bits}-bit "
                f"lanes x 2 x {self.ghz:.2f} GHz (measured)")


def _cpu_flags() -> tuple[set[str], int]:
    flags: set[str] = set()
    family = 0
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("cpu family") and not family:
                    family = int(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    return flags, family


@cache
def peak() -> Peak:
    n = 20_000_000
    _dependent_chain(10, 1)
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        _dependent_chain(n, 3)
        best = min(best, time.process_time() - t0)
    flags, family = _cpu_flags()
    wide = "avx512f" in flags and family != 25
    return Peak(2 * n / best / 1e9, 2, 512 if wide else 256)


def set_blas_threads(n: int) -> bool:
    """Sets the thread count of the OpenBLAS that NumPy loaded; False where none is found."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return False
    names = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
             "openblas_set_num_threads64_", "openblas_set_num_threads")
    for path in paths:
        if not os.path.exists(path):
            continue
        library = ctypes.CDLL(path)
        for name in names:
            setter = getattr(library, name, None)
            if setter is not None:
                setter(ctypes.c_int(n))
                return True
    return False

"""Inputs for the benchmarks (NumPy only, so the compile-time probe can import it cheaply)."""

from __future__ import annotations

import math

import numpy as np

SEED = 20240601
LJ_SPACING = 1.12  # near the Lennard-Jones minimum 2**(1/6): forces stay moderate
LJ_CUTOFF = 2.5


def rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def uniform(n: int, gen: np.random.Generator) -> np.ndarray:
    return gen.random(n, dtype=np.float32)


def normal(shape: tuple[int, ...], gen: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    return (gen.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float32)


def lattice_positions(n: int, jitter: float = 0.05) -> np.ndarray:
    """``n`` particles on a jittered cubic lattice, as an ``(n, 3)`` float32 array."""
    side = math.ceil(round(n ** (1.0 / 3.0), 6))
    axis = np.arange(side, dtype=np.float64) * LJ_SPACING
    grid = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), axis=-1).reshape(-1, 3)[:n]
    noise = rng().uniform(-jitter, jitter, size=grid.shape)
    return np.ascontiguousarray(grid + noise, dtype=np.float32)

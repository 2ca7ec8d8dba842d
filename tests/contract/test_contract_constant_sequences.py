"""Tuples, lists and strings read from globals and closures are compile-time constants
(API.md section 1), as numbers are: binding a new one, or changing a list in place,
recompiles (the kernel kept the values of its first compile), and their values are part
of the disk cache key."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import assert_same, check, module_from_source

import kdsl as kd
from kdsl.frontend.dependencies import scan_dependencies

SOURCE = """
OFFSETS = ((1, 0), (0, 1))
WEIGHTS = [0.5, 0.25]
DIRECTIONS = (kd.vec2(1.0, 0.0), kd.vec2(0.0, 1.0))
SPECIAL = "inf"

@kd.kernel
def stencil(u: kd.Array[kd.f64, 2], out: kd.Array[kd.f64, 2]):
    for i, j in kd.ndrange((1, u.shape[0] - 1), (1, u.shape[1] - 1)):
        s = 0.0
        for di, dj in OFFSETS:
            s += u[i + di, j + dj] - u[i - di, j - dj]
        out[i, j] = s

@kd.func
def weighted(x: kd.f64) -> kd.f64:
    total = 0.0
    for w in kd.static(WEIGHTS):
        total = total * x + w
    return total

@kd.kernel
def polynomial(x: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        x[i] = weighted(x[i])

@kd.kernel
def projections(v: kd.Array[kd.vec2], out: kd.Array[kd.f32, 2]):
    for i in kd.prange(v.shape[0]):
        for k in kd.static(range(len(DIRECTIONS))):
            out[i, k] = kd.dot(v[i], DIRECTIONS[k])

@kd.kernel
def special(out: kd.Array[kd.f64]):
    out[0] = float(SPECIAL)
"""


def test_a_new_global_tuple_recompiles(rng):
    module = module_from_source(SOURCE)
    u = rng.standard_normal((6, 7))
    check(module.stencil, u, np.zeros_like(u))
    module.OFFSETS = ((1, 1), (1, -1), (0, 1))
    check(module.stencil, u, np.zeros_like(u))
    out = np.zeros_like(u)
    module.stencil(u, out)
    i, j = 3, 3
    expected = sum(u[i + di, j + dj] - u[i - di, j - dj] for di, dj in module.OFFSETS)
    assert out[i, j] == expected


def test_a_list_changed_in_place_recompiles_through_a_func(rng):
    module = module_from_source(SOURCE)
    x = rng.uniform(-2.0, 2.0, 9)
    check(module.polynomial, x.copy(), rtol=1e-15)
    module.WEIGHTS[0] = 3.0
    module.WEIGHTS.append(-1.0)
    y = x.copy()
    module.polynomial(y)
    assert_same(y, (3.0 * x + 0.25) * x - 1.0, rtol=1e-15)
    check(module.polynomial, x.copy(), rtol=1e-15)


def test_a_new_tuple_of_vectors_and_a_new_string_recompile(rng):
    module = module_from_source(SOURCE)
    v = rng.standard_normal((5, 2)).astype(np.float32)
    check(module.projections, v, np.zeros((5, 2), np.float32))
    module.DIRECTIONS = (kd.vec2(0.6, 0.8), kd.vec2(-1.0, 0.0))
    out = np.zeros((5, 2), np.float32)
    module.projections(v, out)
    assert_same(out[:, 0], v[:, 0] * np.float32(0.6) + v[:, 1] * np.float32(0.8), rtol=1e-6)
    assert_same(out[:, 1], -v[:, 0])
    out = np.zeros(1)
    module.special(out)
    module.SPECIAL = "-inf"
    module.special(out)
    assert out[0] == -np.inf


def test_an_int_and_a_float_item_are_different_constants():
    module = module_from_source(SOURCE)
    keys = []
    for offsets in (((1, 0),), ((1.0, 0),), ((1, 0),)):
        module.OFFSETS = offsets
        keys.append(scan_dependencies(module.stencil.py_function).key_parts())
    assert keys[0] != keys[1] and keys[0] == keys[2]

"""The all-pairs loop ``for j in range(lo, hi): if j == k: continue``: index-set splitting
runs its body without the guard over ``[lo, k)`` and then ``(k, hi)``, one copy of the body
in a loop over the two pieces (LLVM vectorises it once). The results are the kernel's own
Python function's wherever ``k`` lies: before, inside, after the range, at its ends."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def others_sum(x: kd.Array[kd.i64], lo: kd.i64, hi: kd.i64, shift: kd.i64,
               out: kd.Array[kd.i64]):
    for i in kd.prange(out.shape[0]):
        s = kd.i64(0)
        k = i - shift
        for j in range(lo, hi):
            if j == k:
                continue
            s += x[j] * (j + 3)
        out[i] = s


@kd.kernel
def pair_forces(pos: kd.Array[kd.vec3], acc: kd.Array[kd.vec3]):
    n = pos.shape[0]
    for i in kd.prange(n):
        a = kd.vec3(0.0)
        for j in range(n):
            if j == i:
                continue
            d = pos[i] - pos[j]
            a += d / kd.dot(d, d)
        acc[i] = a


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def test_one_loop_over_the_two_pieces():
    x = np.arange(1, 11, dtype=np.int64)
    out = np.zeros(4, np.int64)
    assert others_sum.ir(x, 0, 10, 2, out, stage="split-excluded-index") == golden("""
        kernel @others_sum(%x: array<i64, 1, C>, %lo: i64, %hi: i64, %shift: i64, %out: array<i64, 1, C>) {
          %0 = array_dim %out {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = constant 1 : i64
          %3 = max %0, %1 : i64
          parallel_for %3 {ndim = 1, reductions = []} (%i: i64) {
            %4 = sub %i, %shift : i64
            %5 = constant 1 : i64
            %6 = max %4, %lo : i64
            %7 = min %6, %hi : i64
            %8 = ge %4, %hi : bool
            %9 = min %4, %hi : i64
            %10 = add %9, %5 : i64
            %11 = max %10, %lo : i64
            %12 = min %11, %hi : i64
            %13 = select %8, %hi, %12 : i64
            %14 = constant 0 : i64
            %15 = constant 2 : i64
            %s = for %14, %15, %5, %1 {unroll = False} : i64 (%piece: i64, %16: i64) {
              %17 = eq %piece, %14 : bool
              %18 = select %17, %lo, %13 : i64
              %19 = select %17, %7, %hi : i64
              %20 = for %18, %19, %2, %16 : i64 (%j: i64, %21: i64) {
                %22 = ne %j, %4 : bool
                %23 = array_dim %x {axis = 0} : i64
                %24 = wrap_index %j, %23 : i64
                %25 = array_load %x, %24 : i64
                %26 = constant 3 : i64
                %27 = add %j, %26 : i64
                %28 = mul %25, %27 : i64
                %29 = add %21, %28 : i64
                yield %29
              }
              yield %20
            }
            array_store %out, %i, %s
            yield
          }
          return
        }
    """)


@pytest.mark.parametrize("lo, hi, shift", [
    (0, 10, 0),  # k = i: inside, at the start
    (0, 10, 2),  # k below the range for the first rows
    (0, 10, -5),  # k at the range's end and beyond it
    (3, 7, 1),  # k before, inside and after a range not starting at 0
    (-4, 6, 3),  # negative indices wrap
    (6, 3, 0),  # an empty range
    (0, 10, -30),  # k beyond the range for every row
])
def test_excluded_index_anywhere(lo, hi, shift):
    x = np.random.default_rng(5).integers(-50, 50, 10, dtype=np.int64)
    out = np.zeros(14, np.int64)
    check(others_sum, x, lo, hi, shift, out)
    expected = [sum(int(x[j]) * (j + 3) for j in range(lo, hi) if j != i - shift)
                for i in range(14)]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("n", [1, 2, 5, 37, 130])
def test_all_pairs_against_numpy(n):
    pos = np.random.default_rng(n).random((n, 3)).astype(np.float32)
    acc = np.zeros_like(pos)
    check(pair_forces, pos, acc, rtol=1e-4, atol=1e-4)
    d = pos[:, None, :] - pos[None, :, :]
    r2 = (d * d).sum(axis=2)
    np.fill_diagonal(r2, 1.0)
    want = (d / r2[:, :, None]).sum(axis=1)
    np.testing.assert_allclose(acc, want, rtol=1e-4, atol=1e-4)


def test_the_body_is_vectorised_once():
    pos = np.random.default_rng(1).random((64, 3)).astype(np.float32)
    text = pair_forces.llvm_ir(pos, np.zeros_like(pos), optimized=True)
    bodies = re.findall(r"^[\w.]*vector\.body\d*:", text, re.MULTILINE)
    assert len(bodies) == 2, bodies  # the vectorised loop and its vectorised epilogue

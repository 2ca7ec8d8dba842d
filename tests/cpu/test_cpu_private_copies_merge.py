"""The private copies of an array a parallel loop scatters into, added into it after the
team: whole vectors first, then the elements left over one by one. Sizes around the
vector width, every element type, two and three threads, against plain Python and NumPy."""

import numpy as np
import pytest
from kdsl_cpu_util import check, with_threads

import kdsl as kd
from kdsl.codegen.parallel_copies import MERGE_VECTOR_BYTES


@kd.kernel
def scatter(idx, w, out):
    for i in kd.prange(idx.shape[0]):
        out[idx[i]] += w[i]


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("bins", [1, 7, 16, 37])
def test_merged_copies_match_numpy(bins, dtype, threads, rng):
    n = 64 * bins + 101  # enough iterations per element for private copies
    idx = rng.integers(0, bins, n)
    w = rng.integers(1, 9, n).astype(dtype)  # integer-valued: exact sums in any order
    out = rng.integers(-5, 5, bins).astype(dtype)
    out[out == 0] = 3
    expected = out.copy()
    np.add.at(expected, idx, w)
    with_threads(threads, check, scatter, idx, w, out)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_merge_adds_whole_vectors(dtype):
    idx = np.zeros(8, np.int64)
    w = np.ones(8, dtype)
    out = np.zeros(4, dtype)
    llvm = scatter.llvm_ir(idx, w, out)
    element, name = ("float", "f32") if dtype == np.float32 else ("double", "f64")
    lanes = MERGE_VECTOR_BYTES // np.dtype(dtype).itemsize
    merge = llvm[llvm.index(f'define internal void @"kdsl.merge_copies.{name}"'):]
    assert f"<{lanes} x {element}>" in merge[:merge.index("\n}")]

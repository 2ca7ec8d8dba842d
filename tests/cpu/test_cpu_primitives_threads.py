"""The primitives' loops over blocks of a large array run on a team of threads: the
compile-time work estimate of each such loop, times the blocks an array of 2^20 keys (2^23
for the sort by buckets) is cut into, reaches the runtime's threshold for a team (a loop
over a few long blocks was taken for one too small for threads and ran on the calling
thread)."""

from __future__ import annotations

import numpy as np
import pytest

from kdsl import types as T
from kdsl.codegen.parallel_cost import body_cost, has_inner_loop
from kdsl.primitives import kernels
from kdsl.runtime.compiler import lower_and_optimize
from kdsl.runtime.threads import DEFAULT_MIN_WORK


def _block_loop_costs(kernel, *args) -> list[int]:
    """The estimated work of one iteration of each parallel loop with an inner loop."""
    module, _ = lower_and_optimize(kernel.py_function, kernel.parameters(args), kernel.options,
                                   None)
    loops = [op for op in module.kernel.walk() if op.name == "parallel_for"]
    return [body_cost(op.regions[0]) for op in loops if has_inner_loop(op.regions[0])]


@pytest.mark.parametrize("make, args, blocks", [
    (lambda: kernels.new_scan_kernel(T.i64, False), (np.zeros(8, np.int32),), (1 << 20) // 32768),
    (lambda: kernels.bucket_sort_kernel(T.f32), (np.zeros(8, np.float32),), 8),
    (lambda: kernels.sort_kernel(T.i32), (np.zeros(8, np.int32),), (1 << 20) // 65536),
    (lambda: kernels.argsort_kernel(T.f32), (np.zeros(8, np.float32), np.zeros(8, np.int64)),
     (1 << 20) // 65536),
], ids=["cumsum", "bucket sort", "radix sort", "argsort"])
def test_block_loops_are_worth_a_team(make, args, blocks):
    costs = _block_loop_costs(make(), *args)
    assert costs, "no loop over blocks found"
    for cost in costs:
        assert cost * blocks >= DEFAULT_MIN_WORK

"""The passes most kernels do not need (differentiation, the lowering of whole-array
statements, debug-mode checks) are imported only by a compile that needs them
(kdsl/ir/passes/pipeline.py), and run where they are needed."""

from __future__ import annotations

import numpy as np

import kdsl as kd
from kdsl.ir.autodiff.tensor_activity import TENSOR_OPS
from kdsl.ir.passes import lower_tensors

LOOP_KERNEL = '''
import kdsl as kd

@kd.kernel
def scale(x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in kd.prange(x.shape[0]):
        out[i] = x[i] * 2.0 + 1.0
'''

CALLER = '''
import sys
import numpy as np
from lazy_pass_kernels import scale

x = np.linspace(-1.0, 1.0, 9, dtype=np.float32)
out = np.zeros_like(x)
scale(x, out)
assert np.allclose(out, x * 2.0 + 1.0)
print(sorted(m for m in ("kdsl.ir.passes.lower_tensors", "kdsl.ir.passes.differentiate",
                         "kdsl.ir.passes.bounds_checks") if m in sys.modules))
'''


def test_a_kernel_of_loops_loads_no_tensor_lowering_differentiation_or_checks(run_python,
                                                                             tmp_path):
    (tmp_path / "lazy_pass_kernels.py").write_text(LOOP_KERNEL)
    result = run_python(CALLER, env={"KDSL_CACHE_DIR": str(tmp_path / "cache")}, path=tmp_path)
    assert result.stdout.split()[-1] == "[]"


def test_the_pipeline_lowers_every_kind_of_whole_array_statement():
    assert set(TENSOR_OPS) == set(lower_tensors._TENSOR_OPS)


@kd.kernel
def stopped_and_lowered(x: kd.Array[kd.f64], out: kd.Array[kd.f64]):
    out[:] = kd.stop_gradient(x) * 3.0 + x


@kd.kernel(debug=True)
def checked(x: kd.Array[kd.f64], out: kd.Array[kd.f64], k: int):
    for i in range(out.shape[0]):
        out[i] = x[i + k]


def test_kernels_that_need_the_lazily_loaded_passes_run_them():
    rng = np.random.default_rng(15)
    x = rng.uniform(-2.0, 2.0, 11)
    out, want = np.zeros_like(x), np.zeros_like(x)
    stopped_and_lowered(x, out)
    stopped_and_lowered.python(x, want)
    np.testing.assert_allclose(out, want, rtol=1e-15)
    grad = kd.grad(lambda_sum)(x)
    np.testing.assert_allclose(grad, np.full_like(x, 1.0))  # d/dx of stop(x) * 3 + x
    short = np.zeros(10)
    checked(x, short, 1)
    np.testing.assert_allclose(short, x[1:])
    try:
        checked(x, np.zeros(11), 1)
    except IndexError as error:
        assert "out of bounds" in str(error)
    else:
        raise AssertionError("the debug-mode bounds check did not fire")


@kd.kernel
def lambda_sum(x: kd.Array[kd.f64]) -> kd.f64:
    return kd.sum(kd.stop_gradient(x) * 3.0 + x)

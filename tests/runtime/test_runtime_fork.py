"""A child forked after parallel loops ran (a multiprocessing Pool started with fork, the
Linux default before Python 3.14) runs its own parallel loops instead of hanging: the
OpenMP runtime's threads do not survive fork(), so the child runs them serially."""

from __future__ import annotations

import textwrap

KERNELS = '''
import numpy as np
import kdsl as kd


@kd.kernel
def total(x):
    s = 0.0
    for i in kd.prange(x.shape[0]):
        s += x[i]
    return s


@kd.kernel
def scale(x, out, a: kd.f64):
    for i in kd.prange(x.shape[0]):
        out[i] = a * x[i]


def in_child(k):
    x = np.arange(1, 20_001, dtype=np.float64) * k
    out = np.zeros_like(x)
    scale(x, out, 0.5)  # compiled in the child: the parent never called it
    kd.set_num_threads(2)  # asking for threads again in the child is harmless
    return float(total(x)), float(x.sum()), bool(np.array_equal(out, 0.5 * x)), kd.get_num_threads()
'''

PARENT = '''
import multiprocessing
import numpy as np
import kdsl as kd
from kdsl.runtime.threads import set_min_parallel_work
import forked_kernels as fk

kd.set_num_threads(2)
set_min_parallel_work(0)  # the parent's loops start a team of threads, however small
x = np.arange(1, 20_001, dtype=np.float64)
assert fk.total(x) == x.sum()
with multiprocessing.get_context("fork").Pool(2) as pool:
    results = pool.map_async(fk.in_child, [1, 2, 3]).get(timeout=60)  # not forever
for result in results:
    print(*result)
assert fk.total(x) == x.sum()  # the parent's threads still work
print("parent ok")
'''


def test_fork_pool_children_run_parallel_loops(run_python, tmp_path):
    (tmp_path / "forked_kernels.py").write_text(textwrap.dedent(KERNELS))
    result = run_python(PARENT, path=tmp_path, env={"KDSL_CACHE_DIR": str(tmp_path / "cache")})
    lines = result.stdout.splitlines()
    assert lines[-1] == "parent ok"
    assert len(lines) == 4
    for line in lines[:3]:
        parallel_sum, numpy_sum, scaled_ok, threads = line.split()
        assert float(parallel_sum) == float(numpy_sum) > 0
        assert scaled_ok == "True"
        assert threads == "2"  # the count asked for is kept; the loops run serially


def test_the_openmp_wait_policy_does_not_leak_into_the_environment(run_python, tmp_path):
    code = (
        "import os, numpy as np, kdsl as kd\n"
        "from forked_kernels import total\n"
        "print(total(np.ones(100_000)))\n"
        "print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))\n"
    )
    (tmp_path / "forked_kernels.py").write_text(textwrap.dedent(KERNELS))
    env = {"KDSL_CACHE_DIR": str(tmp_path / "cache")}
    assert run_python(code, env=env, path=tmp_path).stdout.split() == ["100000.0", "None", "None"]
    env["OMP_WAIT_POLICY"] = "active"  # a setting of the user's is left alone
    out = run_python(code, env=env, path=tmp_path).stdout.split()
    assert out == ["100000.0", "None", "active"]


def test_a_libgomp_loaded_by_another_library_gets_a_private_copy(run_python, tmp_path):
    """libgomp loaded first by another library (Numba's OpenMP layer) reads its default
    wait policy (threads spin for milliseconds): kdsl's parallel loops run on a copy of
    their own, with the short spin, unless the user chose a policy for every runtime."""
    code = (
        "import ctypes, os, numpy as np\n"
        "ctypes.CDLL('libgomp.so.1')\n"
        "import kdsl as kd\n"
        "from kdsl.runtime.threads import set_min_parallel_work\n"
        "from forked_kernels import total\n"
        "set_min_parallel_work(0)\n"
        "kd.set_num_threads(2)\n"
        "print(total(np.ones(100_000)))\n"
        "maps = open('/proc/self/maps').read()\n"
        "print('kdsl-libgomp-' in maps, os.environ.get('GOMP_SPINCOUNT'))\n"
    )
    (tmp_path / "forked_kernels.py").write_text(textwrap.dedent(KERNELS))
    env = {"KDSL_CACHE_DIR": str(tmp_path / "cache")}
    if run_python("import ctypes; ctypes.CDLL('libgomp.so.1')", env=env, check=False).returncode:
        return  # no libgomp here: loops run serially, nothing to copy
    assert run_python(code, env=env, path=tmp_path).stdout.split() == ["100000.0", "True", "None"]
    env["OMP_WAIT_POLICY"] = "passive"  # a setting of the user's: the shared runtime
    assert run_python(code, env=env, path=tmp_path).stdout.split() == ["100000.0", "False", "None"]
    del env["OMP_WAIT_POLICY"]
    # kdsl imported first loads libgomp then, with its policy: the other library shares it
    kdsl_first = code.replace("ctypes.CDLL('libgomp.so.1')\nimport kdsl as kd\n",
                              "import kdsl as kd\nctypes.CDLL('libgomp.so.1')\n")
    assert kdsl_first != code
    out = run_python(kdsl_first, env=env, path=tmp_path).stdout.split()
    assert out == ["100000.0", "False", "None"]

"""Arrays indexed by integer vectors (``grid[base + offset]`` with an ivec2) and
components of array elements assigned in place (``grid_v[i, j].y -= g``, ``v[i].x = 0``,
``v[i][0] = 1``). Each kernel runs compiled, as plain Python and on the emulated CUDA
device (through ``check``)."""

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source, nonzero_floats, with_threads

import kdsl as kd

F32 = dict(rtol=2e-5, atol=2e-5)


@kd.kernel
def particle_to_grid(x: kd.Array[kd.vec2], v: kd.Array[kd.vec2], grid_m: kd.Array[kd.f32, 2],
                     grid_v: kd.Array[kd.vec2, 2], inv_dx: kd.f32):
    """The scatter of MLS-MPM, as Taichi programs write it."""
    for p in kd.prange(x.shape[0]):
        base = kd.ivec2(x[p] * inv_dx - 0.5)
        fx = x[p] * inv_dx - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
        for i, j in kd.static(kd.ndrange(3, 3)):
            offset = kd.ivec2(i, j)
            weight = w[i].x * w[j].y
            grid_v[base + offset] += weight * v[p]
            grid_m[base + offset] += weight


@kd.kernel
def grid_update(grid_m: kd.Array[kd.f32, 2], grid_v: kd.Array[kd.vec2, 2], g: kd.f32):
    for i, j in kd.ndrange(grid_m.shape[0], grid_m.shape[1]):
        if grid_m[i, j] > 0:
            grid_v[i, j] = grid_v[i, j] / grid_m[i, j]
            grid_v[i, j].y -= g
        if i < 2:
            grid_v[i, j].x = 0
        if j > grid_m.shape[1] - 3:
            grid_v[i, j][1] = kd.min(grid_v[i, j][1], 0.0)


def test_mpm_scatter_and_grid_update(rng):
    n, cells = 64, 12
    x = rng.uniform(0.2, 0.8, (n, 2)).astype(np.float32)
    v = nonzero_floats(rng, (n, 2))
    grid_m, grid_v = np.zeros((cells, cells), np.float32), np.zeros((cells, cells, 2), np.float32)
    check(particle_to_grid, x, v, grid_m, grid_v, np.float32(cells - 2), **F32)
    assert grid_m.sum() == pytest.approx(n, rel=1e-4)  # quadratic weights sum to one
    check(grid_update, grid_m, grid_v, np.float32(9.8), **F32)
    assert (grid_v[:2, :, 0] == 0).all() and (grid_v[:, -2:, 1] <= 0).all()


@kd.kernel
def component_stores(v: kd.Array[kd.vec3], m: kd.Array[kd.mat22], idx: kd.Array[kd.ivec2],
                     grid: kd.Array[kd.f32, 2], out: kd.Array[kd.f32]):
    for i in range(v.shape[0]):
        v[i].x = 0
        v[i][2] = v[i][1] * 2.0
        v[i].y += 0.5
        c = i % 3
        v[i][c] -= 1.0                     # a run-time component index
        m[i][1, 0] = 7.0
        m[i][0, 1] *= 3.0
        out[i] = grid[idx[i]] + grid[idx[i].y, idx[i].x] + grid[idx[i] + kd.ivec2(1, 0)]
        grid[idx[i]] = -1.0


def test_component_stores_and_vector_indices_serial(rng):
    n = 20
    v, m = nonzero_floats(rng, (n, 3)), nonzero_floats(rng, (n, 2, 2))
    idx = rng.integers(0, 5, (n, 2)).astype(np.int32)
    grid, out = nonzero_floats(rng, (6, 6)), np.zeros(n, np.float32)
    v0, m0, grid0 = v.copy(), m.copy(), grid.copy()
    check(component_stores, v, m, idx, grid, out)
    expected = v0.copy()
    expected[:, 0] = 0
    expected[:, 2] = v0[:, 1] * 2
    expected[:, 1] += 0.5
    expected[np.arange(n), np.arange(n) % 3] -= 1
    np.testing.assert_array_equal(v, expected)
    assert (m[:, 1, 0] == 7).all() and np.array_equal(m[:, 0, 1], m0[:, 0, 1] * 3)
    assert (grid[idx[:, 0], idx[:, 1]] == -1).all() and grid0[0, 0] != 0


@kd.kernel
def shared_component_updates(targets: kd.Array[kd.i64], delta: kd.Array[kd.f32],
                             acc: kd.Array[kd.vec2], counts: kd.Array[kd.ivec2]):
    for k in kd.prange(targets.shape[0]):
        acc[targets[k]].y += delta[k]      # several iterations update one element: atomic
        acc[targets[k]].x -= 1.0
        counts[targets[k]][1] += 1


def test_component_updates_in_parallel_loops_are_atomic(rng):
    n = 4000
    targets = rng.integers(0, 7, n).astype(np.int64)
    delta = rng.integers(-3, 4, n).astype(np.float32)  # exact sums in any order
    acc, counts = np.zeros((7, 2), np.float32), np.zeros((7, 2), np.int32)
    with_threads(2, check, shared_component_updates, targets, delta, acc, counts)
    np.testing.assert_array_equal(acc[:, 1], np.bincount(targets, delta, 7))
    np.testing.assert_array_equal(counts[:, 1], np.bincount(targets, minlength=7))
    assert "atomic_rmw" in shared_component_updates.ir(targets, delta, acc, counts)


@kd.func
def clear_first(v: kd.Array[kd.vec2], i: kd.i64):
    v[i].x = 0.0


@kd.kernel
def through_a_func(v: kd.Array[kd.vec2]):
    for i in range(v.shape[0]):
        clear_first(v, i)


def test_component_store_in_a_func_also_in_plain_python(rng):
    v = nonzero_floats(rng, (5, 2))
    check(through_a_func, v)
    assert (v[:, 0] == 0).all() and (v[:, 1] != 0).all()


def test_local_vector_stays_a_copy_in_plain_python(rng):
    k = kernel_from_source('''
        @kd.kernel
        def k(v: kd.Array[kd.vec2], out: kd.Array[kd.vec2]):
            for i in range(v.shape[0]):
                a = v[i]
                a.x = 5.0
                out[i] = a
    ''')
    v = nonzero_floats(rng, (4, 2))
    v0, out = v.copy(), np.zeros((4, 2), np.float32)
    check(k, v, out)
    np.testing.assert_array_equal(v, v0)
    assert (out[:, 0] == 5).all()


def test_vector_index_with_wrong_count_is_a_located_error():
    k = kernel_from_source('''
        @kd.kernel
        def k(grid: kd.Array[kd.f32, 2], out: kd.Array[kd.f32]):
            out[0] = grid[kd.ivec3(0, 0, 0)]
    ''')
    with pytest.raises(kd.CompileError, match="this array has 2 axes; the index gives 3"):
        k(np.zeros((2, 2), np.float32), np.zeros(1, np.float32))
    k2 = kernel_from_source('''
        @kd.kernel
        def k(v: kd.Array[kd.vec2]):
            v[0].z = 1.0
    ''')
    with pytest.raises(kd.CompileError, match="no such component|has no component"):
        k2(np.zeros((2, 2), np.float32))


@kd.kernel
def mixed_vector_and_integer_indices(vol: kd.Array[kd.f32, 3], cells: kd.Array[kd.ivec2],
                                     out: kd.Array[kd.f32]):
    for k in kd.prange(cells.shape[0]):
        p = cells[k]
        out[k] = vol[p, 1] + vol[0, p] * 2.0
        vol[p, 0] = out[k]


def test_vector_and_integer_indices_mix(rng):
    vol = nonzero_floats(rng, (4, 4, 4))
    cells = np.array([[0, 1], [2, 3], [3, 3]], np.int32)  # distinct: no write races
    out = np.zeros(3, np.float32)
    check(mixed_vector_and_integer_indices, vol, cells, out)
    np.testing.assert_array_equal(vol[cells[:, 0], cells[:, 1], 0], out)


@kd.kernel
def atomics_at_vector_indices(cells: kd.Array[kd.ivec2], grid: kd.Array[kd.f32, 2],
                              grid_v: kd.Array[kd.vec2, 2]):
    for k in kd.prange(cells.shape[0]):
        kd.atomic_add(grid, cells[k], 1.0)
        kd.atomic_add(grid_v, cells[k] + kd.ivec2(1, 1), kd.vec2(1.0, 2.0))


def test_atomics_at_vector_indices(rng):
    cells = rng.integers(0, 4, (300, 2)).astype(np.int32)
    grid, grid_v = np.zeros((5, 5), np.float32), np.zeros((5, 5, 2), np.float32)
    with_threads(2, check, atomics_at_vector_indices, cells, grid, grid_v)
    expected = np.zeros((5, 5))
    np.add.at(expected, (cells[:, 0], cells[:, 1]), 1)
    np.testing.assert_array_equal(grid, expected)
    np.testing.assert_array_equal(grid_v[1:, 1:, 1], 2 * expected[:4, :4])


def test_plain_python_leaves_integer_loop_subscripts_alone():
    import ast

    from kdsl.runtime.python_rewrite import integer_loop_variables

    tree = ast.parse(
        "def k(a, n, out):\n"
        "    for i in kd.prange(n):\n"
        "        out[i] = a[i]\n"
        "    for j, m in kd.ndrange(n, n):\n"
        "        j = kd.ivec2(j, m)\n"            # rebound: may hold a vector
        "    for k in kd.static(range(2)):\n"     # unrolled: may iterate vectors
        "        out[k] = 0\n"
    ).body[0]
    assert isinstance(tree, ast.FunctionDef)
    assert integer_loop_variables(tree) == {"i", "m"}

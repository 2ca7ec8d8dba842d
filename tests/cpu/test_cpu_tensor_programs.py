"""Tensor expressions (API.md section 7) in whole programs: temporaries (kd.zeros, ...),
kernels returning new arrays, tensor statements in serial loops (a whole time loop in one
call) and next to hand-written parallel loops (which they may fuse with), and the IR:
elementwise chains and their reductions need no temporary array, a value used twice is
materialised once."""

import re

import numpy as np
import pytest
from kdsl_cpu_util import assert_same, kernel_from_source, nonzero_floats, positive_floats
from kdsl_tensor_util import against_numpy

import kdsl as kd

# --- temporaries -----------------------------------------------------------------------


@kd.kernel
def temporaries(a, n: kd.i64):
    z = kd.zeros(n)
    o = kd.ones((n, 2), kd.f64)
    f = kd.full(n, 3.5, kd.i32)
    e = kd.empty(n, kd.f64)
    e[:] = a[:n] * 2.0
    d = np.zeros(n)
    zl = kd.zeros_like(o)
    zl[:, 0] = z + f
    zl[:, 1] = e - o[:, 1]
    return z, o, f, d, zl, e + 1.0


def _temporaries(a, n):
    z, o, f = np.zeros(n, np.float32), np.ones((n, 2)), np.full(n, 3.5, np.int32)
    e = a[:n] * 2.0
    zl = np.zeros_like(o)
    zl[:, 0] = z + f
    zl[:, 1] = e - o[:, 1]
    return z, o, f, np.zeros(n), zl, e + 1.0


def test_temporaries(rng):
    a = nonzero_floats(rng, 9, np.float64)
    against_numpy(temporaries, (a, 5), _temporaries, python=False)


@kd.kernel
def empty_results(a, n: kd.i64):
    return kd.zeros(n), kd.ones((n, 2), kd.f64), kd.sum(a[n:n, n:n], axis=0), a[n:n] * 2.0


def test_empty_returned_arrays_keep_their_dtype():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    z, o, s, t = empty_results(a, 0)
    assert (z.dtype, z.shape) == (np.float32, (0,))
    assert (o.dtype, o.shape) == (np.float64, (0, 2))
    assert (s.dtype, s.shape) == (np.int64, (0,))
    assert (t.dtype, t.shape) == (np.float64, (0, 4))


def test_temporaries_python_reference(rng):
    a = nonzero_floats(rng, 9, np.float64)
    assert_same(temporaries.python(a, 5), _temporaries(a, 5))


# --- returning arrays ------------------------------------------------------------------


@kd.kernel
def dense_layer(x: kd.Array[kd.f32, 2], w: kd.Array[kd.f32, 2], b: kd.Array[kd.f32]):
    return kd.tanh(x @ w + b)


def test_return_a_at_w_plus_b(rng):
    x, w, b = nonzero_floats(rng, (16, 5)), nonzero_floats(rng, (5, 3)), nonzero_floats(rng, 3)
    y = against_numpy(dense_layer, (x, w, b), lambda x, w, b: np.tanh(x @ w + b), rtol=1e-5,
                      atol=1e-6)
    assert type(y) is np.ndarray and y.flags.c_contiguous and y.flags.writeable
    y2 = dense_layer(x, w, b)
    assert y2 is not y and not np.shares_memory(y, y2)  # a new array per call


@kd.kernel
def mixed_results(a, b):
    return a > b, kd.sum(a), a * b, a


def test_return_tuple_of_arrays_scalars_and_an_argument(rng):
    a, b = nonzero_floats(rng, 7), nonzero_floats(rng, 7)
    result = against_numpy(mixed_results, (a, b),
                           lambda a, b: (a > b, np.sum(a), a * b, a), rtol=1e-6)
    assert result[3] is a  # an argument comes back as the same object


@kd.kernel
def one_tuple(a):
    return (a * 2.0,)


def test_return_one_element_tuple(rng):
    a = nonzero_floats(rng, 4)
    result = against_numpy(one_tuple, (a,), lambda a: (a * 2.0,))
    assert isinstance(result, tuple) and len(result) == 1


@kd.kernel
def return_views(a, step: kd.i64):
    return a.T, a[:, -1], a[::step], a[None, 1:, ::-1], (a * 2.0)[1:, 2]


def _return_views(a, step):
    return a.T, a[:, -1], a[::step], a[None, 1:, ::-1], (a * 2.0)[1:, 2]


@pytest.mark.parametrize("step", [1, 2, -1, -2])
def test_return_views(step, rng):
    for a in (nonzero_floats(rng, (5, 4)), nonzero_floats(rng, (4, 5)).T):
        result = against_numpy(return_views, (a, step), _return_views)
        for r in result[:4]:  # views of the argument see its memory, as in NumPy
            assert np.shares_memory(r, a)


# --- serial loops ----------------------------------------------------------------------


@kd.kernel
def heat_1d(u, steps: kd.i64):
    for _ in range(steps):
        u[1:-1] = u[1:-1] + 0.25 * (u[2:] - 2.0 * u[1:-1] + u[:-2])


def _heat_1d(u, steps):
    for _ in range(steps):
        u[1:-1] = u[1:-1] + 0.25 * (u[2:] - 2.0 * u[1:-1] + u[:-2])


def test_heat_1d_in_place_time_loop(rng):
    for u in (nonzero_floats(rng, 40, np.float64), nonzero_floats(rng, 80, np.float64)[::-2]):
        against_numpy(heat_1d, (u, 25), _heat_1d, rtol=1e-12, atol=1e-12)


@kd.kernel
def heat_2d(u, steps: kd.i64):
    v = kd.zeros_like(u)
    for _ in range(steps):
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                               + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
        u, v = v, u
    return u


def _heat_2d(u, steps):
    v = np.zeros_like(u)
    for _ in range(steps):
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                               + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
        u, v = v, u
    return u


@pytest.mark.parametrize("steps", [4, 5])
def test_heat_2d_ping_pong(steps, rng):
    u = nonzero_floats(rng, (12, 17), np.float64)
    against_numpy(heat_2d, (u, steps), _heat_2d, rtol=1e-12, atol=1e-12)


@kd.kernel
def particles(pos, vel, force, steps: kd.i64, dt: kd.f32):
    n = pos.shape[0]
    for _ in range(steps):
        for i in kd.prange(n):
            force[i] = -pos[i] - 0.1 * vel[i]
        vel += dt * force
        pos += dt * vel
        vel[0] = 0.0
    return kd.sum(pos * pos) + kd.sum(vel * vel)


def _particles(pos, vel, force, steps, dt):
    dt = np.float32(dt)
    for _ in range(steps):
        force[:] = -pos - np.float32(0.1) * vel
        vel += dt * force
        pos += dt * vel
        vel[0] = 0.0
    return np.sum(pos * pos) + np.sum(vel * vel)


def test_time_loop_mixing_prange_and_tensor_statements(rng):
    pos, vel = nonzero_floats(rng, 500), nonzero_floats(rng, 500)
    against_numpy(particles, (pos, vel, np.zeros(500, np.float32), 20, 0.01), _particles,
                  rtol=2e-5, atol=1e-5)


@kd.kernel
def loop_locals(a, b, m, steps: kd.i64):
    x = a * 1.0
    for _ in range(steps):
        x = x * 0.5 + b
    v = a * 1.0
    for _ in range(steps):
        v = m @ v
        v = v / kd.sqrt(kd.sum(v * v))
    n = 0
    while kd.max(abs(b)) > 0.5:
        b *= 0.5
        n += 1
    return x, v, n


def _loop_locals(a, b, m, steps):
    x = a * 1.0
    for _ in range(steps):
        x = x * 0.5 + b
    v = a * 1.0
    for _ in range(steps):
        v = m @ v
        v = v / np.sqrt(np.sum(v * v))
    n = 0
    while np.max(abs(b)) > 0.5:
        b *= 0.5
        n += 1
    return x, v, n


def test_array_locals_rebound_in_loops(rng):
    a, b = nonzero_floats(rng, 6, np.float64), nonzero_floats(rng, 6, np.float64)
    m = nonzero_floats(rng, (6, 6), np.float64)
    against_numpy(loop_locals, (a, b, m, 7), _loop_locals, rtol=1e-12, atol=1e-12)


@kd.kernel
def rows_in_prange(a, out, flag: kd.bool_):
    for i in kd.prange(a.shape[0]):
        out[i, :] = a[i, :] * 2.0 + out[i]
        out[i, 1:] -= a[i, :-1]
    if flag:
        out[:, 0] = kd.sum(out, axis=1)
    else:
        out[-1] = 0.0


def _rows_in_prange(a, out, flag):
    out[:] = a * np.float32(2) + out
    out[:, 1:] -= a[:, :-1]
    if flag:
        out[:, 0] = np.sum(out, axis=1)
    else:
        out[-1] = 0.0


@pytest.mark.parametrize("flag", [True, False])
def test_tensor_statements_inside_prange_and_branches(flag, rng):
    a, out = nonzero_floats(rng, (9, 5)), nonzero_floats(rng, (9, 5))
    against_numpy(rows_in_prange, (a, out, flag), _rows_in_prange, rtol=1e-5, atol=1e-5)


# --- adjacent parallel loops and tensor statements: fused only when legal ---------------


@kd.kernel
def neighbours(a, b, c, d, e):
    n = a.shape[0]
    for i in kd.prange(n):
        b[i] = a[i] * 2.0
    c[1:] = b[:-1]
    c[0] = b[n - 1]
    d[:] = a + 1.0
    for i in kd.prange(n):
        e[i] = d[n - 1 - i]
    for i in kd.prange(n):
        a[i] = a[i] + b[i]
    b[:] = a * 0.5
    b[::-1] = a + b
    for i in kd.prange(n):
        c[i] += b[i]
    for i in kd.prange(n - 1):
        d[i + 1] = c[i]
    d[1:] = d[:-1] - e[1:]


def _neighbours(a, b, c, d, e):
    n = a.shape[0]
    b[:] = a * 2.0
    c[1:] = b[:-1]
    c[0] = b[n - 1]
    d[:] = a + 1.0
    e[:] = d[::-1]
    a[:] = a + b
    b[:] = a * 0.5
    b[::-1] = a + b
    c[:] += b
    d[1:] = c[:-1]
    d[1:] = d[:-1].copy() - e[1:]


def test_adjacent_loops_with_dependences_across_indices(rng):
    for n in (257, 1):
        args = tuple(nonzero_floats(rng, n, np.float64) for _ in range(5))
        against_numpy(neighbours, args, _neighbours)


# --- shape errors inside programs ------------------------------------------------------


@kd.kernel
def sum_of_sum(a, b):
    return kd.sum(a + b, axis=0)


@kd.kernel
def loop_with_mismatch(u, w, steps: kd.i64):
    for _ in range(steps):
        u[1:] = u[1:] + w
    return u


def test_shape_errors_in_reductions_and_loops():
    with pytest.raises(ValueError, match="3"):
        sum_of_sum(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="5"):
        loop_with_mismatch(np.ones(6), np.ones(4), 3)
    np.testing.assert_array_equal(loop_with_mismatch(np.ones(6), np.ones(5), 0), np.ones(6))


# --- the IR: no temporaries for fused chains ----------------------------------------


def _count(ir: str, op: str) -> int:
    return len(re.findall(rf"= {op}\b", ir))


@kd.kernel
def chain_into(out, a, b, c):
    t = a * a + b * b
    out[:] = kd.sqrt(t) * 0.5 - c / (abs(a) + 1.0)


@kd.kernel
def chain_reductions(a, b, c):
    return kd.sum(a * b + c), kd.max(abs(a - b) * 2.0), kd.mean(kd.where(a > b, a, c) ** 2)


@kd.kernel
def chain_axis_reduction(out, a, b):
    out[:] = kd.sum(a * b - 1.0, axis=1)


@kd.kernel
def used_twice(out1, out2, a):
    b = a * 2.0 + 1.0
    out1[:] = b * b + b
    out2[:] = b - 1.0


@kd.kernel
def matmul_chain(out, a, w, bias):
    out[:] = kd.tanh(a @ w + bias) * 2.0


def test_ir_elementwise_chain_into_an_array_has_no_temporary():
    x = np.ones((4, 5), np.float32)
    ir = chain_into.ir(x, x, x, x)
    assert _count(ir, "array_new") == 0, ir
    assert "tensor_" not in ir
    lowered = chain_into.ir(x, x, x, x, stage="lower-tensors")
    assert _count(lowered, "array_new") == 0 and "parallel_for" in lowered
    assert "tensor_assign" not in lowered


def test_ir_reductions_of_chains_have_no_temporary():
    x = np.ones(10)
    ir = chain_reductions.ir(x, x, x)
    assert _count(ir, "array_new") == 0, ir
    assert "tensor_" not in ir


def test_ir_axis_reduction_of_a_chain_allocates_only_its_result():
    x = np.ones((3, 4))
    assert _count(chain_axis_reduction.ir(np.ones(3), x, x), "array_new") <= 1


def test_ir_value_used_twice_is_materialised_once():
    x = np.ones(8, np.float32)
    ir = used_twice.ir(x, x, x)
    assert _count(ir, "array_new") == 1, ir


def test_ir_matmul_result_is_the_only_temporary():
    a, w, bias = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), np.ones(2, np.float32)
    assert _count(matmul_chain.ir(np.ones((4, 2), np.float32), a, w, bias), "array_new") == 1


def test_ir_overlapping_update_copies_once():
    ir = heat_1d.ir(np.ones(10), 3)
    assert _count(ir, "array_new") == 1, ir


def test_fused_kernels_compute_the_right_values(rng):
    a, b, c = (nonzero_floats(rng, (4, 5)) for _ in range(3))
    against_numpy(chain_into, (np.zeros((4, 5), np.float32), a, b, c),
                  lambda out, a, b, c: out.__setitem__(
                      slice(None), np.sqrt(a * a + b * b) * np.float32(0.5) - c / (abs(a) + np.float32(1))),
                  rtol=2e-6, atol=1e-6)
    x, y, z = (nonzero_floats(rng, 50, np.float64) for _ in range(3))
    against_numpy(chain_reductions, (x, y, z),
                  lambda a, b, c: (np.sum(a * b + c), np.max(abs(a - b) * 2.0),
                                   np.mean(np.where(a > b, a, c) ** 2)), rtol=1e-12, atol=1e-12)
    x = positive_floats(rng, 8)

    def reference(out1, out2, a):
        b = a * np.float32(2) + np.float32(1)
        out1[:] = b * b + b
        out2[:] = b - np.float32(1)

    against_numpy(used_twice, (np.zeros(8, np.float32), np.zeros(8, np.float32), x), reference,
                  rtol=1e-6)


# --- debug mode and unsupported constructs -------------------------------------------------


@kd.kernel(debug=True)
def debug_stencil(u, w):
    u[1:-1] = u[1:-1] + 0.5 * (u[2:] - u[:-2]) * w[None, :]
    return kd.sum(u[:, ::-1] * w, axis=1), u[1:, ::2].T @ w[None, 1:][0]


def test_debug_mode_checks_pass_on_tensor_loops(rng):
    u, w = nonzero_floats(rng, (6, 6), np.float64), nonzero_floats(rng, 6, np.float64)

    def reference(u, w):
        u[1:-1] = u[1:-1] + 0.5 * (u[2:] - u[:-2]) * w[None, :]
        return np.sum(u[:, ::-1] * w, axis=1), u[1:, ::2].T @ w[None, 1:][0]

    against_numpy(debug_stencil, (u, w), reference, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("expr", [
    "a[a > 2.0]", "a[[0, 2]]", "a[1:3, 0]", "kd.sum(m, axis=2)", "kd.sum(m, axis=(0, 1))",
    "a.sum(axis=1)", "m[0, 0, 0]",
])
def test_unsupported_array_constructs_are_compile_errors(expr):
    kernel = kernel_from_source(f"@kd.kernel\ndef k(a, m):\n    return {expr}\n",
                                prefix="tensor_err")
    with pytest.raises(kd.CompileError) as error:
        kernel(np.arange(6.0), np.arange(12.0).reshape(3, 4))
    if "[[" in expr:
        assert "index list" in str(error.value)


def test_ellipsis_view_in_a_tensor_expression_matches_numpy():
    kernel = kernel_from_source("@kd.kernel\ndef k(a):\n    return a[...] * 2 + a[..., 1:2]\n",
                                prefix="tensor_ellipsis")
    a = np.arange(1.0, 13.0).reshape(3, 4)
    np.testing.assert_array_equal(kernel(a), a[...] * 2 + a[..., 1:2])

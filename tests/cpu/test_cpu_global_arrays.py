"""Arrays read from globals and closures are captured by reference: hidden arguments
read at every call, so writes are visible to the caller and a new array bound to the
name is seen on the next call (in kernels and in the funcs they call)."""

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest
from kdsl_cpu_util import positive_floats, with_threads

import kdsl as kd

grid_v = np.zeros((4, 5), dtype=np.float32)
gravity = np.array([9.81], dtype=np.float32)


@kd.func
def add_gravity(i, j, dt):
    grid_v[i, j] -= dt * gravity[0]


@kd.kernel
def step(dt: kd.f32):
    n, m = grid_v.shape
    for i, j in kd.ndrange(n, m):
        grid_v[i, j] = grid_v[i, j] * 0.5 + i - j
        add_gravity(i, j, dt)
    return kd.sum(grid_v)


def _run_both(kernel, setup, *args):
    """``kernel`` compiled and as plain Python, each on a fresh global state from
    ``setup()`` (which binds the globals and returns them)."""
    compiled_state = setup()
    compiled = kernel(*args)
    python_state = setup()
    expected = kernel.python(*args)
    return compiled, compiled_state, expected, python_state


@pytest.mark.parametrize("threads", [1, 2])
def test_global_array_written_by_kernel_and_func_is_visible(threads, rng):
    start = positive_floats(rng, (4, 5))

    def setup():
        global grid_v
        grid_v = start.copy()
        return grid_v

    got, state, expected, python_state = with_threads(threads, _run_both, step, setup, 0.1)
    np.testing.assert_allclose(state, python_state, rtol=1e-6)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert not np.array_equal(state, start)


def test_a_new_array_bound_to_the_name_is_seen_on_the_next_call(rng):
    global grid_v
    first = positive_floats(rng, (4, 5))
    grid_v = first
    step(0.1)
    second = positive_floats(rng, (6, 3))  # same type: the fast path, another array
    kept = first.copy()
    grid_v = second
    expected = second.copy()
    step(0.1)
    np.testing.assert_array_equal(first, kept)  # the old array is no longer written
    reference = expected.copy()
    grid_v = reference
    step.python(0.1)
    np.testing.assert_allclose(second, reference, rtol=1e-6)
    grid_v = positive_floats(rng, (3, 6), np.float64)[:, ::2]  # another dtype and layout
    view_start = grid_v.copy()
    total = step(0.1)
    grid_v = view_start
    assert total == pytest.approx(step.python(0.1), rel=1e-12)


def test_gravity_rebound_between_calls(rng):
    global grid_v, gravity
    grid_v = np.zeros((2, 2), dtype=np.float32)
    gravity = np.array([1.0], dtype=np.float32)
    step(1.0)
    np.testing.assert_allclose(grid_v, [[-1, -2], [0, -1]])
    grid_v = np.zeros((2, 2), dtype=np.float32)
    gravity = np.array([3.0], dtype=np.float32)
    step(1.0)
    np.testing.assert_allclose(grid_v, [[-3, -4], [-2, -3]])


def make_counter():
    counts = np.zeros(3, dtype=np.int64)

    @kd.kernel
    def count(x):
        for i in kd.prange(x.shape[0]):
            kd.atomic_add(counts, x[i] % 3, 1)

    return count, counts


def test_closure_array_is_captured_by_reference(rng):
    count, counts = make_counter()
    x = rng.integers(0, 100, 50)
    count(x)
    count(x)
    np.testing.assert_array_equal(counts, 2 * np.bincount(x % 3, minlength=3))


def test_local_of_the_same_name_hides_the_global():
    @kd.kernel
    def shadow(a):
        grid_v = a
        for i in kd.prange(a.shape[0]):
            grid_v[i] = 1.0

    a = np.zeros(3)
    before = grid_v.copy()
    shadow(a)
    assert a.tolist() == [1.0, 1.0, 1.0] and np.array_equal(grid_v, before)


def test_ir_shows_the_hidden_parameter():
    assert "%gravity: array<f32, 1, C>" in step.ir(0.5)


def test_a_deleted_global_array_is_a_name_error():
    source_module = _module_with_global_kernel()
    source_module.k()
    del source_module.table
    with pytest.raises(NameError, match="reads the array 'table'"):
        source_module.k()


def _module_with_global_kernel():
    from kdsl_cpu_util import module_from_source

    return module_from_source(
        """
        table = np.arange(4.0)

        @kd.kernel
        def k():
            for i in kd.prange(table.shape[0]):
                table[i] *= 2.0
        """
    )


def test_captured_arrays_of_the_wrong_count_of_arguments():
    with pytest.raises(TypeError, match=r"step\(\) takes 1 arguments, got 2"):
        step(1.0, 2.0)


@pytest.mark.skipif(not cuda_testing.enabled(), reason="CUDA tests are off")
def test_global_cuda_array_is_captured(rng):
    global grid_v, gravity
    start = positive_floats(rng, (4, 5))
    with cuda_testing.on_device():
        grid_v = kd.array(start, device="cuda")
        gravity = kd.array(np.array([2.0], dtype=np.float32), device="cuda")
        total = step(0.25)
        got = grid_v.numpy()
        gravity = np.array([2.0], dtype=np.float32)
        with pytest.raises(ValueError, match="'gravity' on the cpu"):
            step(0.25)
    grid_v = start.copy()
    expected = step.python(0.25)
    np.testing.assert_allclose(got, grid_v, rtol=1e-5)
    assert float(total) == pytest.approx(float(expected), rel=1e-5)


def test_an_array_reached_through_an_attribute_names_the_remedy():
    from kdsl_cpu_util import module_from_source

    module = module_from_source(
        """
        import types

        params = types.SimpleNamespace(grid=np.zeros(3))

        @kd.kernel
        def k():
            for i in kd.prange(3):
                params.grid[i] = 1.0
        """
    )
    with pytest.raises(kd.CompileError, match="bind this one to a global name or pass it"):
        module.k()

"""Wrong arguments at the call are a ``TypeError`` naming the parameter, the expected
type and the given one; a kernel that failed to compile leaves every later call working."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def scale(a: kd.Array[kd.f32], s: kd.f32):
    for i in kd.prange(a.shape[0]):
        a[i] = a[i] * s


@kd.kernel
def double_positions(p: kd.Array[kd.vec3]):
    for i in kd.prange(p.shape[0]):
        p[i] = p[i] * 2.0


@kd.kernel
def store_int(n: kd.i32, a: kd.Array[kd.i32]):
    a[0] = n


@kd.kernel
def fill_grid(g: kd.Array[kd.f64, 2], v: kd.f64):
    for i, j in kd.ndrange(g.shape[0], g.shape[1]):
        g[i, j] = v


def type_error(call) -> str:
    with pytest.raises(TypeError) as info:
        call()
    return str(info.value)


def test_f32_array_given_float64_array():
    message = type_error(lambda: scale(np.ones(3), 2.0))
    assert "'a'" in message
    assert "f32" in message or "float32" in message
    assert "float64" in message


def test_f32_array_given_int64_array():
    message = type_error(lambda: scale(np.arange(3), 2.0))
    assert "'a'" in message
    assert "f32" in message or "float32" in message
    assert "int64" in message


def test_f32_array_given_two_dimensional_array():
    message = type_error(lambda: scale(np.ones((3, 2), np.float32), 2.0))
    assert "'a'" in message and "(3, 2)" in message


def test_f32_array_given_a_list():
    message = type_error(lambda: scale([1.0, 2.0], 2.0))
    assert "'a'" in message and "list" in message


def test_f32_array_given_kd_array_of_other_dtype():
    message = type_error(lambda: scale(kd.array([1.0, 2.0], dtype=kd.f64), 2.0))
    assert "'a'" in message and "float64" in message


def test_f32_scalar_given_a_string():
    message = type_error(lambda: scale(np.ones(3, np.float32), "x"))
    assert "'s'" in message and "f32" in message and "str" in message


def test_vec3_array_given_n_by_4_array():
    message = type_error(lambda: double_positions(np.ones((5, 4), np.float32)))
    assert "'p'" in message and "vec3" in message and "(5, 4)" in message


def test_vec3_array_given_float64_n_by_3_array():
    message = type_error(lambda: double_positions(np.ones((5, 3), np.float64)))
    assert "'p'" in message and "vec3" in message and "float64" in message


def test_vec3_array_given_flat_array():
    message = type_error(lambda: double_positions(np.ones(6, np.float32)))
    assert "'p'" in message and "vec3" in message and "(6,)" in message


def test_i32_scalar_given_a_float():
    message = type_error(lambda: store_int(1.5, np.zeros(2, np.int32)))
    assert "'n'" in message and "i32" in message and "float" in message


def test_i32_array_given_int64_array():
    message = type_error(lambda: store_int(1, np.zeros(2, np.int64)))
    assert "'a'" in message and ("i32" in message or "int32" in message) and "int64" in message


def test_two_dimensional_array_given_one_dimensional():
    message = type_error(lambda: fill_grid(np.ones(4), 1.0))
    assert "'g'" in message and "(4,)" in message


def test_wrong_number_of_arguments():
    message = type_error(lambda: scale(np.ones(3, np.float32)))
    assert "scale()" in message and "missing 1 required argument: 's'" in message
    message = type_error(lambda: scale(np.ones(3, np.float32), 1.0, 2.0))
    assert "scale()" in message and "2" in message and "3" in message


def test_i32_scalar_given_an_int_that_does_not_fit():
    out = np.full(2, 7, np.int32)
    with pytest.raises((TypeError, OverflowError)) as info:
        store_int(2**40, out)
    assert "'n'" in str(info.value) and "i32" in str(info.value)
    np.testing.assert_array_equal(out, [7, 7])
    store_int(-(2**31), out)
    assert out[0] == -(2**31)


def test_right_arguments_still_work_after_type_errors():
    a = np.arange(1, 4, dtype=np.float32)
    with pytest.raises(TypeError):
        scale(a.astype(np.float64), 2.0)
    scale(a, 2.0)
    np.testing.assert_array_equal(a, [2.0, 4.0, 6.0])
    p = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    with pytest.raises(TypeError):
        double_positions(np.ones((2, 4), np.float32))
    double_positions(p)
    np.testing.assert_array_equal(p, np.arange(2, 14, 2, dtype=np.float32).reshape(2, 3))


# --- a failed compilation leaves everything working ------------------------------------


@kd.kernel
def first_element_to(a, out: kd.Array[kd.f64]):
    out[0] = a[0]


@kd.kernel
def add_arrays(x: kd.Array[kd.f64], y: kd.Array[kd.f64]):
    for i in kd.prange(x.shape[0]):
        y[i] = y[i] + x[i]


def test_failed_specialisation_leaves_other_calls_working():
    out = np.zeros(1)
    # with a 2-D array ``a[0]`` is a row, which cannot be stored into one element
    with pytest.raises(kd.CompileError):
        first_element_to(np.ones((2, 2)), out)
    # the same kernel with other arguments compiles and runs
    first_element_to(np.array([3.5, 1.0]), out)
    assert out[0] == 3.5
    # the failing one fails again, the same way, and nothing else is affected
    with pytest.raises(kd.CompileError) as info:
        first_element_to(np.ones((2, 2)), out)
    assert "array" in info.value.message and "one element" in info.value.message
    first_element_to(np.array([-1.25], np.float32), out)
    assert out[0] == -1.25
    x, y = np.arange(1.0, 5.0), np.full(4, 10.0)
    add_arrays(x, y)
    np.testing.assert_array_equal(y, [11.0, 12.0, 13.0, 14.0])


def test_failed_kernel_does_not_break_other_kernels():
    @kd.kernel
    def broken(a: kd.Array[kd.f64]):
        a[0] = undefined_in_this_test  # noqa: F821

    @kd.kernel
    def fine(a: kd.Array[kd.f64]):
        for i in kd.prange(a.shape[0]):
            a[i] = 2.0 * a[i]

    a = np.arange(1.0, 4.0)
    for _ in range(2):
        with pytest.raises(kd.CompileError):
            broken(a)
    fine(a)
    np.testing.assert_array_equal(a, [2.0, 4.0, 6.0])
    assert broken.python is not None  # the kernel object itself is intact


def test_failed_func_does_not_poison_its_other_callers():
    @kd.func
    def halve(x):
        return x / 2

    @kd.kernel
    def halve_vector_into_scalar(a: kd.Array[kd.f64]):
        a[0] = halve(kd.vec3d(1.0))

    @kd.kernel
    def halve_all(a: kd.Array[kd.f64]):
        for i in kd.prange(a.shape[0]):
            a[i] = halve(a[i])

    a = np.arange(1.0, 4.0)
    with pytest.raises(kd.CompileError):
        halve_vector_into_scalar(a)
    halve_all(a)
    np.testing.assert_array_equal(a, [0.5, 1.0, 1.5])


# --- the fast path checks what the first call checked ---------------------------------------

@kd.kernel
def vector_sum(v: kd.vec3):
    return v.x + v.y + v.z


@kd.kernel
def matrix_corner(m: kd.mat33):
    return m[2, 2]


@pytest.mark.parametrize("wrong", [[1.0, 2.0], [1.0, 2.0, 3.0, 4.0], [[1.0, 2.0, 3.0]],
                                   [1.0, [2.0], 3.0], [1j, 2.0, 3.0], ["1", "2", "3"]])
def test_vector_parameter_checks_every_call_not_only_the_first(wrong):
    assert vector_sum([1.0, 2.0, 4.0]) == pytest.approx(vector_sum.python([1.0, 2.0, 4.0]))
    with pytest.raises(TypeError, match=r"argument 'v': expected vec3, got list"):
        vector_sum(wrong)
    assert vector_sum((0.5, 0.25, 2.0)) == pytest.approx(2.75)


@pytest.mark.parametrize("wrong", [[[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0, 3.0]] * 2,
                                   [[1.0, 2.0, 3.0]] * 4, [[1j, 0, 0], [0, 1, 0], [0, 0, 1]]])
def test_matrix_parameter_checks_every_call_not_only_the_first(wrong):
    good = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.5]]
    assert matrix_corner(good) == pytest.approx(9.5)
    with pytest.raises(TypeError, match=r"argument 'm': expected mat33, got list"):
        matrix_corner(wrong)
    assert matrix_corner(np.arange(9.0).reshape(3, 3).tolist()) == pytest.approx(8.0)


def test_complex_vector_components_name_the_parameter():
    assert vector_sum(np.array([1.0, 2.0, 3.0])) == pytest.approx(6.0)
    with pytest.raises(TypeError, match=r"argument 'v': expected vec3, got .*complex"):
        vector_sum(np.array([1j, 2.0, 3.0]))


def test_complex_vector_constructor_names_the_component():
    with pytest.raises(TypeError, match=r"vec3 component 1: expected a real number, got complex"):
        kd.vec3(1.0, 2j, 3.0)
    with pytest.raises(TypeError, match=r"mat22 component 0: expected a real number"):
        kd.mat22(1j, 0.0, 0.0, 1.0)

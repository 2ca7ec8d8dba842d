"""The compiled call path of repeated calls: the same results as the Python path, and
every argument the Python path rejects (or specialises anew for) still reaches it."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import kdsl as kd

RNG = np.random.default_rng(15)


def data(n: int = 16, dtype: type = np.float32) -> np.ndarray:
    return RNG.uniform(-4.0, 4.0, n).astype(dtype)


def warm(kernel, *args) -> None:
    """Calls twice, so that the next call takes the compiled path."""
    kernel(*args)
    kernel(*args)
    assert kernel._fast is not None


@kd.kernel
def add(a: kd.Array[kd.f32], b: kd.Array[kd.f32], c: kd.Array[kd.f32]):
    for i in range(c.shape[0]):
        c[i] = a[i] + b[i]


@kd.kernel
def scale_any(a, out):
    for i in range(out.shape[0]):
        out[i] = a[i] * 2


@kd.kernel
def total(a: kd.Array[kd.f64]):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s


@kd.kernel
def total_and_count(a: kd.Array[kd.f32]):
    s = kd.f32(0.0)
    n = 0
    for i in range(a.shape[0]):
        s += a[i]
        n += 1
    return s, n


@kd.kernel(debug=True)
def read_at(a: kd.Array[kd.f64], out: kd.Array[kd.f64]):
    out[0] = a[out.shape[0] + 3]


def test_repeated_calls_match_the_kernels_python():
    a, b = data(), data()
    warm(add, a, b, np.zeros(16, np.float32))
    for _ in range(3):
        a, b = data(), data()
        c, expected = np.zeros(16, np.float32), np.zeros(16, np.float32)
        assert add(a, b, c) is None
        add.python(a, b, expected)
        np.testing.assert_array_equal(c, expected)
        assert np.any(c != 0)


def test_returned_values_keep_their_types():
    a = data(100, np.float64)
    warm(total, a)
    for _ in range(3):
        a = data(100, np.float64)
        got = total(a)
        assert type(got) is type(total.python(a))
        assert got == pytest.approx(total.python(a))
    b = data(33)
    warm(total_and_count, b)
    s, n = total_and_count(b)
    assert isinstance(s, np.float32) and s == pytest.approx(float(b.sum()), rel=1e-5)
    assert n == 33 and type(n) is int


def test_wrong_dtype_and_ndim_are_rejected_as_on_the_first_call():
    a, b, c = data(), data(), np.zeros(16, np.float32)
    warm(add, a, b, c)
    with pytest.raises(TypeError, match="argument 'a'"):
        add(a.astype(np.float64), b, c)
    with pytest.raises(TypeError, match="argument 'b'"):
        add(a, b.reshape(4, 4), c)
    with pytest.raises(TypeError, match="argument 'c'"):
        add(a, b, [0.0] * 16)
    with pytest.raises(TypeError, match="argument 'a'"):
        add(a.byteswap().view(a.dtype.newbyteorder()), b, c)
    with pytest.raises(TypeError, match="missing 1 required argument: .c."):
        add(a, b)
    add(a, b, c)  # the compiled path still works afterwards
    np.testing.assert_array_equal(c, a + b)


def test_unannotated_kernels_specialise_anew_for_other_arrays():
    a, out = data(), np.zeros(16, np.float32)
    warm(scale_any, a, out)
    wide, wide_out = data(16, np.float64), np.zeros(16, np.float64)
    scale_any(wide, wide_out)
    np.testing.assert_array_equal(wide_out, wide * 2)
    ints, int_out = np.arange(-8, 8, dtype=np.int32), np.zeros(16, np.int32)
    scale_any(ints, int_out)
    np.testing.assert_array_equal(int_out, ints * 2)
    scale_any(a, out)
    np.testing.assert_array_equal(out, a * 2)


def test_non_contiguous_views_take_their_own_specialisation():
    a, b, c = data(32), data(32), np.zeros(32, np.float32)
    warm(add, a[:16], b[:16], c[:16])
    strided_out = np.zeros(32, np.float32)
    add(a[::2], b[::2], strided_out[::2])
    np.testing.assert_array_equal(strided_out[::2], a[::2] + b[::2])
    assert np.all(strided_out[1::2] == 0)
    reversed_out = np.zeros(16, np.float32)
    add(a[15::-1], b[:16], reversed_out)
    np.testing.assert_array_equal(reversed_out, a[15::-1] + b[:16])


def test_read_only_output_is_still_refused():
    a, b, c = data(), data(), np.zeros(16, np.float32)
    warm(add, a, b, c)
    a.flags.writeable = False  # read, never written: fine
    add(a, b, c)
    c.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'c'.*read-only"):
        add(a, b, c)


def test_subclasses_and_wrappers_take_the_python_path():
    class Tagged(np.ndarray):
        pass

    a, b, c = data(), data(), np.zeros(16, np.float32)
    warm(add, a, b, c)
    out = np.zeros(16, np.float32).view(Tagged)
    add(a.view(Tagged), b, out)
    np.testing.assert_array_equal(np.asarray(out), a + b)


def test_errors_inside_the_kernel_are_raised_from_the_compiled_path():
    a, out = data(8, np.float64), np.zeros(2, np.float64)
    warm(read_at, a, out)
    np.testing.assert_array_equal(out[0], a[5])
    with pytest.raises(IndexError, match="index 7 is out of bounds .* size 6"):
        read_at(a[:6], np.zeros(4, np.float64))
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        read_at(a[:6], np.zeros(4, np.float64))


def test_wrong_vector_sizes_are_rejected_on_every_call():
    @kd.kernel
    def shift(p: kd.Array[kd.vec3], d: kd.vec3):
        for i in range(p.shape[0]):
            p[i] += d

    p = np.ones((4, 3), np.float32)
    shift(p, (1.0, 2.0, 3.0))
    shift(p, (1.0, 2.0, 3.0))
    with pytest.raises(TypeError, match="argument 'd'"):
        shift(p, (1.0, 2.0))
    with pytest.raises(TypeError, match="argument 'p'"):
        shift(np.ones((4, 2), np.float32), (1.0, 2.0, 3.0))
    np.testing.assert_array_equal(p, np.tile([3.0, 5.0, 7.0], (4, 1)))


@kd.kernel
def spring_forces(x: kd.Array[kd.vec2d], f: kd.Array[kd.vec2d], k: kd.f64):
    n = x.shape[0]
    for i in kd.prange(n):
        f[i] = k * (x[(i + 1) % n] - x[i])


def test_vector_arrays_take_the_compiled_path_and_are_still_checked():
    x = RNG.standard_normal((6, 2))
    f = np.zeros((6, 2))
    warm(spring_forces, x, f, 0.5)
    fast = spring_forces._fast
    x = RNG.standard_normal((9, 2))
    spring_forces(x, f := np.zeros((9, 2)), 1.5)
    assert spring_forces._fast is fast  # the compiled path took the new arrays
    expected = np.zeros((9, 2))
    spring_forces.python(x, expected, 1.5)
    np.testing.assert_allclose(f, expected, rtol=1e-12)
    with pytest.raises(TypeError, match="argument 'f'"):
        spring_forces(x, np.zeros((9, 3)), 1.5)
    strided = np.zeros((9, 4))[:, :2]  # not contiguous: a specialisation of its own
    spring_forces(x, strided, 1.5)
    np.testing.assert_allclose(strided, expected, rtol=1e-12)


FACTOR = 2.0


@kd.kernel
def times(a: kd.Array[kd.f64], out: kd.Array[kd.f64]):
    for i in range(a.shape[0]):
        out[i] = a[i] * FACTOR


def test_a_changed_global_recompiles(monkeypatch):
    a, out = data(8, np.float64), np.zeros(8, np.float64)
    warm(times, a, out)
    np.testing.assert_array_equal(out, a * 2.0)
    monkeypatch.setitem(globals(), "FACTOR", 3.0)
    for _ in range(3):
        times(a, out)
        np.testing.assert_array_equal(out, a * 3.0)


@pytest.fixture
def emulated_cuda():
    from kdsl.runtime.cuda import driver
    from kdsl.runtime.cuda.emulator import EmulatedDriver

    previous = driver.current_driver()
    driver.set_driver(EmulatedDriver())
    yield
    driver.set_driver(previous)


def test_cuda_arrays_on_a_cpu_specialisation_are_refused(emulated_cuda):
    a, b, c = data(), data(), np.zeros(16, np.float32)
    warm(add, a, b, c)
    on_device = kd.array(b, device="cuda")
    with pytest.raises(ValueError, match="different devices"):
        add(a, on_device, c)
    add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


# --- scalar arguments ------------------------------------------------------------------


def warm_fast(kernel, *args) -> None:
    """Warms up, then checks that the compiled path itself takes these arguments."""
    from kdsl.runtime.fast_call import SLOW

    warm(kernel, *args)
    fast = kernel._fast
    hidden = fast.hidden.read(kernel.__name__) if fast.hidden else ()
    assert fast.function(*args, *hidden) is not SLOW


@kd.kernel
def axpy(a: kd.f32, x: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in range(out.shape[0]):
        out[i] = a * x[i] + out[i]


@kd.kernel
def shift(k: kd.i32, flag: kd.bool_, x: kd.Array[kd.i64], out: kd.Array[kd.i64]):
    for i in range(out.shape[0]):
        out[i] = x[i] + k if flag else x[i] - k


@kd.kernel
def mixed(a, n, x: kd.Array[kd.f64]):
    s = 0.0
    for i in range(x.shape[0]):
        s += a * x[i] + n
    return s


@pytest.mark.parametrize("a", [1.5, np.float32(-0.25), np.float64(2.0), 3])
def test_float_parameters_take_python_and_numpy_scalars(a):
    x = data()
    warm_fast(axpy, a, x, np.zeros(16, np.float32))
    for _ in range(2):
        x, out, expected = data(), data(), None
        expected = out.copy()
        axpy.python(a, x, expected)
        assert axpy(a, x, out) is None
        np.testing.assert_allclose(out, expected, rtol=1e-6)


@pytest.mark.parametrize("k, flag", [(3, True), (np.int32(-5), False), (np.int64(7), np.bool_(True)),
                                     (True, False)])
def test_integer_and_bool_parameters_are_converted_as_on_the_first_call(k, flag):
    x = RNG.integers(-100, 100, 16)
    warm_fast(shift, k, flag, x, np.zeros(16, np.int64))
    for _ in range(2):
        x = RNG.integers(-100, 100, 16)
        out, expected = np.zeros(16, np.int64), np.zeros(16, np.int64)
        shift(k, flag, x, out)
        shift.python(k, flag, x, expected)
        np.testing.assert_array_equal(out, expected)
        assert np.any(out != 0)


def test_out_of_range_integers_are_refused_after_warm_up():
    x = RNG.integers(-100, 100, 16)
    warm_fast(shift, 4, True, x, np.zeros(16, np.int64))
    for bad in (2**31, -(2**31) - 1, 2**70):
        with pytest.raises(OverflowError, match="'k'"):
            shift(bad, True, x, np.zeros(16, np.int64))
    with pytest.raises(OverflowError, match="'k'"):
        shift(np.int64(2**40), True, x, np.zeros(16, np.int64))


def test_other_scalar_types_take_the_python_path():
    x = data(8, np.float64)
    warm_fast(mixed, 0.5, 2, x)
    assert mixed(0.5, 2, x) == pytest.approx(mixed.python(0.5, 2, x))
    # a float where an int specialised: specialised anew, never read as an int
    assert mixed(0.5, 2.5, x) == pytest.approx(mixed.python(0.5, 2.5, x))
    assert mixed(np.float32(0.5), 2, x) == pytest.approx(mixed.python(np.float32(0.5), 2, x))
    assert mixed(0.5, np.int16(3), x) == pytest.approx(mixed.python(0.5, np.int16(3), x))
    with pytest.raises(TypeError):
        axpy("1.0", data(), np.zeros(16, np.float32))
    with pytest.raises(TypeError):
        axpy(1.0j, data(), np.zeros(16, np.float32))


def test_scalar_arguments_and_arrays_are_both_still_checked():
    warm_fast(axpy, 2.0, data(), np.zeros(16, np.float32))
    with pytest.raises(TypeError):
        axpy(2.0, data(16, np.float64), np.zeros(16, np.float32))
    out = np.zeros(16, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        axpy(2.0, data(), out)


# --- hidden arguments: global arrays and the random stream -----------------------------

TABLE = np.arange(16, dtype=np.float64)


@kd.kernel
def add_table(out: kd.Array[kd.f64]):
    for i in range(out.shape[0]):
        out[i] += TABLE[i]


@kd.kernel
def noise(out: kd.Array[kd.f64]):
    for i in range(out.shape[0]):
        out[i] = kd.random()


def test_a_global_array_is_read_on_every_compiled_call(monkeypatch):
    base = TABLE.copy()
    out = np.zeros(16)
    warm_fast(add_table, out)
    out[:] = 0.0
    add_table(out)
    np.testing.assert_array_equal(out, base)
    monkeypatch.setattr(__import__(__name__), "TABLE", base * 3.0)
    out[:] = 0.0
    add_table(out)
    np.testing.assert_array_equal(out, base * 3.0)
    # rebound to an array of another dtype: the Python path, which specialises anew
    monkeypatch.setattr(__import__(__name__), "TABLE", np.ones(16, np.float32))
    out[:] = 0.0
    add_table(out)
    np.testing.assert_array_equal(out, np.ones(16))


def test_random_kernels_draw_the_same_streams_on_the_compiled_path():
    def draws(count: int) -> list[np.ndarray]:
        kd.seed(11)
        results = []
        for _ in range(count):
            out = np.zeros(16)
            noise(out)
            results.append(out)
        return results

    first = draws(5)
    assert noise._fast is not None and noise._fast.hidden
    assert all(np.any(a != b) for a, b in zip(first, first[1:]))
    again = draws(5)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    kd.seed(11)
    for expected in first:
        out = np.zeros(16)
        noise.python(out)
        np.testing.assert_allclose(out, expected)
    # a rejected argument after warm-up takes the Python path without a second draw
    kd.seed(11)
    noise(np.zeros(16))
    noise(np.zeros(16))
    out = np.zeros(16, np.float32)
    with pytest.raises(TypeError):
        noise(out)
    last = np.zeros(16)
    noise(last)
    np.testing.assert_array_equal(last, first[3])


SHIFT = 1.5


@kd.func
def shifted(x: kd.f32) -> kd.f32:
    return x + SHIFT


@kd.kernel
def add_shift(a: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in range(out.shape[0]):
        out[i] = a[i] + SHIFT


@kd.kernel
def call_shifted(a: kd.Array[kd.f32], out: kd.Array[kd.f32]):
    for i in range(out.shape[0]):
        out[i] = shifted(a[i])


@pytest.mark.parametrize("kernel", [add_shift, call_shifted])
def test_the_compiled_path_sees_a_changed_global(kernel, monkeypatch):
    a, out = data(), np.zeros(16, np.float32)
    warm(kernel, a, out)
    assert not kernel._fast.own_code_only  # a global constant: checked at each call
    monkeypatch.setattr(sys.modules[__name__], "SHIFT", -2.5)
    kernel(a, out)
    np.testing.assert_allclose(out, a - 2.5, rtol=1e-6)
    reference = np.zeros_like(out)
    kernel.python(a, reference)
    np.testing.assert_allclose(out, reference, rtol=1e-6)


def test_a_kernel_of_its_own_code_alone_skips_the_dependency_check():
    a, b, c = data(), data(), np.zeros(16, np.float32)
    warm(add, a, b, c)
    assert add._fast.own_code_only
    add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_kd_arrays_take_the_compiled_path(monkeypatch):
    """Host kd.arrays reach the compiled path as the NumPy arrays they share memory with:
    writes land in them, a returned scalar is the same, and the checked Python path is
    not called once the path is warm."""
    a, b = kd.array(data()), kd.array(data())
    c = kd.array(np.zeros(16, np.float32))
    warm(add, a, b, c)
    warm(total, kd.array(data(dtype=np.float64)))

    def refused(*args, **kwargs):
        raise AssertionError("the checked Python path was taken")

    monkeypatch.setattr(add, "_call_checked", refused)
    monkeypatch.setattr(total, "_call_checked", refused)
    a[:] = data()
    add(a, b, c.numpy())  # kd.arrays and NumPy arrays mixed
    np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())
    add(a, b, c)
    np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())
    x = data(dtype=np.float64)
    assert total(kd.array(x)) == pytest.approx(total.python(x), rel=1e-12)
    monkeypatch.undo()
    with pytest.raises(TypeError):  # a kd.array of another dtype still reaches the checks
        total(kd.array(data(dtype=np.float32)))

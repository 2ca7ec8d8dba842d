"""Arrays of any layout and dtype: strided, transposed, reversed and broadcast views;
2-D and 3-D arrays; shape, ndim, len, negative constant indices; writes are visible to
the caller (no copies)."""

import numpy as np
import pytest
from kdsl_cpu_util import check, nonzero_floats, nonzero_ints

import kdsl as kd


@kd.kernel
def affine(src, dst):
    for i in kd.prange(src.shape[0]):
        dst[i] = src[i] * 2 + 1


_VIEWS_1D = {
    "contiguous": lambda a: a,
    "every_other": lambda a: a[::2],
    "every_third_offset": lambda a: a[1::3],
    "reversed": lambda a: a[::-1],
    "reversed_step2": lambda a: a[-2::-2],
    "column": lambda a: a.reshape(-1, 4)[:, 1],
    "row_of_transposed": lambda a: a.reshape(4, -1).T[3],
}


@pytest.mark.parametrize("dst_view", ["contiguous", "reversed", "every_other"])
@pytest.mark.parametrize("src_view", sorted(_VIEWS_1D))
def test_1d_views(src_view, dst_view, rng):
    a = nonzero_floats(rng, 240)
    src = _VIEWS_1D[src_view](a)
    base = np.zeros(2 * src.shape[0] + 2, np.float32)
    dst = {"contiguous": base[:src.shape[0]], "reversed": base[:src.shape[0]][::-1],
           "every_other": base[::2][:src.shape[0]]}[dst_view]
    check(affine, src, dst)
    np.testing.assert_array_equal(dst, src * 2 + 1)


def test_writes_through_views_reach_the_base_array(rng):
    base = np.zeros(100, np.float64)
    src = nonzero_floats(rng, 50, np.float64)
    affine(src, base[::2])
    np.testing.assert_array_equal(base[::2], src * 2 + 1)
    assert not base[1::2].any()
    affine(src[:25], base[-2::-4])
    np.testing.assert_array_equal(base[-2::-4], src[:25] * 2 + 1)
    assert not base[1::2].any()


def test_no_copies_for_contiguous_arrays(rng):
    src = nonzero_ints(rng, 64, np.int32)
    dst = np.zeros(64, np.int32)
    alias = dst  # the very object
    affine(src, dst)
    assert alias is dst
    np.testing.assert_array_equal(alias, src * 2 + 1)


def test_contiguous_and_strided_calls_of_one_kernel(rng):
    a = nonzero_floats(rng, 64)
    out1, out2 = np.zeros(64, np.float32), np.zeros(32, np.float32)
    affine(a, out1)
    affine(a[::2], out2)  # a new specialisation: non-contiguous
    affine(a[:32], out1[:32][::-1])
    np.testing.assert_array_equal(out2, a[::2] * 2 + 1)
    np.testing.assert_array_equal(out1[:32][::-1], a[:32] * 2 + 1)


def test_broadcast_view_with_zero_stride(rng):
    src = np.broadcast_to(np.float32(1.5), (40,))
    dst = np.zeros(40, np.float32)
    check(affine, src, dst)
    np.testing.assert_array_equal(dst, np.full(40, 4.0))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float64, np.int16, np.uint32])
def test_dtypes(dtype, rng):
    src = (nonzero_floats(rng, 50, dtype) if np.dtype(dtype).kind == "f"
           else nonzero_ints(rng, 50, dtype, 1, 100))
    dst = np.zeros(50, dtype)
    check(affine, src, dst)


@kd.kernel
def bool_array(flags, x, out, count):
    for i in kd.prange(flags.shape[0]):
        out[i] = not flags[i]
        if flags[i]:
            x[i] = -x[i]
            count[0] += 1


def test_bool_arrays(rng):
    flags = rng.random(70) < 0.4
    x = nonzero_floats(rng, 70)
    out = np.zeros(70, np.bool_)
    count = np.zeros(1, np.int64)
    check(bool_array, flags, x, out, count)
    assert count[0] == flags.sum()
    check(bool_array, flags[::-2], x[::2], out[1::2], count)


@kd.kernel
def grid(a, out):
    for i, j in kd.ndrange(a.shape[0], a.shape[1]):
        out[i, j] = a[i, j] + i - j * 0.5  # exact: no contraction can change it


_VIEWS_2D = {
    "contiguous": lambda a: a,
    "transposed": lambda a: a.T,
    "fortran": lambda a: np.asfortranarray(a),
    "sliced": lambda a: a[1:-1:2, ::3],
    "reversed": lambda a: a[::-1, ::-2],
    "transposed_reversed": lambda a: a.T[::-1],
}


@pytest.mark.parametrize("view", sorted(_VIEWS_2D))
def test_2d_views(view, rng):
    a = _VIEWS_2D[view](nonzero_floats(rng, (24, 30), np.float64))
    out_base = np.zeros((a.shape[1], a.shape[0]))
    out = out_base.T  # a transposed output as well
    check(grid, a, out)
    np.testing.assert_array_equal(out, a + np.arange(a.shape[0])[:, None] - np.arange(a.shape[1]) * 0.5)


@kd.kernel
def volume(a: kd.Array[kd.f32, 3], out: kd.Array[kd.f32, 3]):
    n0, n1, n2 = a.shape
    for i in kd.prange(a.shape[0]):
        for j in range(a.shape[1]):
            for k in range(a.shape[2]):
                out[i, j, k] = a[i, j, k] - a[n0 - 1, n1 - 1, n2 - 1] + a[0, j, n2 - 1]


@kd.kernel
def volume_negative(a: kd.Array[kd.f32, 3], out: kd.Array[kd.f32, 3]):
    for i in kd.prange(a.shape[0]):
        for j in range(a.shape[1]):
            for k in range(a.shape[2]):
                out[i, j, k] = a[i, j, k] - a[-1, -1, -1] + a[0, j, -1]


def _volume(view, rng):
    base = nonzero_floats(rng, (9, 8, 7))
    return {"contiguous": base, "transposed": base.transpose(2, 0, 1),
            "sliced": base[::-2, 1:, ::3]}[view]


@pytest.mark.parametrize("view", ["contiguous", "transposed", "sliced"])
def test_3d_arrays(view, rng):
    a = _volume(view, rng)
    out = np.zeros(a.shape, np.float32)
    check(volume, a, out)


# Regression test (was a kdsl bug): a negative constant index (a[-1], a[-1, 0]) is not
# wrapped: it reads before the start of the array
@pytest.mark.parametrize("view", ["contiguous", "transposed", "sliced"])
def test_3d_arrays_negative_indices(view, rng):
    a = _volume(view, rng)
    out = np.zeros(a.shape, np.float32)
    check(volume_negative, a, out)


@kd.kernel
def metadata(a):
    return a.shape[0], a.shape[1], a.ndim, len(a), a[len(a) - 1, 0], a[0, a.shape[1] - 1]


@pytest.mark.parametrize("view", sorted(_VIEWS_2D))
def test_shape_ndim_len(view, rng):
    a = _VIEWS_2D[view](nonzero_ints(rng, (24, 30), np.int64))
    r = check(metadata, a)
    assert r[:4] == (a.shape[0], a.shape[1], 2, a.shape[0])


@kd.kernel
def negative_indices(a):
    return a[-1, 0], a[0, -1], a[-2, -3], a[-1, -1]


# Regression test (was a kdsl bug): a negative constant index (a[-1], a[-1, 0]) is not
# wrapped: it reads before the start of the array
@pytest.mark.parametrize("view", ["contiguous", "transposed"])
def test_negative_constant_indices_2d(view, rng):
    a = _VIEWS_2D[view](nonzero_ints(rng, (24, 30), np.int64))
    check(negative_indices, a)


@kd.kernel
def unpack_shape(a, out):
    n, m = a.shape
    for i in kd.prange(n):
        s = 0
        for j in range(m):
            s += a[i, j]
        out[i] = s + a[i, m - 1]


def test_shape_unpacking(rng):
    a = nonzero_ints(rng, (13, 9), np.int32)
    out = np.zeros(13, np.int32)
    check(unpack_shape, a, out)


@kd.kernel
def last_element(a):
    return a[-1] + a[-2] * 10


# Regression test (was a kdsl bug): a negative constant index (a[-1], a[-1, 0]) is not
# wrapped: it reads before the start of the array
@pytest.mark.parametrize("view", ["contiguous", "reversed", "every_other"])
def test_negative_constant_index_1d(view, rng):
    a = _VIEWS_1D[view](nonzero_ints(rng, 30, np.int64))
    assert check(last_element, a) == a[-1] + a[-2] * 10


@kd.kernel
def empty_ok(a, out):
    for i in kd.prange(a.shape[0]):
        out[i] = a[i] + 1.0
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s


def test_empty_arrays():
    a, out = np.zeros(0, np.float64), np.zeros(0, np.float64)
    assert check(empty_ok, a, out) == 0.0
    check(empty_ok, a[::-1], out[::2])


@kd.kernel
def annotated(a: kd.Array[kd.f32], out: kd.Array[kd.f32, 2]):
    for i in kd.prange(a.shape[0]):
        out[i, 0] = a[i]


def test_annotation_type_errors_name_the_parameter():
    with pytest.raises(TypeError, match="'a'.*f32.*float64|'a'.*float32.*float64"):
        annotated(np.zeros(3), np.zeros((3, 1), np.float32))
    with pytest.raises(TypeError, match="'out'"):
        annotated(np.zeros(3, np.float32), np.zeros(3, np.float32))
    out = np.zeros((3, 1), np.float32)
    annotated(np.ones(3, np.float32)[::-1], out)  # any layout is accepted
    assert out.sum() == 3.0


@kd.kernel
def mixed_dtype_arrays(a, b, c, out):
    for i in kd.prange(a.shape[0]):
        out[i] = a[i] * b[i] + c[i]


def test_mixed_dtype_arrays(rng):
    a = nonzero_ints(rng, 60, np.uint8, 1, 20)
    b = nonzero_ints(rng, 60, np.int16, -20, 20)
    c = nonzero_floats(rng, 60, np.float32)
    out = np.zeros(60, np.float32)  # uint8 * int16 -> int16; + f32 -> f32
    check(mixed_dtype_arrays, a, b, c, out)
    np.testing.assert_array_equal(out, a * b + c)


@kd.kernel
def shifted_sum(a, b):
    for i in range(1, b.shape[0]):
        b[i] = a[0] + a[i - 1]


@kd.kernel
def accumulate_first(a, b):
    for i in range(b.shape[0]):
        b[0] = b[0] + a[i]


@pytest.mark.parametrize("kernel", [shifted_sum, accumulate_first, affine],
                         ids=["shifted_sum", "accumulate_first", "affine"])
def test_the_same_array_passed_twice(kernel, rng):
    """No copies and no assumption that arguments do not alias: the serial loops see their
    own writes exactly as plain Python does."""
    x = nonzero_ints(rng, 40, np.int64)
    y = x.copy()
    kernel(x, x)
    kernel.python(y, y)
    np.testing.assert_array_equal(x, y)


def test_overlapping_views():
    z = np.arange(10.0)
    w = z.copy()
    shifted_sum(z[:-1], z[1:])
    shifted_sum.python(w[:-1], w[1:])
    np.testing.assert_array_equal(z, w)

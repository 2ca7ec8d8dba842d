"""Property tests: kernels compiled against their own Python on random inputs drawn by
hypothesis (finite values in a sane range, sizes 0..200, random layouts)."""

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from kdsl_cpu_util import check, fuzz_settings, with_threads

import kdsl as kd

FUZZ = fuzz_settings(30)


SIZES = st.integers(0, 200)


def float_arrays(dtype, shape=SIZES, lo=-1e3, hi=1e3):
    width = 32 if dtype == np.float32 else 64
    return hnp.arrays(dtype, shape, elements=st.floats(lo, hi, width=width,
                                                      allow_nan=False, allow_infinity=False))


def int_arrays(dtype, shape=SIZES, lo=-10_000, hi=10_000):
    return hnp.arrays(dtype, shape, elements=st.integers(lo, hi))


@st.composite
def same_length_pair(draw, left, right):
    n = draw(st.integers(0, 200))
    return draw(left(n)), draw(right(n))


# --- elementwise f32 with weak literals: bit for bit ------------------------------


@kd.kernel
def f32_elementwise(x: kd.Array[kd.f32], y: kd.Array[kd.f32], out: kd.Array[kd.f32, 2]):
    for i in kd.prange(x.shape[0]):
        out[i, 0] = x[i] * 0.1
        out[i, 1] = x[i] + y[i]
        out[i, 2] = 0.3 - y[i]
        out[i, 3] = abs(x[i]) / (abs(y[i]) + 1.0)
        out[i, 4] = max(x[i], y[i])
        out[i, 5] = x[i] if x[i] < y[i] else -y[i]
        out[i, 6] = kd.floor(x[i] * 0.5)
        out[i, 7] = kd.f32(float(x[i]) * 0.1)


@FUZZ
@given(same_length_pair(lambda n: float_arrays(np.float32, n), lambda n: float_arrays(np.float32, n)))
def test_f32_elementwise_bit_for_bit(xy):
    x, y = xy
    out = np.zeros((x.shape[0], 8), np.float32)
    check(f32_elementwise, x, y, out)
    np.testing.assert_array_equal(out[:, 0], x * 0.1)
    np.testing.assert_array_equal(out[:, 2], 0.3 - y)


# --- integers: //, %, bit ops, exact -------------------------------------------------


@kd.kernel
def int_ops(a, b, out):
    for i in kd.prange(a.shape[0]):
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]
        out[i, 2] = a[i] * b[i] - 7
        out[i, 3] = (a[i] ^ b[i]) & 1023
        out[i, 4] = min(a[i], b[i]) - max(a[i], 3)
        out[i, 5] = abs(a[i]) % 7
        out[i, 6] = a[i] // 3 + a[i] % -5


@FUZZ
@given(same_length_pair(lambda n: int_arrays(np.int64, n),
                        lambda n: int_arrays(np.int64, n).filter(lambda b: (b != 0).all())),
       st.sampled_from([np.int64, np.int32]))
def test_integer_ops_exact(ab, dtype):
    a, b = (v.astype(dtype) for v in ab)
    out = np.zeros((a.shape[0], 7), dtype)
    check(int_ops, a, b, out)
    for x, y, row in zip(a.tolist(), b.tolist(), out.tolist()):
        assert row[0] == x // y and row[1] == x % y and row[6] == x // 3 + x % -5


# --- float reductions --------------------------------------------------------------


@kd.kernel
def stats(x):
    s = 0.0
    sq = 0.0
    lo = 1e300
    hi = -1e300
    for i in kd.prange(x.shape[0]):
        s += x[i]
        sq += x[i] * x[i]
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    return s, sq, lo, hi


@FUZZ
@given(float_arrays(np.float64), st.sampled_from([1, 2]))
def test_float64_reductions(x, threads):
    s, sq, lo, hi = with_threads(threads, check, stats, x, rtol=1e-9, atol=1e-6)
    if x.size:
        assert lo == x.min() and hi == x.max()


@kd.kernel
def int_stats(x):
    s = 0
    lo = x[0]
    hi = x[0]
    for i in kd.prange(x.shape[0]):
        s += x[i]
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    return s, lo, hi


@FUZZ
@given(int_arrays(np.int64, st.integers(1, 200)), st.sampled_from([1, 2]))
def test_int64_reductions_exact(x, threads):
    s, lo, hi = with_threads(threads, check, int_stats, x)
    assert s == x.sum()


# --- control flow ------------------------------------------------------------------


@kd.func
def bounded_steps(v, limit):
    k = 0
    while v != 1 and k < limit:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        k += 1
    return k


@kd.kernel
def control(a, x, out, steps):
    for i in kd.prange(a.shape[0]):
        v = x[i]
        if v < -100.0:
            r = -1.0
        elif v < 0.0 or a[i] % 3 == 0:
            r = v * 0.5
        else:
            r = 0.0
            for j in range(a[i] % 17):
                if j % 4 == 3:
                    continue
                r += j * 0.25
        out[i] = r
        steps[i] = bounded_steps(abs(a[i]) + 1, 60)


@FUZZ
@given(same_length_pair(lambda n: int_arrays(np.int64, n, -1000, 1000),
                        lambda n: float_arrays(np.float64, n)))
def test_control_flow(ax):
    a, x = ax
    out = np.zeros(a.shape[0])
    steps = np.zeros(a.shape[0], np.int64)
    check(control, a, x, out, steps)


# --- layouts -----------------------------------------------------------------------


@kd.kernel
def strided_update(src, dst, scale):
    for i in kd.prange(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j] * scale - dst[i, j]


_steps = st.sampled_from([1, 2, 3, -1, -2])


@FUZZ
@given(float_arrays(np.float32, st.tuples(st.integers(0, 20), st.integers(0, 20))),
       _steps, _steps, st.booleans())
def test_random_layouts(a, s0, s1, transpose):
    src = a[::s0, ::s1]
    if transpose:
        src = src.T
    dst_base = np.ones((src.shape[0] * 2, src.shape[1] + 1), np.float32)
    dst = dst_base[::-2, 1:] if src.shape[0] else dst_base[:, 1:]
    assume(dst.shape == src.shape)
    check(strided_update, src, dst, 0.5)
    np.testing.assert_array_equal(dst, src * np.float32(0.5) - 1)


# --- atomics ------------------------------------------------------------------------


@kd.kernel
def binned(idx, w, counts, sums):
    for i in kd.prange(idx.shape[0]):
        counts[idx[i]] += 1
        sums[idx[i]] += w[i]


@FUZZ
@given(same_length_pair(lambda n: int_arrays(np.int64, n, 0, 9),
                        lambda n: int_arrays(np.int32, n, -100, 100)))
def test_histogram(iw):
    idx, w = iw
    counts, sums = np.zeros(10, np.int64), np.zeros(10, np.int32)
    with_threads(2, check, binned, idx, w, counts, sums)


# --- vectors -----------------------------------------------------------------------


@kd.kernel
def vec_kernel(a: kd.Array[kd.vec3], b: kd.Array[kd.vec3], out: kd.Array[kd.vec3]):
    for i in kd.prange(a.shape[0]):
        c = kd.cross(a[i], b[i])
        out[i] = kd.where(kd.dot(c, c) > 1.0, c * 0.5, a[i] - b[i])


@FUZZ
@given(same_length_pair(
    lambda n: float_arrays(np.float32, st.just((n, 3)), -10, 10),
    lambda n: float_arrays(np.float32, st.just((n, 3)), -10, 10)))
def test_vectors(ab):
    a, b = ab
    out = np.zeros_like(a)
    check(vec_kernel, a, b, out, rtol=1e-5, atol=1e-4)

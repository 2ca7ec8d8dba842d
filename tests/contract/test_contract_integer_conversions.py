"""Integer conversions (``kd.u32(x)``, ``np.int8(x)``, ``int(x)``) give the same values
compiled and through ``kernel.python``: a float truncates toward zero and saturates at the
type's range, NaN gives 0; an integer of another type wraps (docs/language.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kdsl_cpu_util import check, kernel_from_source

import kdsl as kd

INTEGER_TYPES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
NUMPY_NAMES = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
               "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}


def adversarial_floats(rng, dtype) -> np.ndarray:
    """NaN, infinities, values just inside and outside every integer type's range, halves
    and small negatives (which an unsigned conversion must not wrap), and random ones."""
    edges = []
    for bits in (8, 16, 32, 64):
        for edge in (2.0 ** bits, 2.0 ** (bits - 1), -(2.0 ** (bits - 1))):
            edges += [edge, edge - 1.0, edge + 1.0, edge - 0.5, edge + 0.5,
                      np.nextafter(edge, 0.0), np.nextafter(edge, np.inf)]
    special = [np.nan, -np.nan, np.inf, -np.inf, -3.7, 3.7, -0.9, 0.9, -0.0, 0.0, 1e30,
               -1e30, 5e-324, -1.5, 255.9, -128.9, 300.5]
    values = np.array(special + edges, dtype=np.float64)
    spread = rng.normal(scale=1e3, size=40) * 10.0 ** rng.integers(0, 20, size=40)
    return np.concatenate([values, spread]).astype(dtype)


@pytest.mark.parametrize("source_type", ["f32", "f64"])
@pytest.mark.parametrize("spelling", ["kd", "np"])
def test_float_to_integer_conversions_agree_with_kernel_python(rng, source_type, spelling):
    names = [f"kd.{t}" if spelling == "kd" else f"np.{NUMPY_NAMES[t]}" for t in INTEGER_TYPES]
    outs = ", ".join(f"o{k}" for k in range(len(names)))
    body = "".join(f"        o{k}[i] = {n}(x[i])\n" for k, n in enumerate(names))
    kernel = kernel_from_source(
        f"@kd.kernel\ndef k(x, {outs}):\n    for i in range(x.shape[0]):\n{body}")
    x = adversarial_floats(rng, np.float32 if source_type == "f32" else np.float64)
    outs_arrays = [np.full(len(x), 7, dtype=NUMPY_NAMES[t]) for t in INTEGER_TYPES]
    check(kernel, x, *outs_arrays)
    u32 = outs_arrays[INTEGER_TYPES.index("u32")]
    assert u32[list(x).index(np.float32(-3.7) if source_type == "f32" else -3.7)] == 0


@kd.kernel
def python_int_of(x: kd.Array[kd.f64], out: kd.Array[kd.i64]):
    for i in range(x.shape[0]):
        out[i] = int(x[i])


def test_int_of_a_float_saturates_and_nan_gives_zero(rng):
    x = adversarial_floats(rng, np.float64)
    out = np.full(len(x), 7, dtype=np.int64)
    check(python_int_of, x, out)
    assert out[0] == 0  # NaN
    assert out[2] == 2 ** 63 - 1 and out[3] == -(2 ** 63)  # inf, -inf


@kd.kernel
def integer_narrowing(x: kd.Array[kd.i64], a: kd.Array[kd.u8], b: kd.Array[kd.i16],
                      c: kd.Array[kd.u32], d: kd.Array[kd.i64]):
    for i in range(x.shape[0]):
        a[i] = kd.u8(x[i])
        b[i] = np.int16(x[i])
        c[i] = kd.u32(x[i])
        d[i] = int(kd.u64(x[i]))


def test_integer_to_integer_conversions_wrap_in_both_modes(rng):
    x = np.concatenate([np.array([-1, 255, 256, -129, 2 ** 40 + 3, -(2 ** 63), 2 ** 63 - 1]),
                        rng.integers(-(2 ** 62), 2 ** 62, size=30)]).astype(np.int64)
    outs = [np.zeros(len(x), dtype=t) for t in (np.uint8, np.int16, np.uint32, np.int64)]
    check(integer_narrowing, x, *outs)
    assert outs[0][0] == 255 and outs[1][3] == -129


@kd.kernel
def scalar_conversions(x: kd.f64):
    return kd.u32(x), kd.i8(x), int(x), np.uint16(x), kd.u64(x)


@pytest.mark.parametrize("x", [-3.7, math.nan, math.inf, -math.inf, 1e30, 2.0 ** 64, 65535.5])
def test_conversions_of_a_scalar_argument(x):
    check(scalar_conversions, x)


def test_kd_u32_of_a_negative_float_in_plain_python_is_zero():
    assert kd.u32(-3.7) == 0 and isinstance(kd.u32(-3.7), np.uint32)
    assert kd.i8(np.float32(1e10)) == 127 and kd.u8(math.nan) == 0


WIDE_CONSTANT = 300  # a compile-time constant, not a literal in the conversion: it wraps


@kd.kernel
def narrowing_of_python_ints(n, m: kd.i64):
    return kd.u8(n), np.int8(m), kd.u16(n * 1000), kd.u8(WIDE_CONSTANT), kd.i8(-WIDE_CONSTANT)


@pytest.mark.parametrize("n", [300, -1, 2 ** 40 + 7, -(2 ** 63), 255])
def test_a_python_int_of_another_type_wraps_in_both_modes(n):
    expected = (np.uint8(n % 256), np.int8((n + 128) % 256 - 128),
                np.uint16((n * 1000) % 2 ** 16), np.uint8(44), np.int8(-44))
    assert narrowing_of_python_ints(n, n) == expected
    assert narrowing_of_python_ints.python(n, n) == expected
    assert kd.u8(n) == np.uint8(n % 256)  # called in plain Python too


def test_a_literal_the_type_cannot_hold_is_an_error_in_both_modes():
    kernel = kernel_from_source("@kd.kernel\ndef k(x):\n    return x + kd.u8(-1)\n")
    with pytest.raises(kd.CompileError, match=r"-1 does not fit in u8 \[0, 255\]") as info:
        kernel(1)
    assert "kd.u8(-1)" in str(info.value)
    with pytest.raises(OverflowError, match=r"-1 does not fit in u8"):
        kernel.python(1)
    fits = kernel_from_source("@kd.kernel\ndef k(x):\n    return x + np.int16(-32768)\n")
    check(fits, 5)

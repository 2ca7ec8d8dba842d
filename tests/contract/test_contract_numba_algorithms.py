"""Integer algorithms as Numba users write them (API.md sections 2-3), each compared with
its own plain-Python run and with Python or NumPy: n-queens by recursion-free
backtracking (nested `while` loops with `break`), bit tricks on uint32 and int64
(popcount, bit reversal, next power of two, lowest set bit, Gray code), and a parser of
integers from a byte array."""

from __future__ import annotations

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def count_queens(n: kd.i64) -> kd.i64:
    columns = kd.zeros(16, kd.i64)
    count = 0
    row = 0
    columns[0] = -1
    while row >= 0:
        columns[row] += 1
        while columns[row] < n:
            safe = True
            for r in range(row):
                c = columns[r]
                if c == columns[row] or abs(c - columns[row]) == row - r:
                    safe = False
                    break
            if safe:
                break
            columns[row] += 1
        if columns[row] < n:
            if row == n - 1:
                count += 1
            else:
                row += 1
                columns[row] = -1
        else:
            row -= 1
    return count


def test_n_queens():
    assert [check(count_queens, n) for n in (1, 4, 5, 6, 8)] == [1, 2, 10, 4, 92]


@kd.kernel
def bit_tricks(x: kd.Array[kd.u32], out: kd.Array[kd.u32, 2]):
    for i in kd.prange(x.shape[0]):
        v = x[i]
        c = v - ((v >> 1) & 0x55555555)
        c = (c & 0x33333333) + ((c >> 2) & 0x33333333)
        out[i, 0] = (((c + (c >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24
        r = ((v >> 1) & 0x55555555) | ((v & 0x55555555) << 1)
        r = ((r >> 2) & 0x33333333) | ((r & 0x33333333) << 2)
        r = ((r >> 4) & 0x0F0F0F0F) | ((r & 0x0F0F0F0F) << 4)
        r = ((r >> 8) & 0x00FF00FF) | ((r & 0x00FF00FF) << 8)
        out[i, 1] = (r >> 16) | (r << 16)
        p = v - 1
        for shift in (1, 2, 4, 8, 16):
            p |= p >> shift
        out[i, 2] = p + 1
        out[i, 3] = v & (~v + 1)
        out[i, 4] = v ^ (v >> 1)


@kd.kernel
def signed_bit_tricks(x: kd.Array[kd.i64], out: kd.Array[kd.i64, 2]):
    for i in kd.prange(x.shape[0]):
        v = x[i]
        sign = v >> 63
        out[i, 0] = (v ^ sign) - sign  # abs without a branch
        out[i, 1] = v & -v
        out[i, 2] = ~v
        out[i, 3] = (v << 5) >> 3


def test_bit_tricks_as_python(rng):
    x = rng.integers(0, 2**32, 300, dtype=np.uint32)
    x[:4] = [0, 1, 2**31, 2**32 - 1]
    out = np.zeros((300, 5), np.uint32)
    check(bit_tricks, x, out)
    values = [int(v) for v in x]
    np.testing.assert_array_equal(out[:, 0], [bin(v).count("1") for v in values])
    np.testing.assert_array_equal(out[:, 1], [int(f"{v:032b}"[::-1], 2) for v in values])
    np.testing.assert_array_equal(out[:, 2], [(1 << (v - 1).bit_length()) % 2**32 if v else 0
                                              for v in values])
    np.testing.assert_array_equal(out[:, 3], [v & -v for v in values])
    np.testing.assert_array_equal(out[:, 4], [v ^ (v >> 1) for v in values])
    y = rng.integers(-2**62, 2**62, 300)
    y[:3] = [0, -1, -2**63]
    signed = np.zeros((300, 4), np.int64)
    check(signed_bit_tricks, y, signed)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(signed, np.stack([np.abs(y), y & -y, ~y, (y << 5) >> 3], 1))


@kd.kernel
def parse_integers(text: kd.Array[kd.u8], out: kd.Array[kd.i64]) -> kd.i64:
    count = 0
    value = kd.i64(0)
    negative = False
    digits = False
    for i in range(text.shape[0] + 1):
        c = text[i] if i < text.shape[0] else 32
        if c == 45:  # '-'
            negative = True
        elif 48 <= c <= 57:
            value = value * 10 + (c - 48)
            digits = True
        else:
            if digits:
                out[count] = -value if negative else value
                count += 1
            value = 0
            negative = False
            digits = False
    return count


def test_parse_integers_from_bytes():
    source = b"12 -345 6789,0 -1\n42 9999999999 -9223372036854775807"
    text = np.frombuffer(source, np.uint8).copy()
    out = np.zeros(16, np.int64)
    count = check(parse_integers, text, out)
    assert out[:count].tolist() == [int(t) for t in source.replace(b",", b" ").split()]

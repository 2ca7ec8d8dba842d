"""Order-preserving unsigned keys of scalars, the digits a radix sort reads.

Each scalar type maps to a ``u32`` (types of up to 4 bytes) or ``u64`` key whose unsigned
order is NumPy's order of the values: signed integers with their sign bit flipped;
floats with negatives' bits inverted and positives' sign bit set, -0.0 as +0.0 (they
compare equal, so a stable sort keeps their order) and every NaN the largest key (last,
as NumPy sorts them).
"""

from __future__ import annotations

from kdsl import types as T
from kdsl.primitives.generated import kd_name


def key_type(t: T.ScalarType) -> T.ScalarType:
    return T.u64 if t.bits == 64 else T.u32


def key_func_source(t: T.ScalarType, name: str = "key_of") -> str:
    """Source of ``@kd.func def key_of(x)``: the unsigned key of a ``t``."""
    k = kd_name(key_type(t))
    top = f"{k}(1) << {key_type(t).bits - 1}"
    lines = ["@kd.func", f"def {name}(x):"]
    if t.is_float:
        # selects, not branches: the loops around the key stay free of jumps
        lines += ["    b = _bits(x)",
                  f"    top = {top}",
                  "    flipped = kd.where(b >= top, ~b, b | top)",
                  f"    return kd.where(x != x, ~{k}(0), kd.where(x == 0, top, flipped))"]
    elif t.is_signed:
        wide = "kd.i64" if t.bits == 64 else "kd.i32"
        lines += [f"    return {k}({wide}(x)) ^ ({top})"]
    else:
        lines += [f"    return {k}(x)"]
    return "\n".join(lines) + "\n"


def invertible_key_sources(t: T.ScalarType) -> str:
    """Source of ``@kd.func``s ``sort_key(x)`` and ``value_of_key(k)`` for a float type
    ``t``: an order-preserving key that can be turned back into the value (NaNs, their
    sign bit cleared, after +inf; -0.0 before +0.0), so an in-place sort can sort keys."""
    k = kd_name(key_type(t))
    top = f"{k}(1) << {key_type(t).bits - 1}"
    return "\n".join([
        "@kd.func",
        "def sort_key(x):",
        f"    top = {top}",
        "    b = _bits(x)",
        "    b = kd.where(x != x, b & ~top, b)",
        "    return kd.where(b >= top, ~b, b | top)",
        "",
        "",
        "@kd.func",
        "def value_of_key(key):",
        f"    top = {top}",
        "    return _float_from_bits(kd.where(key >= top, key ^ top, ~key))",
    ]) + "\n"


def less_func_source(t: T.ScalarType, name: str = "less") -> str:
    """Source of ``@kd.func def less(p, q)``: NumPy's sort order (NaN after everything)."""
    lines = ["@kd.func", f"def {name}(p, q):"]
    if t.is_float:
        lines += ["    return p < q or (q != q and p == p)"]
    else:
        lines += ["    return p < q"]
    return "\n".join(lines) + "\n"

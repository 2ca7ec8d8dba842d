"""NumPy 2 typing of the values in generated programs: Python int and float literals are
weak (they take the other operand's type), and helpers that write source text converting
or bounding a value in its own type."""

import numpy as np

WEAK_INT, WEAK_FLOAT = "int", "float"
_NUMPY = {"i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}
_BY_DTYPE = {np.dtype(v): k for k, v in _NUMPY.items()}


def is_weak(t):
    return t in (WEAK_INT, WEAK_FLOAT)


def is_float(t):
    return t in (WEAK_FLOAT, "f32", "f64")


def promote(a, b):
    if is_weak(a) and is_weak(b):
        return WEAK_FLOAT if WEAK_FLOAT in (a, b) else WEAK_INT
    if is_weak(a):
        a, b = b, a
    if is_weak(b):
        return a if b == WEAK_INT or is_float(a) else "f64"
    return _BY_DTYPE[np.result_type(_NUMPY[a], _NUMPY[b])]


def coerce(src, t_from, t_to):
    """Source text converting a bounded value of type t_from to type t_to."""
    if t_from == t_to:
        return src
    if t_to == WEAK_FLOAT:
        return f"float({src})"
    if t_to == WEAK_INT:
        return f"int(kd.clamp({src}, -1e6, 1e6))" if is_float(t_from) else f"int({src})"
    if is_weak(t_from):
        # kd.f64(0.5) stays weak in kdsl (a bug, see test_cpu_arithmetic.py): a Python
        # scalar becomes strong by arithmetic with a typed zero instead
        src, t_from = (f"({src} + zf64)", "f64") if is_float(t_from) else (f"({src} + zi64)", "i64")
        if t_from == t_to:
            return src
    if is_float(t_from) and not is_float(t_to):
        src = f"kd.clamp({src}, -1e6, 1e6)"
    return f"kd.{t_to}({src})"


def bounded(src, t):
    """Keeps an assigned value bounded, in its own type."""
    if t == WEAK_INT:
        return f"({src}) % 997"
    if t == WEAK_FLOAT:
        return f"({src}) % 1000.0"
    if is_float(t):
        return f"kd.clamp({src}, -1e6, 1e6)"
    return f"({src}) % 100003"

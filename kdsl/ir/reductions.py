"""Facts about reductions and bool arithmetic that the frontend, the tensor lowering and
the code generators share."""

from __future__ import annotations

from kdsl import types as T

# the op that combines two partial results of each whole-array reduction
REDUCTION_COMBINE = {"sum": "add", "mean": "add", "min": "min", "max": "max"}

# NumPy's arithmetic on bools: True + True is True (or), True * False is False (and)
BOOL_ARITHMETIC = {"add": "bit_or", "mul": "bit_and"}


def reduction_identity(combine: str, t: T.ScalarType) -> int | float:
    """The value a reduction combining with ``combine`` (add, mul, min, max) starts from."""
    if combine == "add":
        return 0
    if combine == "mul":
        return 1
    if t.is_float:
        return float("inf") if combine == "min" else float("-inf")
    if t.is_signed:
        return 2 ** (t.bits - 1) - 1 if combine == "min" else -(2 ** (t.bits - 1))
    return 2**t.bits - 1 if combine == "min" else 0

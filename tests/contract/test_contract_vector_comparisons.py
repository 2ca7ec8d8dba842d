"""Comparing vectors or matrices (``v > 0.5``, ``v == w``) is refused compiled with a
located CompileError; ``kernel.python`` raises the same error at the same place rather
than NumPy's elementwise answer. Scalar comparisons are unchanged in both modes."""

from __future__ import annotations

import numpy as np
import pytest
from kdsl_cpu_util import check

import kdsl as kd


@kd.kernel
def vectors_equal(v: kd.vec3, w: kd.vec3):
    return v == w


@kd.kernel
def vector_above(v: kd.vec3):
    return kd.where(v > 0.5, 1.0, 0.0)


@kd.kernel
def matrix_at_least(m: kd.mat22):
    return 0.5 <= m


@kd.kernel
def component_compare(pos: kd.Array[kd.vec3], out: kd.Array[kd.i32]):
    for i in range(pos.shape[0]):
        p = pos[i]
        out[i] = (p.x > 0.5) + (p[1] != p[2]) + (p.z <= -0.25 < p.y)


CASES = [
    (vectors_equal, ([1.0, 2.0, 3.0], [1.0, 0.0, 3.0]), "comparison of vec3 and vec3"),
    (vector_above, ([0.25, 0.75, 1.0],), "comparison of vec3 and f64"),
    (matrix_at_least, ([[1.0, 2.0], [3.0, 4.0]],), "comparison of f64 and mat22"),
]


def _error(run, args) -> kd.CompileError:
    with pytest.raises(kd.CompileError, match="only scalars compare") as caught:
        run(*args)
    return caught.value


@pytest.mark.parametrize("kernel, args, message", CASES)
def test_vector_comparison_is_the_same_located_error_in_both_modes(kernel, args, message):
    compiled = _error(kernel, args)
    python = _error(kernel.python, args)
    assert message in compiled.message and python.message == compiled.message
    assert python.location is not None and compiled.location is not None
    assert (python.location.file, python.location.line, python.location.column) == (
        compiled.location.file, compiled.location.line, compiled.location.column)


def test_comparisons_of_components_still_work_in_both_modes(rng):
    pos = rng.normal(size=(64, 3)).astype(np.float32)
    pos[::4, 2] = pos[::4, 1]
    out = np.full(64, 9, dtype=np.int32)
    check(component_compare, pos, out)
    assert 0 < out.sum() < 3 * 64


@kd.func
def same_point(v: kd.vec3, w: kd.vec3):
    return v == w


@kd.func
def above_half(v: kd.vec3):
    return kd.where(v > 0.5, 1.0, 0.0)


@kd.func
def moved_up(v: kd.vec3, by: kd.f32):
    v.y += by  # a vector is a value: the caller's array is not changed
    return v


@pytest.mark.parametrize("args", [
    ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),  # lists: Python's == would say True
    (np.ones(3), np.ones(3)),  # arrays: NumPy's == would be elementwise
    (kd.vec3(1.0), np.ones(3, np.float32)),
])
def test_a_func_called_from_python_refuses_vector_comparisons_as_compiled(args):
    with pytest.raises(kd.CompileError, match="comparison of vec3 and vec3: only scalars"):
        same_point(*args)
    with pytest.raises(kd.CompileError, match="comparison of vec3 and f64"):
        above_half(args[0])


def test_a_func_called_from_python_takes_vector_arguments_by_value():
    position = np.array([1.0, 2.0, 3.0])
    moved = moved_up(position, 0.5)
    assert moved.tolist() == [1.0, 2.5, 3.0] and moved.y == np.float32(2.5)
    assert position.tolist() == [1.0, 2.0, 3.0]
    many = np.array([[0.25, 0.75, 1.0], [1.0, 0.0, 0.5]])  # not one vec3: NumPy's own
    np.testing.assert_array_equal(above_half(many), [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])

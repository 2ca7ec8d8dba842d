"""Calling a kernel wrongly (API.md sections 1, 5 and 6): a missing, extra or mistyped
argument is a ``TypeError`` naming the parameter, as Python names it, compiled and in
``kernel.python`` alike."""

from __future__ import annotations

import numpy as np
import pytest

import kdsl as kd


@kd.kernel
def scale(a: kd.Array[kd.f32], factor: kd.f32, offset):
    for i in kd.prange(a.shape[0]):
        a[i] = a[i] * factor + offset


@pytest.mark.parametrize("run", [scale, scale.python], ids=["compiled", "python"])
def test_a_missing_argument_is_named(run):
    a = np.ones(4, np.float32)
    with pytest.raises(TypeError, match=r"scale\(\) missing 2 required arguments: "
                                        r"'factor', 'offset'"):
        run(a)
    with pytest.raises(TypeError, match=r"scale\(\) missing 1 required argument: 'offset'$"):
        run(a, 2.0)
    with pytest.raises(TypeError, match=r"scale\(\) takes 3 arguments, got 4"):
        run(a, 2.0, 1.0, 5)
    with pytest.raises(TypeError, match="missing a required argument: 'offset'"):
        run(a, factor=2.0)
    assert np.array_equal(a, np.ones(4, np.float32))  # nothing ran


def test_a_mistyped_argument_names_the_parameter_what_was_expected_and_given():
    with pytest.raises(TypeError, match=r"'a'.*f32.*float64"):
        scale(np.ones(4), 2.0, 1.0)
    with pytest.raises(TypeError, match=r"'factor'.*f32.*str"):
        scale(np.ones(4, np.float32), "2", 1.0)
    a = np.arange(4, dtype=np.float32)
    scale(a, 2, 0.5)  # an int converts to the annotated f32
    assert np.array_equal(a, np.arange(4, dtype=np.float32) * 2 + 0.5)


def test_decorating_something_other_than_a_python_function_is_a_type_error():
    with pytest.raises(TypeError, match=r"@kd.kernel decorates a Python function.*int 3"):
        kd.kernel(3)
    with pytest.raises(TypeError, match=r"@kd.func decorates a Python function.*builtin"):
        kd.func()(abs)
    with pytest.raises(TypeError, match=r"@kd.func is applied to scale, which already is"):
        kd.func(scale)
    with pytest.raises(TypeError, match=r"debug= takes True or False, got 'yes'"):
        kd.kernel(debug="yes")
    assert kd.kernel(fastmath=False)(scale.py_function)(np.ones(2, np.float32), 2.0, 1.0) is None

"""Running a kernel's own function as plain Python, the reference for its compiled code.

Arrays of vectors and matrices are viewed so that ``pos[i]`` is a small vector value
(a copy, as in a kernel), and ``pos.shape`` lists the indexed axes only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.builtins import Matrix, Vector, spread_vector_index
from kdsl.integer_conversion import checked_literal_conversion as _kd_convert_literal  # noqa: F401
from kdsl.integer_conversion import converted_call as _kd_convert  # noqa: F401 - a helper
from kdsl.runtime.python_compare import compared as _kd_compare  # noqa: F401 - a helper
from kdsl.runtime.python_compare import small_power as _kd_power  # noqa: F401 - a helper


class ElementArrayView:
    """An (n..., *element_shape) NumPy array seen as an array of vectors or matrices."""

    def __init__(self, data: np.ndarray, element: Any) -> None:
        self.data = data
        self.element = element
        self.ndim = data.ndim - len(T.element_shape(element))
        self.shape = data.shape[: self.ndim]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.data if dtype is None else self.data.astype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def _selects_element(self, index: Any) -> bool:
        items = index if isinstance(index, tuple) else (index,)
        return len(items) == self.ndim and all(
            isinstance(i, (int, np.integer)) for i in items
        )

    def __getitem__(self, index: Any) -> Any:
        if self._selects_element(index):  # an element is a value: a copy
            value = np.array(self.data[index], copy=True)
            return value.view(Vector if isinstance(self.element, T.VectorType) else Matrix)
        return ElementArrayView(self.data[index], self.element)  # a view, as in NumPy

    def __setitem__(self, index: Any, value: Any) -> None:
        self.data[index] = np.asarray(value)

    # whole-array arithmetic works on the data; augmented assignment is in place
    def _other(self, other: Any) -> Any:
        return other.data if isinstance(other, ElementArrayView) else other

    def __add__(self, other: Any) -> Any:
        return self.data + self._other(other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return self.data - self._other(other)

    def __rsub__(self, other: Any) -> Any:
        return self._other(other) - self.data

    def __mul__(self, other: Any) -> Any:
        return self.data * self._other(other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        return self.data / self._other(other)

    def __neg__(self) -> Any:
        return -self.data

    def __iadd__(self, other: Any) -> ElementArrayView:
        self.data += self._other(other)
        return self

    def __isub__(self, other: Any) -> ElementArrayView:
        self.data -= self._other(other)
        return self

    def __imul__(self, other: Any) -> ElementArrayView:
        self.data *= self._other(other)
        return self

    def __itruediv__(self, other: Any) -> ElementArrayView:
        self.data /= self._other(other)
        return self


# --- the helpers of kdsl/runtime/python_rewrite.py --------------------------------------


_index = spread_vector_index


def _kd_getitem(container: Any, index: Any) -> Any:
    return container[_index(index)]


def _kd_setitem(value: Any, container: Any, index: Any) -> None:
    container[_index(index)] = value


def _kd_augitem(container: Any, index: Any, op: Any, value: Any) -> None:
    index = _index(index)
    container[index] = op(container[index], value)


def _element_in_place(container: Any, index: Any) -> Any:
    """``container[index]``; for an element of an array of vectors or matrices, a view of
    it (writes to its components reach the array), not the copy ``a[i]`` gives."""
    index = _index(index)
    if isinstance(container, ElementArrayView) and container._selects_element(index):
        view = container.data[index]
        return view.view(Vector if isinstance(container.element, T.VectorType) else Matrix)
    return container[index]


def _set_component(element: Any, key: Any, is_attribute: bool, value: Any) -> None:
    if is_attribute:
        setattr(element, key, value)
    else:
        element[_index(key)] = value


def _kd_setcomponent(value: Any, container: Any, index: Any, key: tuple[Any, bool]) -> None:
    """``container[index].x = value`` or ``container[index][k] = value``, in place."""
    _set_component(_element_in_place(container, index), key[0], key[1], value)


def _kd_augcomponent(container: Any, index: Any, key: tuple[Any, bool], op: Any,
                     value: Any) -> None:
    """``container[index].x += value`` and the like, in place."""
    element = _element_in_place(container, index)
    name, is_attribute = key
    old = getattr(element, name) if is_attribute else element[_index(name)]
    _set_component(element, name, is_attribute, op(old, value))


def run_as_python(kernel: Any, args: tuple) -> Any:
    params = kernel.parameters(args)
    wrapped = []
    for p, a in zip(params, args):
        unwrap = getattr(a, "__kdsl_array__", None)
        if unwrap is not None:
            a = unwrap()
        if isinstance(p.type, T.ArrayType) and not isinstance(p.type.dtype, T.ScalarType):
            a = ElementArrayView(a, p.type.dtype)
        elif p.passing == "vector":
            arr = np.array(a, dtype=T.element_scalar(p.type).numpy_dtype)
            a = arr.view(Vector if isinstance(p.type, T.VectorType) else Matrix)
        elif isinstance(p.type, T.ScalarType) and not p.weak:
            a = p.type.numpy_dtype.type(a)
        wrapped.append(a)
    from kdsl.runtime.python_rewrite import plain_python_function

    function = plain_python_function(kernel.py_function)
    if kernel.uses_random():
        from kdsl.random_numbers import run_with_stream

        return run_with_stream(function.__code__, function, *wrapped)
    return function(*wrapped)

"""Parameter annotations: the kdsl types a function's parameters are declared with."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.errors import CompileError
from kdsl.frontend.source import FunctionSource, read_function


def annotation_of(source: FunctionSource, param: ast.arg) -> Any:
    """The kdsl type a parameter is annotated with, or None."""
    annotation = source.function.__annotations__.get(param.arg)
    if annotation is None:
        return None
    if isinstance(annotation, str):  # from __future__ import annotations
        annotation = _evaluate_annotation(source, param, annotation)
    if isinstance(annotation, T.ArrayType):
        return annotation
    if annotation is np.ndarray or getattr(annotation, "__origin__", None) is np.ndarray:
        return None  # np.ndarray, numpy.typing.NDArray[...]: specialised on the argument
    try:
        return T.as_element_type(annotation)
    except (TypeError, ValueError):
        raise CompileError(
            f"parameter '{param.arg}' is annotated with {annotation!r}, which is not a kdsl type",
            source.location(param),
        ) from None


def _evaluate_annotation(source: FunctionSource, param: ast.arg, text: str) -> Any:
    fn = source.function
    namespace = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:
                pass
    try:
        return eval(text, namespace)  # noqa: S307 - the user's own annotation
    except Exception as exc:  # noqa: BLE001 - report any failure at the parameter
        raise CompileError(
            f"cannot evaluate the annotation {text!r} of parameter '{param.arg}': {exc}",
            source.location(param),
        ) from None


def parameter_annotations(fn: Any) -> list[Any]:
    source = read_function(fn)
    return [annotation_of(source, p) for p in source.tree.args.args]

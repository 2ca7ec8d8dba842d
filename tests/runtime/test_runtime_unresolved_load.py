"""Object code that calls a function this process has not loaded (an entry another
process cached) is refused with a RuntimeError: LLVM's JIT engine would abort."""

from __future__ import annotations

import ctypes

import pytest

from kdsl.codegen import native_code
from kdsl.codegen.cpu import compile_module

_CALLS_ABSENT = """
declare double @kdsl_test_absent_function(double)
declare double @sqrt(double)

define double @kdsl_test_entry(double %x) {
  %r = call double @sqrt(double %x)
  %s = call double @kdsl_test_absent_function(double %r)
  ret double %s
}
"""

_CALLS_LIBM = """
declare double @sqrt(double)

define double @kdsl_test_entry(double %x) {
  %r = call double @sqrt(double %x)
  ret double %r
}
"""


def test_object_calling_an_unloaded_function_is_refused_not_aborted() -> None:
    code = compile_module(_CALLS_ABSENT)
    assert native_code.unresolved_symbols([code]) == ["kdsl_test_absent_function"]
    with pytest.raises(RuntimeError, match="kdsl_test_absent_function"):
        native_code.load_object(code, ["kdsl_test_entry"])


def test_object_calling_libm_loads_and_runs() -> None:
    code = compile_module(_CALLS_LIBM)
    assert native_code.unresolved_symbols([code]) == []
    loaded = native_code.load_object([code], ["kdsl_test_entry"])
    entry = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(loaded["kdsl_test_entry"])
    assert entry(6.25) == 2.5

"""Scalar lowering for NVVM: math through libdevice (``__nv_*``), and saturating
float-to-integer casts written out (libNVVM reads the LLVM 7 dialect, which has neither
``llvm.sin.*`` nor ``llvm.fptosi.sat.*``)."""

from __future__ import annotations

import re

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import scalar_type
from kdsl.codegen.scalar_ops import ScalarEmitter
from kdsl.ir.math_builtins import MATH_FUNCTIONS

_LLVM_MATH = re.compile(r"llvm\.(\w+)\.(f32|f64)$")  # llvm.sqrt.f32, not llvm.nvvm.*
# the C library's functions the CPU code calls, by the libdevice function that replaces them
_LIBM = {
    fn.cpu_symbol(single): fn.libdevice_symbol(single)
    for fn in MATH_FUNCTIONS.values() if fn.libm is not None for single in (True, False)
}


def libdevice_name(name: str) -> str:
    """The libdevice function for an LLVM math intrinsic or a libm name (else ``name``)."""
    match = _LLVM_MATH.match(name)
    if match:
        base, width = match.groups()
        return f"__nv_{base}f" if width == "f32" else f"__nv_{base}"
    return _LIBM.get(name) or name


class DeviceScalarEmitter(ScalarEmitter):
    vector_math = False  # libdevice
    nan_ignoring_intrinsics = False

    def function(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        return super().function(libdevice_name(name), ret, args)

    def cast(self, source: T.ScalarType, target: T.ScalarType, a: ir.Value) -> ir.Value:
        if not (source.is_float and target.is_integer and not target.is_bool):
            return super().cast(source, target, a)
        # saturating, NaN to 0: what llvm.fpto[su]i.sat gives on the CPU
        bl = self.builder
        to = scalar_type(target)
        info_min = -(2 ** (target.bits - 1)) if target.is_signed else 0
        info_max = 2 ** (target.bits - 1) - 1 if target.is_signed else 2**target.bits - 1
        low = ir.Constant(a.type, float(info_min))
        high = ir.Constant(a.type, float(info_max + 1))  # a power of two: exact
        convert = bl.fptosi if target.is_signed else bl.fptoui
        safe = bl.select(bl.fcmp_ordered(">=", a, low), a, low)
        safe = bl.select(bl.fcmp_ordered("<", safe, high), safe, ir.Constant(a.type, 0.0))
        value = convert(safe, to)
        value = bl.select(bl.fcmp_ordered(">=", a, high), self.const(target, info_max), value)
        value = bl.select(bl.fcmp_ordered("<", a, low), self.const(target, info_min), value)
        return bl.select(bl.fcmp_unordered("uno", a, a), ir.Constant(to, 0), value)


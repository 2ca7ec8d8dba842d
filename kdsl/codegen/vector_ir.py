"""A small builder of LLVM vector IR for the compiler's own math functions
(kdsl/codegen/math_*.py): splat constants, fused multiply-adds, polynomials, the bits of
floats as integers, selects. Every operation is generic LLVM IR, so one function body
serves every vector width and instruction set; nothing carries fast-math flags (range
reductions and special cases rely on IEEE behaviour)."""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from kdsl.codegen.llvm_types import f32, f64


class VectorBuilder:
    """Emits lane-wise operations on ``lanes`` floats of type ``t`` (f32 or f64) and on
    the integers of the same width."""

    def __init__(self, builder: ir.IRBuilder, t: ir.Type, lanes: int,
                 native_ldexp: bool = False) -> None:
        """``native_ldexp``: LLVM lowers ``llvm.ldexp`` of these vectors to one
        instruction (AVX-512's vscalefps); it would call the C library per lane else."""
        assert t in (f32, f64)
        self.native_ldexp = native_ldexp
        self.b = builder
        self.t = t
        self.lanes = lanes
        self.single = t == f32
        self.bits = 32 if self.single else 64
        self.int_t = ir.IntType(self.bits)
        self.vf = ir.VectorType(t, lanes)
        self.vi = ir.VectorType(self.int_t, lanes)
        self.vb = ir.VectorType(ir.IntType(1), lanes)
        self.module: ir.Module = builder.module

    # --- constants --------------------------------------------------------------------

    def f(self, value: float) -> ir.Constant:
        """A float splat (exact for a value representable in the lane type)."""
        return ir.Constant(self.vf, [ir.Constant(self.t, float(value))] * self.lanes)

    def i(self, value: int) -> ir.Constant:
        """An integer splat (two's complement of a negative value)."""
        return ir.Constant(self.vi, [ir.Constant(self.int_t, int(value))] * self.lanes)

    def from_bits(self, pattern: int) -> ir.Value:
        """The float whose bits are ``pattern`` (a NaN or an exact binary constant)."""
        return self.b.bitcast(self.i(pattern), self.vf)

    # --- arithmetic -------------------------------------------------------------------

    def _intrinsic(self, name: str, arity: int) -> ir.Function:
        suffix = f"v{self.lanes}{'f32' if self.single else 'f64'}"
        full = f"llvm.{name}.{suffix}"
        existing = self.module.globals.get(full)
        if isinstance(existing, ir.Function):
            return existing
        return ir.Function(self.module, ir.FunctionType(self.vf, [self.vf] * arity), full)

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        """a * b + c, rounded once."""
        return self.b.call(self._intrinsic("fma", 3), [a, b, c])

    def add(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fadd(a, b)

    def sub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fsub(a, b)

    def mul(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fmul(a, b)

    def div(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fdiv(a, b)

    def abs(self, a: ir.Value) -> ir.Value:
        return self.b.call(self._intrinsic("fabs", 1), [a])

    def sqrt(self, a: ir.Value) -> ir.Value:
        return self.b.call(self._intrinsic("sqrt", 1), [a])

    def copysign(self, magnitude: ir.Value, sign: ir.Value) -> ir.Value:
        return self.b.call(self._intrinsic("copysign", 2), [magnitude, sign])

    def horner(self, x: ir.Value, coefficients: Sequence[float]) -> ir.Value:
        """c0 + c1 x + c2 x^2 + ... by Horner's rule (one FMA per degree)."""
        *lower, top = coefficients
        acc: ir.Value = self.f(top)
        for c in reversed(lower):
            acc = self.fma(acc, x, self.f(c))
        return acc

    def estrin(self, x: ir.Value, x2: ir.Value, coefficients: Sequence[float]) -> ir.Value:
        """The same polynomial in pairs (c0 + c1 x) + x^2 (c2 + c3 x) + ...: a shorter
        chain of dependent operations, so vector units overlap more of it."""
        pairs = [self.fma(self.f(coefficients[k + 1]), x, self.f(coefficients[k]))
                 if k + 1 < len(coefficients) else self.f(coefficients[k])
                 for k in range(0, len(coefficients), 2)]
        return self.horner_values(x2, pairs)

    def horner_values(self, x: ir.Value, values: Sequence[ir.Value]) -> ir.Value:
        *lower, acc = values
        for v in reversed(lower):
            acc = self.fma(acc, x, v)
        return acc

    def shifter(self) -> ir.Constant:
        """1.5 * 2^23 (2^52): adding it rounds away a float's fraction, leaving the
        integer in the low bits."""
        return self.f(1.5 * 2.0 ** (23 if self.single else 52))

    def round_to_integer(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(n, integer bits) for |x| < 2^22 (2^51): the nearest integer n as a float, and
        a value whose low integer bits are n (no rounding instruction needed)."""
        shifter = self.shifter()
        shifted = self.add(x, shifter)
        return self.sub(shifted, shifter), self.as_int(shifted)

    # --- comparisons and selects ------------------------------------------------------

    def lt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered(">", a, b)

    def eq(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("==", a, b)

    def is_nan(self, a: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(cond, a, b)

    def clamp(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        """x limited to [lo, hi]; a NaN stays NaN (vmaxps/vminps with the operands in
        the order that returns it)."""
        x = self.select(self.lt(x, self.f(lo)), self.f(lo), x)
        return self.select(self.gt(x, self.f(hi)), self.f(hi), x)

    # --- bits -------------------------------------------------------------------------

    def as_int(self, x: ir.Value) -> ir.Value:
        return self.b.bitcast(x, self.vi)

    def as_float(self, x: ir.Value) -> ir.Value:
        return self.b.bitcast(x, self.vf)

    def to_float(self, n: ir.Value) -> ir.Value:
        """A signed integer vector converted to floats."""
        return self.b.sitofp(n, self.vf)

    def iadd(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.add(a, b)

    def isub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.sub(a, b)

    def shl(self, a: ir.Value, n: int) -> ir.Value:
        return self.b.shl(a, self.i(n))

    def ashr(self, a: ir.Value, n: int) -> ir.Value:
        return self.b.ashr(a, self.i(n))

    def and_(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.and_(a, b)

    def xor(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.xor(a, b)

    def pow2(self, n: ir.Value) -> ir.Value:
        """2^n for integer lanes n within the normal exponent range."""
        mantissa_bits = 23 if self.single else 52
        bias = 127 if self.single else 1023
        return self.as_float(self.shl(self.iadd(n, self.i(bias)), mantissa_bits))

    def ldexp(self, x: ir.Value, n: ir.Value) -> ir.Value:
        """x 2^n for integer lanes n within twice the exponent range (-300 to 300 for
        float32), rounded once where the result is denormal: one instruction where the
        host has it, else two normal factors 2^h 2^(n-h)."""
        if self.native_ldexp:
            vi32 = ir.VectorType(ir.IntType(32), self.lanes)
            suffix = f"v{self.lanes}{'f32' if self.single else 'f64'}.v{self.lanes}i32"
            name = f"llvm.ldexp.{suffix}"
            fn = self.module.globals.get(name)
            if not isinstance(fn, ir.Function):
                fn = ir.Function(self.module, ir.FunctionType(self.vf, [self.vf, vi32]), name)
            exponent = n if self.single else self.b.trunc(n, vi32)
            return self.b.call(fn, [x, exponent])
        h = self.ashr(n, 1)
        return self.mul(self.mul(x, self.pow2(h)), self.pow2(self.isub(n, h)))

    def any(self, mask: ir.Value) -> ir.Value:
        """Whether any lane of an i1 vector is set (one i1)."""
        packed = self.b.bitcast(mask, ir.IntType(self.lanes))
        return self.b.icmp_unsigned("!=", packed, ir.Constant(ir.IntType(self.lanes), 0))

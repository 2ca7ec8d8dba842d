"""LLVM lowering of scalar arithmetic, comparisons, casts and math, with Python semantics
(floor division and modulo round toward negative infinity; integer division by zero
gives 0 rather than trapping)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import f32, f64, i1, scalar_type
from kdsl.ir.math_builtins import MATH_FUNCTIONS, MathFunction

_ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def range_length(bl: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: ir.Value) -> ir.Value:
    """``len(range(start, stop, step))`` of i64 values (step != 0), without overflow at
    extreme bounds: the span and the step's magnitude are divided as unsigned numbers;
    a length over 2**63 - 1 saturates there."""
    t = start.type
    zero, one, largest = ir.Constant(t, 0), ir.Constant(t, 1), ir.Constant(t, 2**63 - 1)
    forward = bl.icmp_signed(">", step, zero)
    low, high = bl.select(forward, start, stop), bl.select(forward, stop, start)
    nonempty = bl.icmp_signed("<", low, high)
    magnitude = bl.select(forward, step, bl.neg(step))  # -INT64_MIN is 2**63 unsigned
    last = bl.udiv(bl.sub(bl.sub(high, low), one), magnitude)  # the last index
    saturated = bl.icmp_unsigned(">=", last, largest)
    length = bl.select(saturated, largest, bl.add(last, one))
    return bl.select(nonempty, length, zero)


# An array element wider than this (a 3x3 f64 matrix) is read and written one iteration
# at a time: a loop over such elements is not vectorised across iterations.
WIDE_ELEMENT_BYTES = 64


class ScalarEmitter:
    """Emits one scalar op at the builder's position."""

    vector_math = True  # fastmath: math calls that vectorise (see codegen.vector_math)
    nan_ignoring_intrinsics = True  # llvm.maxnum / llvm.minnum

    def __init__(self, module: ir.Module, fastmath: tuple[str, ...]) -> None:
        self.module = module
        self.fastmath = fastmath
        self.builder: ir.IRBuilder = None  # type: ignore[assignment]
        self.vector_math_calls = 0  # emitted so far (loops of several interleave more)
        self.wide_element_accesses = 0  # array elements over WIDE_ELEMENT_BYTES, so far

    # --- helpers --------------------------------------------------------------------

    def function(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, args), name)

    def intrinsic(self, name: str, t: ir.Type) -> ir.Function:
        suffix = "f32" if t == f32 else "f64" if t == f64 else f"i{t.width}"
        return self.function(f"llvm.{name}.{suffix}", t, [t])

    def const(self, t: T.ScalarType, value: Any) -> ir.Constant:
        lt = scalar_type(t)
        if t.is_bool:
            return ir.Constant(i1, int(bool(value)))
        if t.is_integer:
            v = int(value)
            if t.kind is T.ScalarKind.UINT and v >= 2 ** (t.bits - 1):
                v -= 2**t.bits
            return ir.Constant(lt, v)
        return ir.Constant(lt, float(value))

    # --- dispatch -----------------------------------------------------------------------

    def emit(self, name: str, t: T.ScalarType, operands: list[ir.Value], attrs: dict) -> ir.Value:
        method: Callable[..., ir.Value] | None = getattr(self, f"op_{name}", None)
        if attrs.get("ignore_nan") and t.is_float and self.nan_ignoring_intrinsics:
            return self.nan_ignoring(name, operands)
        if attrs.get("by_reciprocal") and t.is_float:
            return self.multiply_by_reciprocal(*operands)
        if method is None:
            return self.math_call(MATH_FUNCTIONS[name], t, operands)
        return method(t, *operands)

    def math_call(self, fn: MathFunction, t: T.ScalarType, operands: list[ir.Value]) -> ir.Value:
        """A math builtin lowered to a call of its intrinsic or C library function."""
        symbol = fn.cpu_symbol(t == T.f32)
        assert symbol is not None and t.is_float, (fn.name, t)
        lt = scalar_type(t)
        vectorised = self.vectorisable(fn.libm or fn.intrinsic or "", lt)
        if vectorised is not None:
            return self.builder.call(vectorised, operands, fastmath=self.fastmath)
        callee = self.function(symbol, lt, [lt] * len(operands))
        if fn.intrinsic is not None:
            return self.builder.call(callee, operands, fastmath=self.fastmath)
        return self.builder.call(callee, operands)

    def multiply_by_reciprocal(self, a: ir.Value, reciprocal: ir.Value) -> ir.Value:
        """``a * (1 / b)`` with ``1 / b`` computed once outside a loop: without
        reassociation, which would turn it back into a division inside the loop."""
        flags = tuple(flag for flag in self.fastmath if flag != "reassoc")
        return self.builder.fmul(a, reciprocal, flags=flags)

    def nan_ignoring(self, name: str, operands: list[ir.Value]) -> ir.Value:
        """``min``/``max`` with ``ignore_nan``: a NaN operand gives the other one (a
        reduction's combine whose accumulator is never NaN: it vectorises)."""
        a, b = operands
        suffix = "f32" if a.type == f32 else "f64"
        fn = self.function(f"llvm.{name}num.{suffix}", a.type, [a.type, a.type])
        return self.builder.call(fn, [a, b])

    def vectorisable(self, libm_name: str, t: ir.Type) -> ir.Function | None:
        """The scalar function with vector variants for a C library math function, or
        None (no fastmath, not on this host, or not a vectorised function)."""
        if not (self.vector_math and self.fastmath):
            return None
        from kdsl.codegen import vector_math  # imported by kernels that call math only

        if not vector_math.has_variants(libm_name):
            return None
        self.vector_math_calls += 1
        return vector_math.vectorisable_function(self.module, libm_name, t)

    # --- arithmetic ------------------------------------------------------------------

    def _binary(self, int_op: str, float_op: str, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        b_ = self.builder
        if t.is_float:
            return getattr(b_, float_op)(a, b, flags=self.fastmath)
        return getattr(b_, int_op)(a, b)

    def op_add(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self._binary("add", "fadd", t, a, b)

    def op_sub(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self._binary("sub", "fsub", t, a, b)

    def op_mul(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self._binary("mul", "fmul", t, a, b)

    def op_div(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.builder.fdiv(a, b, flags=self.fastmath)

    def _safe_divisor(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(b == 0, b == -1 for signed types, a divisor that cannot trap).

        x86 traps on division by zero and on INT_MIN / -1; both get defined results."""
        bl = self.builder
        zero = ir.Constant(b.type, 0)
        is_zero = bl.icmp_unsigned("==", b, zero)
        if t.is_signed:
            is_minus_one = bl.icmp_signed("==", b, ir.Constant(b.type, -1))
        else:
            is_minus_one = ir.Constant(i1, 0)
        unsafe = bl.or_(is_zero, is_minus_one)
        return is_zero, is_minus_one, bl.select(unsafe, ir.Constant(b.type, 1), b)

    def op_floordiv(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        bl = self.builder
        if t.is_float:
            return self._float_floordiv(a, b)
        is_zero, is_minus_one, d = self._safe_divisor(t, a, b)
        zero = ir.Constant(a.type, 0)
        if not t.is_signed:
            q = bl.udiv(a, d)
        else:
            q = bl.sdiv(a, d)
            r = bl.srem(a, d)
            signs_differ = bl.icmp_signed("!=", bl.icmp_signed("<", r, zero), bl.icmp_signed("<", d, zero))
            adjust = bl.and_(bl.icmp_signed("!=", r, zero), signs_differ)
            q = bl.sub(q, bl.zext(adjust, a.type))
            q = bl.select(is_minus_one, bl.neg(a), q)  # wraps for INT_MIN, as NumPy does
        return bl.select(is_zero, zero, q)

    def _float_floordiv(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """Python's float ``//``: floor((a - fmod(a, b)) / b), corrected as CPython does."""
        bl = self.builder
        zero = ir.Constant(a.type, 0.0)
        mod = bl.frem(a, b)
        div = bl.fdiv(bl.fsub(a, mod), b)
        signs_differ = bl.xor(bl.fcmp_ordered("<", mod, zero), bl.fcmp_ordered("<", b, zero))
        adjust = bl.and_(bl.fcmp_unordered("!=", mod, zero), signs_differ)
        div = bl.select(adjust, bl.fsub(div, ir.Constant(a.type, 1.0)), div)
        floor = bl.call(self.intrinsic("floor", a.type), [div])
        round_up = bl.fcmp_ordered(">", bl.fsub(div, floor), ir.Constant(a.type, 0.5))
        result = bl.select(round_up, bl.fadd(floor, ir.Constant(a.type, 1.0)), floor)
        # a zero quotient takes the sign of a / b; a zero divisor gives a / b (inf or nan)
        signed_zero = bl.call(self.function(f"llvm.copysign.{'f32' if a.type == f32 else 'f64'}",
                                            a.type, [a.type, a.type]), [zero, bl.fdiv(a, b)])
        result = bl.select(bl.fcmp_ordered("==", div, zero), signed_zero, result)
        return bl.select(bl.fcmp_ordered("==", b, zero), bl.fdiv(a, b), result)

    def op_mod(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        bl = self.builder
        if t.is_float:
            r = bl.frem(a, b)
            zero = ir.Constant(a.type, 0.0)
            signs_differ = bl.xor(bl.fcmp_ordered("<", r, zero), bl.fcmp_ordered("<", b, zero))
            adjust = bl.and_(bl.fcmp_unordered("!=", r, zero), signs_differ)
            # Python: a zero remainder takes the sign of b (-0.0 % 5.0 == 0.0)
            signed_zero = bl.call(self.function(f"llvm.copysign.{'f32' if a.type == f32 else 'f64'}",
                                                a.type, [a.type, a.type]), [zero, b])
            r = bl.select(bl.fcmp_ordered("==", r, zero), signed_zero, r)
            return bl.select(adjust, bl.fadd(r, b), r)
        is_zero, is_minus_one, d = self._safe_divisor(t, a, b)
        zero = ir.Constant(a.type, 0)
        if not t.is_signed:
            return bl.select(is_zero, zero, bl.urem(a, d))
        r = bl.srem(a, d)
        signs_differ = bl.icmp_signed("!=", bl.icmp_signed("<", r, zero), bl.icmp_signed("<", d, zero))
        adjust = bl.and_(bl.icmp_signed("!=", r, zero), signs_differ)
        r = bl.select(adjust, bl.add(r, d), r)
        return bl.select(bl.or_(is_zero, is_minus_one), zero, r)

    def op_pow(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        if t.is_float:
            vectorised = self.vectorisable("pow", a.type)
            if vectorised is not None:
                return self.builder.call(vectorised, [a, b], fastmath=self.fastmath)
            fn = self.function(f"llvm.pow.{'f32' if t == T.f32 else 'f64'}", a.type, [a.type, a.type])
            return self.builder.call(fn, [a, b])
        return self._integer_power(a, b)

    def _integer_power(self, base: ir.Value, exponent: ir.Value) -> ir.Value:
        """Exponentiation by squaring; a negative exponent gives 0 (NumPy's choice)."""
        bl = self.builder
        ty = base.type
        entry = bl.block
        loop = bl.append_basic_block("pow.loop")
        done = bl.append_basic_block("pow.done")
        bl.branch(loop)
        bl.position_at_end(loop)
        result = bl.phi(ty)
        b = bl.phi(ty)
        e = bl.phi(ty)
        one, zero = ir.Constant(ty, 1), ir.Constant(ty, 0)
        odd = bl.icmp_unsigned("!=", bl.and_(e, one), zero)
        new_result = bl.select(odd, bl.mul(result, b), result)
        new_b = bl.mul(b, b)
        new_e = bl.lshr(e, one)
        more = bl.icmp_signed(">", new_e, zero)
        result.add_incoming(one, entry)
        b.add_incoming(base, entry)
        e.add_incoming(exponent, entry)
        result.add_incoming(new_result, loop)
        b.add_incoming(new_b, loop)
        e.add_incoming(new_e, loop)
        bl.cbranch(more, loop, done)
        bl.position_at_end(done)
        negative = bl.icmp_signed("<", exponent, zero)
        return bl.select(negative, zero, new_result)

    def op_min(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.builder.select(self._less(t, b, a), b, a)

    def op_max(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.builder.select(self._less(t, a, b), b, a)

    def op_wrap_index(self, t: T.ScalarType, index: ir.Value, size: ir.Value) -> ir.Value:
        negative = self.builder.icmp_signed("<", index, ir.Constant(index.type, 0))
        return self.builder.select(negative, self.builder.add(index, size), index)

    def _less(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        if t.is_float:
            return self.builder.fcmp_ordered("<", a, b)
        if t.is_signed:
            return self.builder.icmp_signed("<", a, b)
        return self.builder.icmp_unsigned("<", a, b)

    def op_bit_and(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.builder.and_(a, b)

    def op_bit_or(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.builder.or_(a, b)

    def op_bit_xor(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.builder.xor(a, b)

    def _shift_out_of_range(self, b: ir.Value) -> ir.Value:
        """A shift by the bit width or more (or a negative amount): LLVM leaves it
        undefined; NumPy shifts every bit out."""
        return self.builder.icmp_unsigned(">=", b, ir.Constant(b.type, b.type.width))

    def op_shl(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        out = self._shift_out_of_range(b)
        safe = self.builder.select(out, ir.Constant(b.type, 0), b)
        return self.builder.select(out, ir.Constant(a.type, 0), self.builder.shl(a, safe))

    def op_shr(self, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        out = self._shift_out_of_range(b)
        bl = self.builder
        if t.is_signed:
            safe = bl.select(out, ir.Constant(b.type, b.type.width - 1), b)
            return bl.ashr(a, safe)  # all sign bits, as NumPy gives
        safe = bl.select(out, ir.Constant(b.type, 0), b)
        return bl.select(out, ir.Constant(a.type, 0), bl.lshr(a, safe))

    # --- unary ----------------------------------------------------------------------

    def op_neg(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        if t.is_float:
            return self.builder.fsub(ir.Constant(a.type, -0.0), a, flags=self.fastmath)
        return self.builder.neg(a)

    def op_abs(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        if t.is_float:
            return self.builder.call(self.intrinsic("fabs", a.type), [a])
        if not t.is_signed:
            return a
        negative = self.builder.icmp_signed("<", a, ir.Constant(a.type, 0))
        return self.builder.select(negative, self.builder.neg(a), a)

    def op_floor(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        if not t.is_float:
            return a
        return self.builder.call(self.intrinsic("floor", a.type), [a], fastmath=self.fastmath)

    def op_ceil(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        if not t.is_float:
            return a
        return self.builder.call(self.intrinsic("ceil", a.type), [a], fastmath=self.fastmath)

    # --- math builtins expanded into IR (the others are calls: see math_call) ----------

    def op_sign(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        """-1, 0 or 1 (NumPy's np.sign: -0.0 gives 0.0, NaN gives NaN)."""
        bl = self.builder
        zero = self.const(t, 0)
        result = bl.select(self.compare("eq", t, a, zero), zero, a)  # NaN stays NaN
        if t.is_signed or t.is_float:
            result = bl.select(self.compare("lt", t, a, zero), self.const(t, -1), result)
        return bl.select(self.compare("gt", t, a, zero), self.const(t, 1), result)

    def op_isnan(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        if not t.is_float:
            return ir.Constant(i1, 0)
        return self.builder.fcmp_unordered("uno", a, a)

    def op_isinf(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        if not t.is_float:
            return ir.Constant(i1, 0)
        magnitude = self.builder.call(self.intrinsic("fabs", a.type), [a])
        return self.builder.fcmp_ordered("==", magnitude, ir.Constant(a.type, math.inf))

    def op_isfinite(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        if not t.is_float:
            return ir.Constant(i1, 1)
        magnitude = self.builder.call(self.intrinsic("fabs", a.type), [a])
        return self.builder.fcmp_ordered("<", magnitude, ir.Constant(a.type, math.inf))

    def op_logical_not(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        return self.builder.xor(a, ir.Constant(i1, 1))

    def op_bit_not(self, t: T.ScalarType, a: ir.Value) -> ir.Value:
        return self.builder.not_(a)

    # --- comparisons and casts -----------------------------------------------------

    def compare(self, name: str, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        symbol = _ICMP[name]
        if t.is_float:
            if name == "ne":
                return self.builder.fcmp_unordered(symbol, a, b)
            return self.builder.fcmp_ordered(symbol, a, b)
        if t.is_signed:
            return self.builder.icmp_signed(symbol, a, b)
        return self.builder.icmp_unsigned(symbol, a, b)

    def cast(self, source: T.ScalarType, target: T.ScalarType, a: ir.Value) -> ir.Value:
        bl = self.builder
        to = scalar_type(target)
        if source == target:
            return a
        if target.is_bool:
            if source.is_float:
                return bl.fcmp_unordered("!=", a, ir.Constant(a.type, 0.0))
            return bl.icmp_unsigned("!=", a, ir.Constant(a.type, 0))
        if source.is_bool:
            return bl.uitofp(a, to) if target.is_float else bl.zext(a, to)
        if source.is_float and target.is_float:
            return bl.fptrunc(a, to) if source.bits > target.bits else bl.fpext(a, to)
        if source.is_float:
            name = "fptosi" if target.is_signed else "fptoui"
            sat = self.function(
                f"llvm.{name}.sat.i{to.width}.{'f32' if source == T.f32 else 'f64'}", to, [a.type]
            )
            return bl.call(sat, [a])
        if target.is_float:
            return bl.sitofp(a, to) if source.is_signed else bl.uitofp(a, to)
        if source.bits > target.bits:
            return bl.trunc(a, to)
        if source.bits < target.bits:
            return bl.sext(a, to) if source.is_signed else bl.zext(a, to)
        return a

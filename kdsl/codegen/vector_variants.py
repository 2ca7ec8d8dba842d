"""The compiler's own vector math functions, offered to LLVM's loop vectoriser as vector
variants of the scalar math calls and inlined once it has vectorised.

A fastmath math call is a call of ``kdsl.vm.<symbol>`` (kdsl/codegen/vector_math.py), whose
``vector-function-abi-variant`` attribute names vector functions of the host's widths
(``_ZGV_LLVM_N16v_kdsl.vm.expf(kdsl.vm.expf.v16)``: 16 floats in 512 bits). For the
functions of ``OWN`` they are only declared while LLVM optimises; once it has vectorised
(``inline_variants``), the variants the loops call are defined from generic LLVM vector
IR (math_exp_log.py, math_trig.py, math_hyperbolic.py: range reduction, minimax
polynomials with FMA, selects for the special cases, as XLA does on the CPU), inlined
and deleted. The loop body is then straight vector code that the instruction scheduler
interleaves, with no calls, no register spills around calls and no table lookups. Where
the C library's libmvec has a variant too, ``PREFERRED`` names the functions whose own
version measured faster or as fast (benchmarks/vector_math.py: ``cosh`` twice as fast,
float32 ``tan`` even; not float64 ``tan``, nor the float32 inverse trigonometric functions
and ``erf``, computed in float64 lanes; float64 ``log1p`` measured slower and is not
among them); the others keep libmvec.

``KDSL_VECTOR_MATH=libmvec`` or ``=own`` overrides the choice (benchmarks compare both).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from llvmlite import ir

from kdsl.codegen import (
    math_error_function,
    math_exp_log,
    math_hyperbolic,
    math_inverse_trig,
    math_trig,
)
from kdsl.codegen.llvm_types import f32, f64
from kdsl.codegen.vector_ir import VectorBuilder
from kdsl.records import dataclass

PREFIX = "kdsl.vm."
_FALLBACK_SUFFIX = ".lanes"

Emitter = Callable[[VectorBuilder, list[ir.Value], "math_trig.Fallback"], ir.Value]


@dataclass(frozen=True)
class OwnFunction:
    emit: Emitter
    type: ir.Type
    arity: int = 1


def _unary(fn: Callable[[VectorBuilder, ir.Value], ir.Value], t: ir.Type = f32) -> OwnFunction:
    return OwnFunction(lambda v, args, fallback: fn(v, args[0]), t)


def _with_fallback(fn: Callable[[VectorBuilder, ir.Value, math_trig.Fallback], ir.Value],
                   t: ir.Type = f32) -> OwnFunction:
    return OwnFunction(lambda v, args, fallback: fn(v, args[0], fallback), t)


# by C library symbol (the float functions end in "f")
OWN: dict[str, OwnFunction] = {
    "expf": _unary(math_exp_log.exp),
    "logf": _unary(math_exp_log.log),
    "log2f": _unary(math_exp_log.log2),
    "log10f": _unary(math_exp_log.log10),
    "exp2f": _unary(math_exp_log.exp2),
    "exp2": _unary(math_exp_log.exp2, f64),
    "log": _unary(math_exp_log.log, f64),
    "log2": _unary(math_exp_log.log2, f64),
    "log10": _unary(math_exp_log.log10, f64),
    "expm1f": _unary(math_exp_log.expm1_whole_range),
    "expm1": _unary(math_exp_log.expm1_whole_range, f64),
    "log1pf": _unary(math_exp_log.log1p),
    "tanhf": _unary(math_hyperbolic.tanh),
    "sinf": _with_fallback(math_trig.sin),
    "cosf": _with_fallback(math_trig.cos),
    "exp": _unary(math_exp_log.exp, f64),
    "tanh": _unary(math_hyperbolic.tanh, f64),
    "sin": _with_fallback(math_trig.sin, f64),
    "cos": _with_fallback(math_trig.cos, f64),
    "tanf": _with_fallback(math_trig.tan),
    "tan": _with_fallback(math_trig.tan, f64),
    "sinhf": _unary(math_hyperbolic.sinh),
    "sinh": _unary(math_hyperbolic.sinh, f64),
    "coshf": _unary(math_hyperbolic.cosh),
    "cosh": _unary(math_hyperbolic.cosh, f64),
    "atanf": _unary(math_inverse_trig.atan),
    "asinf": _unary(math_inverse_trig.asin),
    "acosf": _unary(math_inverse_trig.acos),
    "atan2f": OwnFunction(lambda v, args, fallback: math_inverse_trig.atan2(v, *args), f32, 2),
    "erff": _unary(math_error_function.erf),
}
# where libmvec has the function too: ours measured as fast or faster (benchmarks/vector_math.py)
# the float32 inverse trigonometric functions and erf compute in float64 lanes: about 2-3
# times slower than libmvec, and used only where it is missing; float64 tan measured about
# 10% slower
PREFERRED = frozenset(OWN) - {"atanf", "asinf", "acosf", "atan2f", "erff", "tan"}


@functools.cache
def _host_lane_bits() -> tuple[int, ...]:
    """Vector register widths in bits the host runs with FMA (none without FMA: the
    polynomials would call a software fma)."""
    from kdsl.codegen.cpu import host_cpu_features

    features = host_cpu_features()
    if not features.get("fma"):
        return ()
    widths = [128]
    if features.get("avx2"):
        widths.append(256)
    if features.get("avx512f"):
        widths.append(512)
    return tuple(widths)


@functools.cache
def _native_ldexp(bits: int) -> bool:
    """Whether vectors of ``bits`` scale by powers of two in one instruction here
    (AVX-512's vscalefps; 128- and 256-bit vectors need AVX-512VL)."""
    from kdsl.codegen.cpu import host_cpu_features

    features = host_cpu_features()
    return bool(features.get("avx512f") and (bits == 512 or features.get("avx512vl")))


def available(symbol: str) -> bool:
    return symbol in OWN and bool(_host_lane_bits())


def chosen(symbol: str, libmvec_has_it: bool) -> bool:
    """Whether ``symbol`` vectorises with the compiler's own variants here."""
    if not available(symbol):
        return False
    choice = os.environ.get("KDSL_VECTOR_MATH", "")
    if choice == "libmvec" and libmvec_has_it:
        return False
    if choice == "own" or not libmvec_has_it:
        return True
    return symbol in PREFERRED


KEEP_ALIVE = PREFIX + "variants"


def declare_variants(module: ir.Module, symbol: str, t: ir.Type) -> list[str]:
    """Declares ``kdsl.vm.<symbol>.v<lanes>`` for each host width, kept alive through the
    optimisation pipeline (``kdsl.vm.variants``); returns the
    ``vector-function-abi-variant`` entries naming them. Their bodies are added after
    vectorisation, for the widths the vectoriser used (``inline_variants``)."""
    own = OWN[symbol]
    assert t in (f32, f64)
    lane_bits = 32 if t == f32 else 64
    entries, declared = [], []
    for bits in _host_lane_bits():
        lanes = bits // lane_bits
        name = f"{PREFIX}{symbol}.v{lanes}"
        fn = module.globals.get(name)
        if not isinstance(fn, ir.Function):
            vt = ir.VectorType(t, lanes)
            fn = ir.Function(module, ir.FunctionType(vt, [vt] * own.arity), name)
        declared.append(fn)
        entries.append(f"_ZGV_LLVM_N{lanes}{'v' * own.arity}_{PREFIX}{symbol}({name})")
    _keep_alive(module, declared)
    return entries


def _keep_alive(module: ir.Module, functions: list[ir.Function]) -> None:
    """Adds ``functions`` to the external array ``kdsl.vm.variants`` (made internal, so
    deleted, once vectorisation is done)."""
    ptr = ir.PointerType()
    keep = module.globals.get(KEEP_ALIVE)
    members: list[ir.Constant] = []
    if keep is None:
        keep = ir.GlobalVariable(module, ir.ArrayType(ptr, 0), KEEP_ALIVE)
    elif keep.initializer is not None:
        members = list(keep.initializer.constant)
    members += [f for f in functions if f not in members]
    array_type = ir.ArrayType(ptr, len(members))
    keep.value_type = array_type
    keep.initializer = ir.Constant(array_type, members)


def _define(module: ir.Module, own: OwnFunction, symbol: str, name: str, t: ir.Type,
            lanes: int) -> None:
    vt = ir.VectorType(t, lanes)
    fn = ir.Function(module, ir.FunctionType(vt, [vt] * own.arity), name)
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    v = VectorBuilder(builder, t, lanes, native_ldexp=_native_ldexp(lanes * (32 if t == f32 else 64)))

    def fallback(x: ir.Value, fast: ir.Value, mask: ir.Value) -> ir.Value:
        lanes_fn = _lanes_function(module, symbol, t, lanes)
        packed = builder.bitcast(mask, ir.IntType(lanes))
        before = builder.block
        with builder.if_then(v.any(mask), likely=False):
            fixed = builder.call(lanes_fn, [x, fast, packed])
            fixed_block = builder.block
        result = builder.phi(vt)
        result.add_incoming(fast, before)
        result.add_incoming(fixed, fixed_block)
        return result

    builder.ret(own.emit(v, list(fn.args), fallback))


def _lanes_function(module: ir.Module, symbol: str, t: ir.Type, lanes: int) -> ir.Function:
    """``kdsl.vm.<symbol>.v<lanes>.lanes(x, y, mask)``: y with the lanes of the mask
    replaced by the C library's scalar results (out of line: rarely called)."""
    name = f"{PREFIX}{symbol}.v{lanes}{_FALLBACK_SUFFIX}"
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    vt = ir.VectorType(t, lanes)
    mask_t = ir.IntType(lanes)
    fn = ir.Function(module, ir.FunctionType(vt, [vt, vt, mask_t]), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    fn.attributes.add("nounwind")
    libm = module.globals.get(symbol)
    if not isinstance(libm, ir.Function):
        libm = ir.Function(module, ir.FunctionType(t, [t]), symbol)
    x, y, mask = fn.args
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    for lane in range(lanes):
        bit = builder.and_(builder.lshr(mask, ir.Constant(mask_t, lane)), ir.Constant(mask_t, 1))
        before = builder.block
        with builder.if_then(builder.trunc(bit, ir.IntType(1))):
            index = ir.Constant(ir.IntType(32), lane)
            value = builder.call(libm, [builder.extract_element(x, index)])
            replaced = builder.insert_element(y, value, index)
            then_block = builder.block
        merged = builder.phi(vt)
        merged.add_incoming(y, before)
        merged.add_incoming(replaced, then_block)
        y = merged
    builder.ret(y)
    return fn


def inline_variants(module: Any, target_machine: Any, context: Any) -> None:
    """After the optimisation pipeline (``module``: an llvmlite module): defines the own
    vector variants the vectoriser called, inlines them and deletes what is left."""
    try:
        keep = module.get_global_variable(KEEP_ALIVE)
    except NameError:
        return
    from kdsl.codegen.cpu import llvm

    b = llvm()
    pass_builder = b.create_pass_builder(target_machine, b.create_pipeline_tuning_options(speed_level=3))
    keep.linkage = "internal"
    manager = b.create_new_module_pass_manager()
    manager.add_global_dead_code_eliminate_pass()
    manager.run(module, pass_builder)  # deletes the array and the variants not called
    called = [f.name for f in module.functions if f.is_declaration and f.name.startswith(PREFIX)]
    if not called:
        return
    definitions = ir.Module(name="kdsl.vm")
    for name in called:
        symbol, lanes = name[len(PREFIX):].rsplit(".v", 1)
        _define(definitions, OWN[symbol], symbol, name, OWN[symbol].type, int(lanes))
    parsed = b.parse_assembly(str(definitions), context=context)
    parsed.triple, parsed.data_layout = module.triple, module.data_layout
    module.link_in(parsed)
    for name in called:
        module.get_function(name).linkage = "internal"
    manager = b.create_new_module_pass_manager()
    manager.add_always_inliner_pass()
    manager.add_global_dead_code_eliminate_pass()
    manager.run(module, pass_builder)

"""Math functions that vectorise on the CPU, through LLVM's loop and SLP vectorisers.

A math builtin in a ``fastmath`` kernel calls a small scalar function of the module's own,
``kdsl.vm.<libm name>``, which calls the C library's scalar function and carries the
``vector-function-abi-variant`` attribute naming vector variants of 2 to 16 lanes that
the host's instruction set can run. The vectoriser replaces the call by the variant of
the vector width it picks; the scalar remainder of a loop and code outside loops call
the C library as before. A scalar name of our own is needed because LLVM would turn
``expf`` into ``llvm.exp`` (which has no vector library here) or, knowing that ``expf``
may set ``errno``, refuse to vectorise it.

The variants are either the compiler's own (codegen/vector_variants.py: range reduction
and minimax polynomials emitted as vector IR and inlined after vectorisation, for the
functions where they measured faster) or glibc's libmvec (``_ZGVeN16v_expf``: AVX-512,
16 floats), the range-reduction-plus-minimax implementations of Intel's SVML lineage,
documented within 4 ulp, with special-case paths (NaN, infinities, denormals, huge
sin/cos arguments through the scalar function) tested by glibc. Both are tested within
4 ulp over all inputs (tests/cpu/test_cpu_vector_math.py). All of the math table's
transcendental functions have libmvec variants (glibc 2.35 or later).

A loop body with several math calls is interleaved (``interleave_math_loop``): a chain
of polynomials is latency-bound otherwise.

``fastmath=False`` keeps the scalar C library calls, whose results do not depend on
vectorisation. Where neither libmvec nor the own variants are available the attribute is
left out and the code is what it was: scalar calls. The CUDA back end keeps libdevice.
"""

from __future__ import annotations

import ctypes
import functools
import platform

from llvmlite import ir

from kdsl.codegen import vector_variants
from kdsl.codegen.llvm_types import f32, f64

# the libm functions with libmvec variants (the float one adds "f"), by arity
_VECTORISED: dict[str, int] = {
    name: 1 for name in (
        "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp",
        "exp2", "expm1", "log", "log2", "log10", "log1p", "erf", "erfc",
    )
} | {"pow": 2, "atan2": 2, "hypot": 2}

# libmvec's instruction-set letters by the LLVM feature each needs, and the vector
# register width in bits
_ISAS = (("b", "sse2", 128), ("d", "avx2", 256), ("e", "avx512f", 512))

SCALAR_PREFIX = "kdsl.vm."


@functools.cache
def library_path() -> str | None:
    """libmvec's file name where it loads on this system (glibc on Linux), else None."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    name = "libmvec.so.1"
    try:
        library = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)  # global: for the JIT too
        library["_ZGVdN8vv_atan2f"]  # glibc 2.35: the whole table
    except (OSError, AttributeError):
        return None
    return name


@functools.cache
def instruction_sets() -> tuple[tuple[str, int], ...]:
    """(libmvec letter, register bits) for each vector instruction set the host runs."""
    if library_path() is None:
        return ()
    from kdsl.codegen.cpu import host_cpu_features

    features = host_cpu_features()
    return tuple((letter, bits) for letter, feature, bits in _ISAS if features.get(feature))


def available() -> bool:
    return bool(instruction_sets())


def has_variants(libm_name: str) -> bool:
    """Whether ``libm_name`` (the double function's name) vectorises here, through
    libmvec or the compiler's own variants (codegen.vector_variants)."""
    if libm_name not in _VECTORISED:
        return False
    return available() or any(vector_variants.available(libm_name + suffix) for suffix in ("", "f"))


def abi_variants(libm_name: str, single: bool) -> tuple[str, ...]:
    """The ``vector-function-abi-variant`` entries of ``kdsl.vm.<name>``."""
    arity = _VECTORISED[libm_name]
    symbol = libm_name + ("f" if single else "")
    lanes_bits = 32 if single else 64
    entries = []
    for letter, bits in instruction_sets():
        lanes = bits // lanes_bits
        mangled = f"_ZGV{letter}N{lanes}{'v' * arity}"
        entries.append(f"{mangled}_{SCALAR_PREFIX}{symbol}({mangled}_{symbol})")
    return tuple(entries)


class _StringAttributes(ir.values.FunctionAttributes):
    """Function attributes that also print LLVM string attributes (``"key"="value"``)."""

    def __init__(self, strings: list[str]) -> None:
        super().__init__(["nounwind", "readnone", "noinline"])
        self.strings = strings

    def _to_list(self, ret_type: ir.Type) -> list[str]:
        return super()._to_list(ret_type) + ["willreturn"] + self.strings


def vectorisable_function(module: ir.Module, libm_name: str, t: ir.Type) -> ir.Function:
    """``kdsl.vm.<symbol>``: calls the C library's function and names its vector
    variants, the compiler's own (codegen.vector_variants) or libmvec's; defined once per
    module, with libmvec's declarations kept alive until the vectoriser has run
    (``llvm.compiler.used``)."""
    single = t == f32
    assert t in (f32, f64)
    symbol = libm_name + ("f" if single else "")
    name = SCALAR_PREFIX + symbol
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    arity = _VECTORISED[libm_name]
    fnty = ir.FunctionType(t, [t] * arity)
    libm = module.globals.get(symbol)
    if not isinstance(libm, ir.Function):
        libm = ir.Function(module, fnty, symbol)
    own = vector_variants.chosen(symbol, libmvec_has_it=available())
    if own:
        variants = tuple(vector_variants.declare_variants(module, symbol, t))
    else:
        variants = abi_variants(libm_name, single)
    wrapper = ir.Function(module, fnty, name)
    wrapper.linkage = "internal"
    wrapper.attributes = _StringAttributes(
        [f'"vector-function-abi-variant"="{",".join(variants)}"'] if variants else [])
    builder = ir.IRBuilder(wrapper.append_basic_block("entry"))
    builder.ret(builder.call(libm, list(wrapper.args), tail=True))
    if not own:
        _declare_libmvec(module, variants, t, arity)
    return wrapper


def _declare_libmvec(module: ir.Module, variants: tuple[str, ...], t: ir.Type, arity: int) -> None:
    """Declares libmvec's variants, kept alive until the vectoriser has run."""
    used = []
    for entry in variants:
        vector_name = entry[entry.index("(") + 1 : -1]
        lanes = int(vector_name[6:].split("v", 1)[0])  # _ZGVeN16v...
        vt = ir.VectorType(t, lanes)
        declared = module.globals.get(vector_name)
        if not isinstance(declared, ir.Function):
            declared = ir.Function(module, ir.FunctionType(vt, [vt] * arity), vector_name)
        used.append(declared)
    _keep_alive(module, used)


def _keep_alive(module: ir.Module, functions: list[ir.Function]) -> None:
    """Adds ``functions`` to ``llvm.compiler.used`` (its array grows in place)."""
    ptr = ir.PointerType()
    used = module.globals.get("llvm.compiler.used")
    members: list[ir.Constant] = []
    if used is None:
        used = ir.GlobalVariable(module, ir.ArrayType(ptr, 0), "llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
    elif used.initializer is not None:
        members = list(used.initializer.constant)
    members += functions
    array_type = ir.ArrayType(ptr, len(members))
    used.value_type = array_type
    used.initializer = ir.Constant(array_type, members)


# the interleave count of a loop body with this many vectorised math calls or more
_INTERLEAVE = ((4, 8), (2, 4))


def interleave_hints(math_calls: int) -> tuple[str, ...]:
    """The loop hint (control_flow.loop_hints) of a loop whose body calls several
    vectorised math functions: their polynomials form one long chain of dependent
    operations per vector, which the out-of-order window covers only for a vector or two
    at a time; 4 or 8 independent vectors per iteration keep the vector units busy (a
    chain of four functions runs about twice as fast). LLVM's cost model would not
    interleave: the calls look expensive."""
    count = next((ic for calls, ic in _INTERLEAVE if math_calls >= calls), 0)
    return (f"interleave-{count}",) if count else ()

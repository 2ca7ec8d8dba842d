"""Math functions that vectorise on the CPU: glibc's vector math library (libmvec)
through LLVM's loop and SLP vectorisers.

A math builtin in a ``fastmath`` kernel calls a small scalar function of the module's own,
``kdsl.vm.<libm name>``, which calls the C library's scalar function and carries the
``vector-function-abi-variant`` attribute naming libmvec's 2-, 4-, 8- or 16-lane variants
(``_ZGVeN16v_expf``: AVX-512, 16 floats) that the host's instruction set can run. The
vectoriser replaces the call by the variant of the vector width it picks; the scalar
remainder of a loop and code outside loops call the C library as before. A scalar name of
our own is needed because LLVM would turn ``expf`` into ``llvm.exp`` (which has no vector
library here) or, knowing that ``expf`` may set ``errno``, refuse to vectorise it.

Why libmvec rather than polynomials emitted as IR: glibc's x86-64 variants are the
range-reduction-plus-minimax implementations (Intel's SVML lineage) that an emitter of our
own would reproduce, documented within 4 ulp, with special-case paths (NaN, infinities,
denormals, huge sin/cos arguments through the scalar function) already tested by glibc.
Measured on an AVX-512 host over 2^22 float32 on one thread: exp and log 15 times, sin,
tan, tanh and erf 60 to 120 times faster than the scalar calls, as fast as NumPy's own
AVX-512 loops, and at most 4 ulp off over all inputs (tests/cpu/test_cpu_vector_math.py);
polynomials of our own would have to match that and be tested as widely. All of the
math table's transcendental functions have variants (glibc 2.35 or later).

``fastmath=False`` keeps the scalar C library calls, whose results do not depend on
vectorisation. Where libmvec or the instruction set is missing the table is empty and
the code is what it was: scalar calls. The CUDA back end keeps libdevice.
"""

from __future__ import annotations

import ctypes
import functools
import platform

from llvmlite import ir

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
    from kdsl.codegen.cpu import llvm

    features = llvm().get_host_cpu_features()
    return tuple((letter, bits) for letter, feature, bits in _ISAS if features.get(feature))


def available() -> bool:
    return bool(instruction_sets())


def has_variants(libm_name: str) -> bool:
    """Whether ``libm_name`` (the double function's name) vectorises here."""
    return libm_name in _VECTORISED and available()


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
    """``kdsl.vm.<symbol>``: calls the C library's function and names its libmvec
    variants; defined once per module, with the variants' declarations kept alive until
    the vectoriser has run (``llvm.compiler.used``)."""
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
    variants = abi_variants(libm_name, single)
    wrapper = ir.Function(module, fnty, name)
    wrapper.linkage = "internal"
    wrapper.attributes = _StringAttributes(
        [f'"vector-function-abi-variant"="{",".join(variants)}"'])
    builder = ir.IRBuilder(wrapper.append_basic_block("entry"))
    builder.ret(builder.call(libm, list(wrapper.args), tail=True))
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
    return wrapper


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

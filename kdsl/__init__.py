"""kdsl: Python kernels compiled through a typed SSA IR to parallel native code."""

from kdsl.builtins import MATH as _MATH
from kdsl.builtins import (
    abs,
    atomic_add,
    atomic_max,
    atomic_min,
    atomic_sub,
    ceil,
    clamp,
    cross,
    determinant,
    dot,
    floor,
    inverse,
    length,
    max,
    mean,
    min,
    ndrange,
    normalize,
    outer,
    pow,
    prange,
    static,
    stop_gradient,
    sum,
    trace,
    transpose,
    where,
)
from kdsl.errors import CompileError
from kdsl.primitives import (
    NeighborGrid,
    argsort,
    cumsum,
    searchsorted,
    segment_sum,
    sort,
    sort_by_key,
)
from kdsl.random_numbers import randint, randn, random, seed
from kdsl.runtime.arrays import (
    DeviceArray,
    array,
    empty,
    from_dlpack,
    full,
    ones,
    synchronize,
    zeros,
    zeros_like,
)
from kdsl.runtime.cuda.device_array import CudaArray
from kdsl.runtime.cuda.errors import CudaError
from kdsl.runtime.gradient import check_grad, grad, value_and_grad
from kdsl.runtime.jvp import jvp
from kdsl.runtime.kernel import Func, Kernel, func, kernel
from kdsl.runtime.tape import Tape
from kdsl.runtime.threads import get_num_threads, set_num_threads
from kdsl.searching import argmax, argmin
from kdsl.types import (
    Array,
    bool_,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    ivec2,
    ivec3,
    ivec4,
    mat22,
    mat33,
    mat33d,
    mat44,
    u8,
    u16,
    u32,
    u64,
    vec2,
    vec2d,
    vec3,
    vec3d,
    vec4,
    vec4d,
)

__version__ = "0.1.0"

globals().update(_MATH)  # kd.sqrt, kd.erf, ...: kdsl/ir/math_builtins.py

__all__ = [
    "Array", "CompileError", "CudaArray", "CudaError", "DeviceArray", "Func", "Kernel", "abs", "argmax", "argmin", "array",
    "atomic_add", "atomic_max", "atomic_min", "atomic_sub", "bool_", "ceil", "clamp",
    "cross", "determinant", "dot", "empty", "f32", "f64", "floor", "from_dlpack", "full", "func", "get_num_threads",
    "i8", "i16", "i32", "i64", "inverse", "ivec2", "ivec3", "ivec4", "kernel", "length", "mat22",
    "mat33", "mat33d", "mat44", "max", "mean", "min", "ndrange", "normalize", "ones", "outer", "pow", "prange", "randint", "randn", "random",
    "seed", "set_num_threads", "synchronize", "static", "sum", "trace", "transpose", "u8", "u16", "u32", "u64",
    "vec2", "vec2d", "vec3", "vec3d", "vec4", "vec4d", "where", "zeros", "zeros_like", *_MATH,
]
__all__ += ["NeighborGrid", "argsort", "cumsum", "searchsorted", "segment_sum", "sort", "sort_by_key"]
__all__ += ["Tape", "check_grad", "grad", "jvp", "stop_gradient", "value_and_grad"]

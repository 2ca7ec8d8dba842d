"""The types of kdsl values: scalars, small vectors and matrices, arrays; promotion rules."""

from __future__ import annotations

import enum
from functools import cache
from typing import Any, Union

import numpy as np

from kdsl.records import dataclass


class ScalarKind(enum.Enum):
    BOOL = "bool"
    INT = "int"
    UINT = "uint"
    FLOAT = "float"


@dataclass(frozen=True)
class ScalarType:
    """A machine scalar. Calling it converts a Python value the way NumPy would."""

    name: str
    kind: ScalarKind
    bits: int

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(_NUMPY_NAMES[self.name])

    @property
    def itemsize(self) -> int:
        return 1 if self.kind is ScalarKind.BOOL else self.bits // 8

    @property
    def is_float(self) -> bool:
        return self.kind is ScalarKind.FLOAT

    @property
    def is_integer(self) -> bool:
        return self.kind in (ScalarKind.INT, ScalarKind.UINT)

    @property
    def is_signed(self) -> bool:
        return self.kind is ScalarKind.INT

    @property
    def is_bool(self) -> bool:
        return self.kind is ScalarKind.BOOL

    def __call__(self, value: Any) -> Any:
        """Plain-Python behaviour of a cast such as ``kd.f32(x)``: NumPy's, except that a
        float becomes an integer as compiled code converts it (saturating, NaN to 0)."""
        if self.is_integer:
            from kdsl.integer_conversion import convert_integer

            return convert_integer(self.numpy_dtype, value)
        return self.numpy_dtype.type(value)


bool_ = ScalarType("bool", ScalarKind.BOOL, 1)
i8 = ScalarType("i8", ScalarKind.INT, 8)
i16 = ScalarType("i16", ScalarKind.INT, 16)
i32 = ScalarType("i32", ScalarKind.INT, 32)
i64 = ScalarType("i64", ScalarKind.INT, 64)
u8 = ScalarType("u8", ScalarKind.UINT, 8)
u16 = ScalarType("u16", ScalarKind.UINT, 16)
u32 = ScalarType("u32", ScalarKind.UINT, 32)
u64 = ScalarType("u64", ScalarKind.UINT, 64)
f32 = ScalarType("f32", ScalarKind.FLOAT, 32)
f64 = ScalarType("f64", ScalarKind.FLOAT, 64)

SCALAR_TYPES = (bool_, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64)
_NUMPY_NAMES = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f32": "float32", "f64": "float64",
}
_BY_NUMPY = {np.dtype(v): next(t for t in SCALAR_TYPES if t.name == k) for k, v in _NUMPY_NAMES.items()}


def scalar_from_numpy(dtype: Any) -> ScalarType:
    """The kdsl scalar type of a NumPy dtype; TypeError if kdsl has none."""
    try:
        return _BY_NUMPY[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"kdsl has no scalar type for NumPy dtype {dtype}") from None


@dataclass(frozen=True)
class VectorType:
    """A small fixed-size vector of scalars (``kd.vec3`` is three f32)."""

    name: str
    element: ScalarType
    size: int

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.size,)

    @property
    def count(self) -> int:
        return self.size

    def __call__(self, *components: Any) -> Any:
        from kdsl.builtins import make_vector

        return make_vector(self, components)


@dataclass(frozen=True)
class MatrixType:
    """A small fixed-size row-major matrix of scalars (``kd.mat33``)."""

    name: str
    element: ScalarType
    rows: int
    cols: int

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows, self.cols)

    @property
    def count(self) -> int:
        return self.rows * self.cols

    def __call__(self, *components: Any) -> Any:
        from kdsl.builtins import make_matrix

        return make_matrix(self, components)


vec2 = VectorType("vec2", f32, 2)
vec3 = VectorType("vec3", f32, 3)
vec4 = VectorType("vec4", f32, 4)
vec2d = VectorType("vec2d", f64, 2)
vec3d = VectorType("vec3d", f64, 3)
vec4d = VectorType("vec4d", f64, 4)
ivec2 = VectorType("ivec2", i32, 2)
ivec3 = VectorType("ivec3", i32, 3)
ivec4 = VectorType("ivec4", i32, 4)
mat22 = MatrixType("mat22", f32, 2, 2)
mat33 = MatrixType("mat33", f32, 3, 3)
mat44 = MatrixType("mat44", f32, 4, 4)
mat33d = MatrixType("mat33d", f64, 3, 3)

NAMED_VECTORS = (vec2, vec3, vec4, vec2d, vec3d, vec4d, ivec2, ivec3, ivec4)
NAMED_MATRICES = (mat22, mat33, mat44, mat33d)


def vector_type(element: ScalarType, size: int) -> VectorType:
    for v in NAMED_VECTORS:
        if v.element == element and v.size == size:
            return v
    return VectorType(f"vec{size}<{element.name}>", element, size)


def matrix_type(element: ScalarType, rows: int, cols: int) -> MatrixType:
    for m in NAMED_MATRICES:
        if m.element == element and m.rows == rows and m.cols == cols:
            return m
    return MatrixType(f"mat{rows}{cols}<{element.name}>", element, rows, cols)


ElementType = Union[ScalarType, VectorType, MatrixType]


def element_scalar(t: ElementType) -> ScalarType:
    return t if isinstance(t, ScalarType) else t.element


def element_shape(t: ElementType) -> tuple[int, ...]:
    return () if isinstance(t, ScalarType) else t.shape


def element_count(t: ElementType) -> int:
    return 1 if isinstance(t, ScalarType) else t.count


def with_element_scalar(t: ElementType, scalar: ScalarType) -> ElementType:
    """The same shape of value with another scalar type (vec3 with f64 is vec3d)."""
    if isinstance(t, ScalarType):
        return scalar
    if isinstance(t, VectorType):
        return vector_type(scalar, t.size)
    return matrix_type(scalar, t.rows, t.cols)


@dataclass(frozen=True)
class ArrayType:
    """An n-d array of elements; vector and matrix elements are backed by trailing axes.

    ``contiguous`` is None in annotations (any layout accepted) and True or False in a
    specialisation: a C-contiguous array lets the compiler use constant strides.
    ``last_axis_size`` is the size of the last indexed axis where a specialisation fixes
    it (a C-contiguous array of scalars of 2 or more axes whose last one is short, as an
    (N, 3) array of positions): every stride is then a constant, so the compiler sees
    ``pos[j, 0]``, ``pos[j, 1]``, ``pos[j, 2]`` as one interleaved group of loads.

    ``row_pitch`` does the same for a strided view whose rows are short and padded (three
    columns of an (N, 4) array, ``wide[:, :3]``): the trailing axes the type fixes (the
    short last axis, or a vector element) are contiguous, and the axis before them steps
    ``row_pitch`` elements, a constant; strides of any axes before that come with the
    array. Such a type is not ``contiguous``.

    ``middle_axis_size`` is the size of the axis before that one where a specialisation
    fixes it too (a C-contiguous ``(N, 3, 3)`` array of scalars, as 3x3 matrices): the
    stride of the first axis is then a constant as well.

    ``unit_first_stride`` marks an array that is not C-contiguous whose first axis steps
    one element (a column-major ``(N, 3)`` array, or ``pos.T`` of a ``(3, N)`` one): that
    stride is a constant and the others come with the array, so a loop over the first
    axis reads each column as contiguous memory.
    """

    dtype: ElementType
    ndim: int = 1
    contiguous: bool | None = None
    last_axis_size: int | None = None
    row_pitch: int | None = None
    unit_first_stride: bool = False
    middle_axis_size: int | None = None

    def __repr__(self) -> str:
        layout = {None: "", True: ", C", False: ", A"}[self.contiguous]
        if self.row_pitch is not None:
            layout = f", P{self.row_pitch}"
        if self.unit_first_stride:
            layout = ", F"
        if self.last_axis_size is not None:
            middle = "" if self.middle_axis_size is None else f"{self.middle_axis_size}x"
            layout += f", ?x{middle}{self.last_axis_size}"
        return f"array<{self.dtype}, {self.ndim}{layout}>"

    __str__ = __repr__

    @property
    def full_ndim(self) -> int:
        return self.ndim + len(element_shape(self.dtype))

    @property
    def fixed_shape(self) -> tuple[int, ...]:
        """The sizes of the trailing axes the type fixes: a fixed last indexed axis, then
        the element axes."""
        fixed = () if self.last_axis_size is None else (self.last_axis_size,)
        if self.middle_axis_size is not None:
            fixed = (self.middle_axis_size, *fixed)
        return fixed + element_shape(self.dtype)

    @property
    def free_ndim(self) -> int:
        """The number of leading axes whose sizes come with each array."""
        return self.ndim - (self.last_axis_size is not None) - (self.middle_axis_size is not None)

    @property
    def strides_implied(self) -> bool:
        """Whether the type fixes the strides of the last free axis and of the axes after
        it (C-contiguous, or padded rows): those are constants, not passed with the array."""
        return bool(self.contiguous) or self.row_pitch is not None

    def specialised(self, contiguous: bool, last_axis_size: int | None = None,
                    row_pitch: int | None = None, unit_first_stride: bool = False,
                    middle_axis_size: int | None = None) -> ArrayType:
        """The type of an array of this annotation's: ``last_axis_size``, ``row_pitch``,
        ``unit_first_stride`` and ``middle_axis_size`` as ``argument_layout`` finds them,
        kept where this element type can use them."""
        scalar = isinstance(self.dtype, ScalarType)
        if contiguous or not (self.ndim >= 1 + scalar and isinstance(self.dtype, (ScalarType, VectorType))):
            row_pitch = None
        if not (self.ndim >= 2 and scalar and (contiguous or row_pitch is not None)):
            last_axis_size = None
        unit_first_stride = unit_first_stride and not contiguous and row_pitch is None
        if not (contiguous and last_axis_size is not None and self.ndim >= 3):
            middle_axis_size = None
        return ArrayType(self.dtype, self.ndim, contiguous, last_axis_size, row_pitch,
                         unit_first_stride, middle_axis_size)

    def holds(self, other: ArrayType) -> bool:
        """Whether a variable of this type can hold an array of ``other``'s (it makes no
        promise ``other``'s type does not)."""
        return ((self.dtype, self.ndim) == (other.dtype, other.ndim)
                and (not self.contiguous or bool(other.contiguous))
                and self.last_axis_size in (None, other.last_axis_size)
                and self.middle_axis_size in (None, other.middle_axis_size)
                and self.row_pitch in (None, other.row_pitch)
                and (not self.unit_first_stride or other.unit_first_stride))

    def of_any_padding(self) -> ArrayType:
        """The type of an array of this one's shape made elsewhere (an adjoint or a
        tangent the runtime allocates): this type without the row pitch of padded rows
        or the unit first stride."""
        return self.generalised() if self.row_pitch is not None or self.unit_first_stride else self

    def generalised(self) -> ArrayType:
        """The same array with no fixed last axis."""
        return ArrayType(self.dtype, self.ndim, self.contiguous)


# the sizes of a last axis a specialisation fixes (see ArrayType.last_axis_size)
FIXED_LAST_AXIS_SIZES = range(2, 9)
# the widest matrix (last two axes) a specialisation fixes the sizes of, in bytes (see
# ArrayType.middle_axis_size): 3x3 f64 matrices (72 bytes) stream 15% slower with
# constant strides than with a runtime one
MAX_FIXED_MATRIX_BYTES = 64
# the row pitches, in elements, a specialisation fixes (see ArrayType.row_pitch)
FIXED_ROW_PITCHES = range(2, 17)


class _ArrayAnnotation:
    """``kd.Array[dtype]`` or ``kd.Array[dtype, ndim]`` in annotations."""

    def __class_getitem__(cls, item: Any) -> ArrayType:
        if isinstance(item, tuple):
            dtype, ndim = item
        else:
            dtype, ndim = item, 1
        dtype = as_element_type(dtype)
        if not isinstance(ndim, int) or ndim < 1:
            raise TypeError(f"kd.Array needs a positive number of dimensions, got {ndim!r}")
        return ArrayType(dtype, ndim)


Array = _ArrayAnnotation


@dataclass(frozen=True)
class TupleType:
    """The type of a returned tuple of values."""

    items: tuple[Any, ...]

    def __repr__(self) -> str:
        return "(" + ", ".join(map(str, self.items)) + ")"

    __str__ = __repr__


class _NoneType:
    def __repr__(self) -> str:
        return "none"

    __str__ = __repr__


none_type = _NoneType()

Type = Union[ScalarType, VectorType, MatrixType, ArrayType, TupleType, _NoneType]


def as_element_type(obj: Any) -> ElementType:
    """Accepts kd types, NumPy dtypes and the Python types float, int and bool."""
    if isinstance(obj, (ScalarType, VectorType, MatrixType)):
        return obj
    if obj is float:
        return f64
    if obj is int:
        return i64
    if obj is bool:
        return bool_
    return scalar_from_numpy(obj)


def is_numeric_value_type(t: Any) -> bool:
    return isinstance(t, (ScalarType, VectorType, MatrixType))


@cache
def promote_scalars(a: ScalarType, b: ScalarType) -> ScalarType:
    """NumPy 2's promotion of two strongly typed scalars."""
    return scalar_from_numpy(np.result_type(a.numpy_dtype, b.numpy_dtype))


@cache
def promote_weak(strong: ScalarType, weak: ScalarType) -> ScalarType:
    """NumPy 2 (NEP 50) promotion of a typed value with a Python scalar of type ``weak``."""
    if weak.is_bool:
        return strong if not strong.is_bool else bool_
    if weak.is_integer:
        return strong if not strong.is_bool else i64
    # a Python float
    return strong if strong.is_float else f64


def promote(a: ScalarType, a_weak: bool, b: ScalarType, b_weak: bool) -> tuple[ScalarType, bool]:
    """The scalar type of a binary arithmetic result, and whether it is still weak."""
    if a_weak and b_weak:
        if a.is_float or b.is_float:
            return f64, True
        if a.is_integer or b.is_integer:
            return i64, True
        return bool_, True
    if a_weak:
        return promote_weak(b, a), False
    if b_weak:
        return promote_weak(a, b), False
    return promote_scalars(a, b), False


def promote_shaped(a: ScalarType, a_weak: bool, b: ScalarType, b_weak: bool) -> tuple[ScalarType, bool]:
    """The element type of arithmetic on vectors or matrices: as ``promote``, except that a
    strongly typed float and an integer give that float (``vec2 - ivec2`` is a vec2, as in
    GLSL, Taichi and Warp, where NumPy would give float64)."""
    if a.is_float != b.is_float:
        float_type, float_weak = (a, a_weak) if a.is_float else (b, b_weak)
        if not float_weak:
            return float_type, False
    return promote(a, a_weak, b, b_weak)

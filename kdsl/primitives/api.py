"""The parallel primitives called from Python, on NumPy, kd and CUDA arrays.

Each runs a kernel that calls the same generated func a kernel's own ``kd.cumsum`` (and
so on) lowers to, so both give the same results: NumPy's.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.primitives import bucket_sort_source as buckets
from kdsl.primitives import kernels

_SIDES = ("left", "right")


def _is_cuda(a: Any) -> bool:
    return getattr(a, "__kdsl_cuda__", False) is True


def _same_device(call: str, **arrays: Any) -> bool:
    """Whether the arrays (None ones left out) are CUDA arrays, all of them; a mix of
    host and CUDA arrays is a ValueError naming them, as for kernels."""
    on_cuda = {name: _is_cuda(a) for name, a in arrays.items() if a is not None}
    if any(on_cuda.values()) and not all(on_cuda.values()):
        where = ", ".join(f"'{name}' on {'cuda' if cuda else 'the cpu'}"
                          for name, cuda in on_cuda.items())
        raise ValueError(f"{call}(): arrays on different devices: {where}; move them with .to()")
    return any(on_cuda.values())


def _host(a: Any, name: str) -> np.ndarray:
    """The NumPy array behind ``a`` (a NumPy array, kd array or anything array-like)."""
    unwrap = getattr(a, "__kdsl_array__", None)
    data = unwrap() if callable(unwrap) else a
    if isinstance(data, np.ndarray):
        return data
    try:
        return np.asarray(data)
    except Exception as exc:  # noqa: BLE001
        raise TypeError(f"{name} must be an array, got {type(a).__name__}") from exc


def _in_place(a: Any, name: str, call: str) -> np.ndarray:
    """The NumPy array behind ``a``, which ``call`` writes in place: an array, or an object
    sharing its memory with one (a PyTorch CPU tensor, a kd array), and writeable. A list,
    or anything else NumPy can only copy, is a TypeError: the result would be lost."""
    data = _host(a, name)
    if data is not a and not hasattr(a, "__kdsl_array__") and data.flags.owndata:
        raise TypeError(f"{call} writes '{name}' in place, so it must be an array; got "
                        f"{type(a).__name__} (convert it with np.array first and keep that)")
    if not data.flags.writeable:
        raise ValueError(f"{call} writes '{name}' in place, but it is read-only")
    return data


def _scalar_type(dtype: np.dtype, name: str) -> T.ScalarType:
    try:
        return T.scalar_from_numpy(dtype)
    except Exception:  # noqa: BLE001
        raise TypeError(f"{name} must have a numeric dtype, got {dtype}") from None


def _like(a: Any, data: np.ndarray) -> Any:
    """``data`` as the kind of array ``a`` is (a kd array for a kd array)."""
    from kdsl.runtime.arrays import DeviceArray

    return DeviceArray(data) if isinstance(a, DeviceArray) else data


def _cuda_flat(a: Any, name: str) -> Any:
    from kdsl.runtime.cuda.device_array import CudaArray

    if a.ndim == 1:
        return a
    if not a.flags_c_contiguous:
        raise ValueError(f"{name}: a CUDA array of several axes must be C-contiguous")
    return CudaArray.from_pointer(a.ptr, (a.size,), None, a.dtype, owner=a)


def _cuda_rows(a: Any, name: str) -> Any:
    """A C-contiguous CUDA array of several axes as a 2-D array of its last axis's rows."""
    from kdsl.runtime.cuda.device_array import CudaArray

    if not a.flags_c_contiguous:
        raise ValueError(f"{name}: a CUDA array of several axes must be C-contiguous")
    return CudaArray.from_pointer(a.ptr, (a.size // a.shape[-1], a.shape[-1]), None, a.dtype,
                                  owner=a)


def _cuda_1d(a: Any, name: str, what: str) -> None:
    if a.ndim != 1:
        raise ValueError(f"{what} of a CUDA array needs one axis; '{name}' has {a.ndim}")


def _cuda_empty(shape: tuple[int, ...], dtype: np.dtype) -> Any:
    from kdsl.runtime.cuda.device_array import CudaArray

    return CudaArray.allocate(shape, dtype)


def sum_type(dtype: np.dtype) -> np.dtype:
    """NumPy's type of running sums of ``dtype`` (int32 sums are int64, as ``np.cumsum``)."""
    return np.cumsum(np.zeros(1, dtype)).dtype


def cumsum(a: Any, axis: int | None = None, exclusive: bool = False) -> Any:
    """Running sums as ``np.cumsum``: over the flattened array (``axis=None``) or along
    ``axis``; a new array. ``exclusive=True`` gives the sums before each element
    (``out[0] == 0``, the same length as ``a``)."""
    if axis is not None:
        axis = operator.index(axis)
    if _is_cuda(a):
        if axis is not None and a.ndim > 1:
            return _cuda_cumsum_along(a, axis, bool(exclusive))
        if axis is not None and not -1 <= axis < 1:
            raise np.exceptions.AxisError(axis, a.ndim)
        flat = _cuda_flat(a, "cumsum")
        result = sum_type(a.dtype)
        out = _cuda_empty((flat.size,), result)
        kernels.scan_kernel(_scalar_type(result, "a"), bool(exclusive))(flat, out)
        return out
    data = _host(a, "a")
    result = sum_type(data.dtype)
    t = _scalar_type(result, "a")
    if axis is None or data.ndim <= 1:
        if axis is not None and not -1 <= axis < 1:
            raise np.exceptions.AxisError(axis, data.ndim)
        return _like(a, kernels.new_scan_kernel(t, bool(exclusive))(np.ravel(data)))
    if not -data.ndim <= axis < data.ndim:
        raise np.exceptions.AxisError(axis, data.ndim)
    moved = np.moveaxis(data, axis, -1)
    rows = moved.reshape(int(np.prod(moved.shape[:-1])), moved.shape[-1])  # -1: not if empty
    out = np.empty(rows.shape, result)
    kernels.scan_rows_kernel(t, bool(exclusive))(rows, out)
    return _like(a, np.moveaxis(out.reshape(moved.shape), -1, axis))


def _cuda_cumsum_along(a: Any, axis: int, exclusive: bool) -> Any:
    """``cumsum`` of a CUDA array of several axes along ``axis``: a new CUDA array."""
    if not -a.ndim <= axis < a.ndim:
        raise np.exceptions.AxisError(axis, a.ndim)
    if a.ndim > 4:
        raise ValueError(f"cumsum along an axis of a CUDA array takes at most 4 axes, got {a.ndim}")
    result = sum_type(a.dtype)
    out = _cuda_empty(tuple(a.shape), result)
    kernels.scan_axis_kernel(a.ndim, axis % a.ndim, _scalar_type(result, "a"), exclusive)(a, out)
    return out


def _rows(data: np.ndarray) -> list[np.ndarray]:
    """The 1-D lines along the last axis, as views."""
    if data.ndim == 1:
        return [data]
    return [data[index] for index in np.ndindex(*data.shape[:-1])]


def sort(a: Any) -> None:
    """Sorts ``a`` in place along its last axis, NaN last, as ``a.sort()``; returns None."""
    if _is_cuda(a):
        t = _scalar_type(a.dtype, "a")
        if a.ndim == 0:
            raise ValueError("sort needs an array of at least one axis")
        if a.ndim == 1:
            kernels.sort_kernel(t)(a)
        elif a.size:
            kernels.sort_rows_kernel(t)(_cuda_rows(a, "sort"))
        return
    data = _in_place(a, "a", "sort")
    if data.ndim == 0:
        raise ValueError("sort needs an array of at least one axis")
    t = _scalar_type(data.dtype, "a")
    run = kernels.sort_kernel(t)
    # large arrays by buckets sorted in cache (the same order: NumPy's, -0.0 before 0.0)
    large = t in buckets.TYPES and data.shape[-1] * data.itemsize >= buckets.MIN_BYTES
    if large:
        run = kernels.bucket_sort_kernel(t)
    for row in _rows(data):
        if row.size > 1:
            run(row)


def argsort(keys: Any, out: Any = None) -> Any:
    """The stable order of ``keys`` along its last axis, as ``np.argsort(keys,
    kind="stable")`` (NaN last): a new int64 array, or written to ``out``."""
    if _same_device("argsort", keys=keys, out=out):
        t = _scalar_type(keys.dtype, "keys")
        if keys.ndim == 0:
            raise ValueError("argsort needs an array of at least one axis")
        target = _cuda_empty(keys.shape, np.dtype(np.int64)) if out is None else out
        if tuple(target.shape) != tuple(keys.shape) or target.dtype != np.int64:
            raise ValueError(f"out must be an int64 array of shape {tuple(keys.shape)}, got "
                             f"{target.dtype} of shape {tuple(target.shape)}")
        if keys.ndim == 1:
            kernels.argsort_kernel(t)(keys, target)
        elif keys.size:
            kernels.argsort_rows_kernel(t)(_cuda_rows(keys, "argsort"),
                                           _cuda_rows(target, "argsort: out"))
        return target
    data = _host(keys, "keys")
    if data.ndim == 0:
        raise ValueError("argsort needs an array of at least one axis")
    if out is None:
        target = np.empty(data.shape, np.int64)
    else:
        target = _in_place(out, "out", "argsort")
        if target.shape != data.shape or target.dtype != np.int64:
            raise ValueError(f"out must be an int64 array of shape {data.shape}, got "
                             f"{target.dtype} of shape {target.shape}")
    run = kernels.argsort_kernel(_scalar_type(data.dtype, "keys"))
    for key_row, out_row in zip(_rows(data), _rows(target)):
        run(key_row, out_row)
    return (_like(keys, target) if out is None else out)


def sort_by_key(keys: Any, values: Any) -> None:
    """Sorts 1-D ``keys`` in place, stably, NaN last, and moves ``values`` (the same
    length along their first axis) with them; returns None."""
    if _same_device("sort_by_key", keys=keys, values=values):
        _cuda_1d(keys, "keys", "sort_by_key")
        if values.ndim == 0 or values.shape[0] != keys.shape[0]:
            raise ValueError(f"sort_by_key: values need {keys.shape[0]} rows, got shape "
                             f"{tuple(values.shape)}")
        key_type = _scalar_type(keys.dtype, "keys")
        if values.ndim == 1:
            kernels.sort_by_key_kernel(key_type, _scalar_type(values.dtype, "values"))(keys, values)
        else:  # the rows of values move by the order of the keys
            _cuda_take_rows(keys, values, key_type)
        return
    k, v = _in_place(keys, "keys", "sort_by_key"), _in_place(values, "values", "sort_by_key")
    if k.ndim != 1:
        raise ValueError(f"sort_by_key needs 1-D keys, got {k.ndim} axes")
    if v.ndim == 0 or v.shape[0] != k.shape[0]:
        raise ValueError(f"sort_by_key: values need {k.shape[0]} rows, got shape {v.shape}")
    key_type = _scalar_type(k.dtype, "keys")
    if v.ndim == 1:
        kernels.sort_by_key_kernel(key_type, _scalar_type(v.dtype, "values"))(k, v)
        return
    order = np.empty(k.shape[0], np.int64)
    kernels.sort_by_key_kernel(key_type, T.i64)(k, _arange_into(order))
    v[...] = v[order]


def _cuda_take_rows(keys: Any, values: Any, key_type: T.ScalarType) -> None:
    from kdsl.runtime.cuda.device_array import CudaArray

    _scalar_type(values.dtype, "values")
    order = _host_to_cuda(np.arange(keys.shape[0], dtype=np.int64))
    kernels.sort_by_key_kernel(key_type, T.i64)(keys, order)
    if values.size == 0:
        return
    if not values.flags_c_contiguous:
        raise ValueError("sort_by_key: CUDA values of several axes must be C-contiguous")
    rows = CudaArray.from_pointer(values.ptr, (values.shape[0], values.size // values.shape[0]),
                                  None, values.dtype, owner=values)
    buffer = _cuda_empty(tuple(rows.shape), values.dtype)
    kernels.take_rows_kernel()(rows, order, buffer)
    kernels.copy_kernel()(buffer, rows)


def _arange_into(order: np.ndarray) -> np.ndarray:
    order[:] = np.arange(order.shape[0])
    return order


def searchsorted(a: Any, v: Any, side: str = "left") -> Any:
    """Where ``v`` would be inserted into sorted 1-D ``a`` to keep it sorted, as
    ``np.searchsorted`` (NaN sorts last): an int64 of ``v``'s shape."""
    if side not in _SIDES:
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    if _is_cuda(a):  # a host v is copied to the device
        return _cuda_searchsorted(a, v, side)
    _same_device("searchsorted", a=a, v=v)
    data = _host(a, "a")
    if data.ndim != 1:
        raise ValueError(f"searchsorted needs a 1-D array a, got {data.ndim} axes")
    values = _host(v, "v")
    common = np.result_type(data, values)
    t = _scalar_type(common, "a")
    flat = np.ravel(values).astype(common, copy=False)
    out = np.empty(flat.size, np.int64)
    kernels.search_kernel(t, side)(data.astype(common, copy=False), flat, out)
    if values.ndim == 0:
        return np.int64(out[0])
    return _like(v, out.reshape(values.shape))


def _cuda_searchsorted(a: Any, v: Any, side: str) -> Any:
    """``searchsorted`` into a CUDA array: an int64 CUDA array of ``v``'s shape (an int64
    for a host scalar ``v``). Both sides are compared in NumPy's common type of the two."""
    from kdsl.runtime.cuda.device_array import CudaArray

    _cuda_1d(a, "a", "searchsorted")
    if _is_cuda(v):
        values, shape = v, tuple(v.shape)
        common = np.result_type(a.dtype, v.dtype)
    else:
        host = _host(v, "v")
        shape = host.shape
        common = np.result_type(a.dtype, host)
        values = _host_to_cuda(np.array(host, dtype=common, order="C").reshape(-1))
    t = _scalar_type(common, "a")
    flat = _cuda_as(_cuda_flat(values, "searchsorted"), common)
    out = _cuda_empty((flat.size,), np.dtype(np.int64))
    kernels.search_kernel(t, side)(_cuda_as(a, common), flat, out)
    if not _is_cuda(v) and not shape:
        return np.int64(out.numpy()[0])
    return CudaArray.from_pointer(out.ptr, shape, None, out.dtype, owner=out)


def _cuda_as(a: Any, dtype: np.dtype) -> Any:
    """1-D CUDA array ``a`` with elements of ``dtype`` (itself, or a converted copy)."""
    if a.dtype == dtype:
        return a
    converted = _cuda_empty(tuple(a.shape), dtype)
    kernels.convert_kernel(_scalar_type(dtype, "a"))(a, converted)
    return converted


def _host_to_cuda(data: np.ndarray) -> Any:
    from kdsl.runtime.cuda.device_array import CudaArray

    return CudaArray.from_host(data)


def segment_sum(keys: Any, values: Any) -> tuple[Any, Any]:
    """Sums of ``values`` over each run of equal sorted ``keys`` (NaNs one run): the keys
    of the runs and their sums, as ``np.unique(keys)`` and ``np.add.reduceat``."""
    cuda = _same_device("segment_sum", keys=keys, values=values)
    k = keys if cuda else _host(keys, "keys")
    v = values if cuda else _host(values, "values")
    if k.ndim != 1 or v.ndim != 1 or k.shape != v.shape:
        raise ValueError(f"segment_sum needs 1-D keys and values of one length, got {k.shape} "
                         f"and {v.shape}")
    result = sum_type(v.dtype)
    run = kernels.segment_sum_kernel(_scalar_type(k.dtype, "keys"), _scalar_type(result, "values"))
    unique, sums = run(k, v)
    return (unique, sums) if cuda else (_like(keys, unique), _like(values, sums))

"""CUDA arrays (API section 5) without a GPU: a fake driver whose "device memory" is host
memory checks kd.array/zeros/ones/empty/full on device="cuda", .numpy(), .to(), views,
__cuda_array_interface__, DLPack (kd.from_dlpack, __dlpack__), clear errors and freeing;
the driver wrapper itself runs against a fake cuda.bindings module."""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import kdsl as kd
from kdsl.runtime.cuda import dlpack
from kdsl.runtime.cuda import driver as driver_module
from kdsl.runtime.cuda.device_array import CudaArray

GARBAGE = 0xAB  # fresh fake allocations hold this byte, so zeros are never an accident


class FakeDriver:
    """The driver's interface over host memory: every copy must stay inside memory that
    was allocated (and not freed) or registered as foreign device memory."""

    def __init__(self) -> None:
        self.buffers: dict[int, ctypes.Array] = {}
        self.foreign: dict[int, int] = {}
        self.allocs: list[int] = []
        self.frees: list[int] = []
        self.syncs = 0
        self.waits: list[tuple[int, int]] = []

    def register(self, ptr: int, nbytes: int) -> None:
        """Marks host memory (of a NumPy array) as device memory of another library."""
        self.foreign[ptr] = nbytes

    def _check(self, ptr: int, nbytes: int) -> None:
        regions = [(p, len(b)) for p, b in self.buffers.items()] + list(self.foreign.items())
        if not any(p <= ptr and ptr + nbytes <= p + n for p, n in regions):
            raise AssertionError(f"access of {nbytes} bytes at {ptr:#x} outside device memory")

    def alloc(self, nbytes: int) -> int:
        buf = ctypes.create_string_buffer(max(nbytes, 1))
        ctypes.memset(buf, GARBAGE, max(nbytes, 1))
        ptr = ctypes.addressof(buf)
        self.buffers[ptr] = buf
        self.allocs.append(ptr)
        return ptr

    def free(self, ptr: int) -> None:
        assert ptr in self.buffers, "free of memory not allocated (or freed twice)"
        del self.buffers[ptr]
        self.frees.append(ptr)

    def copy_to_device(self, dst_ptr: int, src: np.ndarray) -> None:
        assert src.flags.c_contiguous
        self._check(dst_ptr, src.nbytes)
        ctypes.memmove(dst_ptr, src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: np.ndarray, src_ptr: int) -> None:
        assert dst.flags.c_contiguous and dst.flags.writeable
        self._check(src_ptr, dst.nbytes)
        ctypes.memmove(dst.ctypes.data, src_ptr, dst.nbytes)

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        self._check(dst, nbytes)
        self._check(src, nbytes)
        ctypes.memmove(dst, src, nbytes)

    def memset(self, ptr: int, nbytes: int, byte_value: int) -> None:
        self._check(ptr, nbytes)
        ctypes.memset(ptr, byte_value, nbytes)

    def synchronize(self) -> None:
        self.syncs += 1

    def stream_synchronize(self, stream: int) -> None:
        self.syncs += 1

    def stream_wait(self, waiting: int, on: int) -> None:
        self.waits.append((waiting, on))

    @property
    def live(self) -> int:
        return len(self.buffers)


@pytest.fixture
def fake():
    driver = FakeDriver()
    driver_module.set_driver(driver)
    yield driver
    driver_module.reset_driver()


def random_host(shape, dtype, seed=0) -> np.ndarray:
    """Random data, never all zeros."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        data = np.asarray(rng.random(shape) < 0.5)
        data.reshape(-1)[:1] = True
        return data
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(max(info.min, -100), min(info.max, 100), size=shape,
                                       dtype=dtype, endpoint=True) | np.asarray(1, dtype))
    values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    if dtype.kind == "c":
        values = values + 1j * rng.uniform(0.5, 2.0, shape)
    return np.asarray(values).astype(dtype)


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64"]
SHAPES = [(), (0,), (1,), (7,), (3, 4), (2, 3, 5), (4, 0, 2)]


# --- round trips ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip(fake, dtype, shape):
    host = random_host(shape, dtype, seed=len(shape) + len(dtype))
    a = kd.array(host, device="cuda")
    assert isinstance(a, CudaArray) and isinstance(a, kd.DeviceArray)
    assert a.device == "cuda" and a.shape == shape and a.dtype == np.dtype(dtype)
    assert a.ndim == len(shape) and a.size == host.size and a.nbytes == host.nbytes
    assert a.strides == (host.strides if host.size else a.strides)
    assert a.flags_c_contiguous and a.base is None
    back = a.numpy()
    assert back.dtype == host.dtype and back.shape == host.shape
    np.testing.assert_array_equal(back, host)
    back[...] = 0  # a copy: the device memory is unchanged
    np.testing.assert_array_equal(a.numpy(), host)


def test_round_trip_of_a_strided_host_array(fake):
    host = random_host((6, 8), np.float32)[::2, ::-3]
    a = kd.array(host, device="cuda")
    assert a.flags_c_contiguous and a.shape == host.shape
    np.testing.assert_array_equal(a.numpy(), host)


def test_array_with_kdsl_dtypes(fake):
    a = kd.array([[1, 2, 3], [4, 5, 6]], dtype=kd.vec3, device="cuda")
    assert a.shape == (2, 3) and a.dtype == np.float32
    np.testing.assert_array_equal(a.numpy(), [[1, 2, 3], [4, 5, 6]])
    b = kd.array([1.5, -2.5], dtype=kd.i32, device="cuda")
    assert b.dtype == np.int32 and b.numpy().tolist() == [1, -2]
    with pytest.raises(ValueError):
        kd.array([[1.0, 2.0]], dtype=kd.vec3, device="cuda")


def test_to_moves_between_devices(fake):
    host = random_host((5, 3), np.float64)
    cpu = kd.array(host)
    gpu = cpu.to("cuda")
    assert isinstance(gpu, CudaArray) and gpu.device == "cuda"
    assert gpu.to("cuda") is gpu and gpu.to("cuda:0") is gpu
    back = gpu.to("cpu")
    assert type(back) is kd.DeviceArray and back.device == "cpu"
    np.testing.assert_array_equal(back.numpy(), host)
    back.numpy()[0, 0] = 99.0  # the host copy is separate
    assert gpu.numpy()[0, 0] == host[0, 0]


def test_array_of_a_cuda_array(fake):
    host = random_host((4,), np.float32)
    a = kd.array(host, device="cuda")
    assert kd.array(a) is a and kd.array(a, device="cuda") is a
    c = kd.array(a, device="cpu")
    assert c.device == "cpu"
    np.testing.assert_array_equal(c.numpy(), host)
    d = kd.array(a, dtype=kd.f64, device="cuda")
    assert d.dtype == np.float64 and d.ptr != a.ptr
    np.testing.assert_array_equal(d.numpy(), host.astype(np.float64))


# --- zeros, ones, full, empty -------------------------------------------------------------


def test_zeros_ones_full_empty(fake):
    z = kd.zeros((3, 4), dtype=kd.f64, device="cuda")
    assert isinstance(z, CudaArray) and z.shape == (3, 4) and z.dtype == np.float64
    np.testing.assert_array_equal(z.numpy(), np.zeros((3, 4)))
    o = kd.ones(5, dtype=kd.i32, device="cuda")
    assert o.numpy().tolist() == [1] * 5 and o.dtype == np.int32
    f = kd.full((2, 2), -7.25, device="cuda")
    assert f.dtype == np.float32 and f.numpy().tolist() == [[-7.25, -7.25], [-7.25, -7.25]]
    negative_zero = kd.full(3, -0.0, dtype=kd.f32, device="cuda").numpy()
    assert np.all(np.signbit(negative_zero)) and np.all(negative_zero == 0)
    e = kd.empty((2, 3), dtype=kd.u8, device="cuda")
    assert e.shape == (2, 3) and e.dtype == np.uint8 and e.device == "cuda"
    v = kd.zeros(4, dtype=kd.vec3, device="cuda")
    assert v.shape == (4, 3) and v.dtype == np.float32
    np.testing.assert_array_equal(v.numpy(), np.zeros((4, 3), np.float32))
    b = kd.full(3, True, dtype=kd.bool_, device="cuda")
    assert b.numpy().tolist() == [True] * 3


def test_zeros_like(fake):
    a = kd.array(random_host((2, 5), np.int16), device="cuda")
    z = kd.zeros_like(a)
    assert isinstance(z, CudaArray) and z.shape == (2, 5) and z.dtype == np.int16
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 5), np.int16))
    c = kd.zeros_like(a, device="cpu")
    assert c.device == "cpu" and c.shape == (2, 5) and c.dtype == np.int16
    v = kd.zeros_like(a, dtype=kd.vec3)
    assert v.device == "cuda" and v.shape == (2, 5, 3) and v.dtype == np.float32
    h = kd.zeros_like(np.ones((3, 2), np.float64), device="cuda")
    assert h.device == "cuda" and h.shape == (3, 2) and h.dtype == np.float64
    np.testing.assert_array_equal(h.numpy(), np.zeros((3, 2)))


def test_synchronize(fake):
    kd.synchronize()
    assert fake.syncs == 1


# --- attributes, views ------------------------------------------------------------------


def test_attributes_and_repr(fake):
    host = random_host((3, 4), np.float32)
    a = kd.array(host, device="cuda")
    assert len(a) == 3 and a.itemsize == 4 and a.strides == (16, 4)
    assert "device='cuda'" in repr(a) and repr(host.tolist()[0][0])[:5] in repr(a)
    with pytest.raises(TypeError):
        len(kd.zeros((), device="cuda"))
    big = kd.empty((1 << 22) + 1, dtype=kd.f32, device="cuda")
    assert "shape=(4194305,)" in repr(big) and fake.live == 2  # described, not copied
    assert [row.numpy().tolist() for row in a] == host.tolist()


INDICES = [
    (1,), (-1,), (slice(1, 3),), (slice(None, None, 2),), (slice(None, None, -1),),
    (slice(4, 0, -2),), (Ellipsis, 2), (1, slice(None), -1), (slice(None), 0, slice(1, None, 3)),
    (None, 1), (slice(None), None, 2), (Ellipsis,), (np.int64(2), Ellipsis, np.int32(-2)),
    (slice(3, 1),), (slice(1, 2), slice(None, None, -2), slice(1, 4)),
]


@pytest.mark.parametrize("index", INDICES, ids=str)
def test_views_match_numpy(fake, index):
    host = random_host((5, 4, 6), np.float64)
    a = kd.array(host, device="cuda")
    view = a[index]
    expected = host[index]
    assert isinstance(view, CudaArray)
    assert view.shape == expected.shape and view.dtype == expected.dtype
    np.testing.assert_array_equal(view.numpy(), expected)
    assert view.base is a
    if expected.size:
        assert view.ptr - a.ptr == expected.ctypes.data - host.ctypes.data
        assert all(s == e for n, s, e in zip(view.shape, view.strides, expected.strides) if n > 1)
    assert view.flags_c_contiguous == (expected.flags.c_contiguous or expected.size == 0)


def test_views_of_views_and_scalars(fake):
    host = random_host((6, 7), np.int32)
    a = kd.array(host, device="cuda")
    v = a[1:, ::2][::-1, 1:]
    assert v.base is a
    np.testing.assert_array_equal(v.numpy(), host[1:, ::2][::-1, 1:])
    item = a[2, -3]
    assert isinstance(item, np.int32) and item == host[2, -3]
    assert v[0, 0] == host[1:, ::2][::-1, 1:][0, 0]
    zero_d = kd.array(np.float64(2.5), device="cuda")
    assert zero_d[()] == 2.5 and isinstance(zero_d[...], CudaArray)


def test_bad_indices(fake):
    a = kd.zeros((3, 4), device="cuda")
    with pytest.raises(IndexError):
        a[3]
    with pytest.raises(IndexError):
        a[0, -5]
    with pytest.raises(IndexError):
        a[0, 0, 0]
    with pytest.raises(TypeError, match=r"\.numpy\(\)"):
        a[[0, 1]]
    with pytest.raises(TypeError, match=r"\.numpy\(\)"):
        a[np.array([True, False, True])]
    with pytest.raises(ValueError):
        a[::0]


def test_views_keep_memory_and_memory_is_freed(fake):
    a = kd.array(random_host((10,), np.float32), device="cuda")
    ptr = a.ptr
    view = a[2:8:3]
    del a
    gc.collect()
    assert fake.frees == [] and view.numpy().shape == (2,)
    del view
    gc.collect()
    assert fake.frees == [ptr] and fake.live == 0
    for _ in range(5):
        kd.zeros(1000, device="cuda")
    gc.collect()
    assert fake.live == 0 and len(fake.frees) == 6


def test_arrays_keep_the_driver_that_allocated_them(fake):
    a = kd.zeros(3, device="cuda")
    other = FakeDriver()
    driver_module.set_driver(other)
    del a
    gc.collect()
    assert len(fake.frees) == 1 and other.frees == []


def test_pickling_copies_the_contents(fake):
    import pickle

    host = random_host((3, 2), np.float32)
    a = kd.array(host, device="cuda")
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, CudaArray) and b.ptr != a.ptr
    np.testing.assert_array_equal(b.numpy(), host)


# --- no implicit copies ---------------------------------------------------------------


def test_no_implicit_host_copies(fake):
    a = kd.ones(3, device="cuda")
    with pytest.raises(TypeError, match=r"\.numpy\(\)"):
        np.asarray(a)
    with pytest.raises(TypeError, match=r"\.numpy\(\)"):
        np.array(a)
    with pytest.raises(TypeError, match="kernel"):
        a + 1
    with pytest.raises(TypeError, match="kernel"):
        2.0 * a
    with pytest.raises(TypeError, match="kernel"):
        np.sin(a)
    with pytest.raises(TypeError, match="kernel"):
        a += 1
    with pytest.raises(TypeError, match="kernel"):
        kd.ones(3) + a
    with pytest.raises(TypeError, match="kernel"):
        np.ones(3) * a
    with pytest.raises(TypeError, match=r"\.numpy\(\)"):
        a[0] = 5.0
    with pytest.raises(TypeError, match=r"\.numpy\(\)"):
        np.sum(a)


# --- __cuda_array_interface__ -----------------------------------------------------------


def test_cuda_array_interface_contents(fake):
    a = kd.array(random_host((3, 4), np.float32), device="cuda")
    cai = a.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (3, 4) and cai["typestr"] == "<f4"
    assert cai["data"] == (a.ptr, False) and cai["strides"] is None and cai["stream"] == 1
    assert cai.get("mask") is None
    view = a[:, 1::2]
    vcai = view.__cuda_array_interface__
    assert vcai["data"] == (a.ptr + 4, False) and vcai["shape"] == (3, 2)
    assert vcai["strides"] == (16, 8)
    assert kd.array(random_host(2, np.int64), device="cuda").__cuda_array_interface__[
        "typestr"] == "<i8"


class ForeignCudaArray:
    """Another library's CUDA array (memory registered with the fake driver)."""

    def __init__(self, fake: FakeDriver, host: np.ndarray, stream: int | None = None) -> None:
        self.host = host
        owner = host.base if host.base is not None else host
        fake.register(owner.ctypes.data, owner.nbytes)
        self.__cuda_array_interface__ = {
            "shape": host.shape, "typestr": host.dtype.str, "version": 3,
            "data": (host.ctypes.data, False),
            "strides": None if host.flags.c_contiguous else host.strides, "stream": stream,
        }


def test_consuming_cuda_array_interface_is_zero_copy(fake):
    host = random_host((4, 6), np.float32)
    foreign = ForeignCudaArray(fake, host)
    a = kd.array(foreign, device="cuda")
    assert isinstance(a, CudaArray) and a.ptr == host.ctypes.data and a.base is foreign
    assert a.shape == (4, 6) and a.dtype == np.float32 and fake.allocs == []
    np.testing.assert_array_equal(a.numpy(), host)
    assert kd.array(foreign).device == "cuda"  # the device defaults to the data's
    transposed = host.T
    b = kd.array(ForeignCudaArray(fake, transposed), device="cuda")
    assert b.ptr == host.ctypes.data and b.strides == transposed.strides
    np.testing.assert_array_equal(b.numpy(), transposed)
    c = kd.array(foreign, dtype=kd.f64, device="cuda")  # another dtype: a converted copy
    assert c.dtype == np.float64 and c.ptr != host.ctypes.data
    np.testing.assert_array_equal(c.numpy(), host.astype(np.float64))
    on_cpu = kd.array(foreign, device="cpu")
    assert on_cpu.device == "cpu"
    np.testing.assert_array_equal(on_cpu.numpy(), host)
    assert kd.zeros_like(foreign).device == "cuda"


def test_consuming_cuda_array_interface_orders_streams(fake):
    host = random_host(5, np.int32)
    kd.array(ForeignCudaArray(fake, host, stream=1), device="cuda")
    assert fake.waits == []  # the legacy default stream: ours
    kd.array(ForeignCudaArray(fake, host, stream=1234), device="cuda")
    assert fake.waits == [(0, 1234)]
    with pytest.raises(ValueError):
        kd.array(ForeignCudaArray(fake, host, stream=0), device="cuda")


# --- DLPack -----------------------------------------------------------------------------


def test_dlpack_device():
    assert CudaArray.from_pointer(0, (0,), None, np.float32).__dlpack_device__() == (2, 0)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "uint16", "uint64", "float32",
                                   "float64", "complex64"])
def test_dlpack_round_trip(fake, dtype):
    host = random_host((4, 5), dtype)
    a = kd.array(host, device="cuda")
    for source in (a, a[1:, ::-2]):
        b = kd.from_dlpack(source)
        assert isinstance(b, CudaArray) and b.ptr == source.ptr
        assert b.shape == source.shape and b.strides == source.strides
        assert b.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(b.numpy(), source.numpy())
        assert dlpack.live_exports() == 1
        del b
        gc.collect()
        assert dlpack.live_exports() == 0  # the deleter ran
    del a, source
    gc.collect()
    assert fake.live == 0


def test_dlpack_export_keeps_the_array_alive(fake):
    a = kd.array(random_host(8, np.float32), device="cuda")
    b = kd.from_dlpack(a)
    ptr = a.ptr
    del a
    gc.collect()
    assert fake.frees == []  # the export holds the array
    assert b.numpy().shape == (8,)
    del b
    gc.collect()
    assert fake.frees == [ptr]


def test_unconsumed_capsule_releases_the_array(fake):
    a = kd.array(random_host(3, np.float32), device="cuda")
    capsule = a.__dlpack__()
    assert dlpack.live_exports() == 1 and "dltensor" in repr(capsule)
    del capsule
    gc.collect()
    assert dlpack.live_exports() == 0
    capsule = a.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)
    del capsule
    gc.collect()
    assert dlpack.live_exports() == 0


def test_dlpack_export_options(fake):
    a = kd.array(random_host(6, np.float32), device="cuda")
    a.__dlpack__(stream=1)
    a.__dlpack__(stream=-1)
    assert fake.waits == []
    a.__dlpack__(stream=77)
    assert fake.waits == [(77, 0)]
    with pytest.raises(ValueError):
        a.__dlpack__(stream=0)
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(1, 0))
    copied = dlpack.consume_capsule(a.__dlpack__(copy=True))
    assert copied.ptr != a.ptr and copied.shape == (6,)
    del copied
    gc.collect()
    assert dlpack.live_exports() == 0


class ForeignDLPackTensor:
    """A CUDA tensor of another library: NumPy's own DLPack capsule, its device patched to
    CUDA (so the capsule, its layout and its deleter come from an independent producer)."""

    def __init__(self, fake: FakeDriver, host: np.ndarray, versioned: bool = True) -> None:
        self.host = host
        owner = host.base if host.base is not None else host
        fake.register(owner.ctypes.data, owner.nbytes)
        self.versioned = versioned
        self.calls: list[dict] = []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        if "max_version" in kwargs and not self.versioned:
            raise TypeError("unexpected keyword argument 'max_version'")
        if self.versioned:
            capsule = self.host.__dlpack__(max_version=kwargs["max_version"])
            name, struct = b"dltensor_versioned", dlpack.DLManagedTensorVersioned
        else:
            capsule = self.host.__dlpack__()
            name, struct = b"dltensor", dlpack.DLManagedTensor
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        struct.from_address(get(capsule, name)).dl_tensor.device.device_type = 2
        return capsule


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_from_dlpack_of_a_foreign_cuda_tensor(fake, versioned):
    base = random_host((5, 6), np.float32)
    host = base[1:, ::2]
    alive = weakref.ref(base)
    tensor = ForeignDLPackTensor(fake, host, versioned)
    a = kd.from_dlpack(tensor)
    assert isinstance(a, CudaArray) and a.ptr == host.ctypes.data
    assert a.shape == host.shape and a.strides == host.strides and a.dtype == np.float32
    assert tensor.calls[-1]["stream"] == 1  # the legacy default stream
    np.testing.assert_array_equal(a.numpy(), host)
    b = kd.array(tensor, device="cuda")  # zero copy through DLPack too
    assert b.ptr == host.ctypes.data and fake.allocs == []
    del tensor, host, base, b
    gc.collect()
    assert alive() is not None  # the producer's deleter has not run yet
    del a
    gc.collect()
    assert alive() is None  # ... and now it has


def test_from_dlpack_of_cpu_tensors():
    host = random_host((3, 4), np.int32)[:, ::-1]
    a = kd.from_dlpack(host)
    assert type(a) is kd.DeviceArray and a.device == "cpu"
    assert a.numpy().ctypes.data == host.ctypes.data
    np.testing.assert_array_equal(a.numpy(), host)
    b = kd.from_dlpack(a)  # CPU kd arrays are DLPack producers too
    assert b.numpy().ctypes.data == host.ctypes.data


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_capsule_reader_matches_numpy(max_version):
    base = random_host((4, 6), np.float64)
    host = base[::-1, 1::2]
    kwargs = {} if max_version is None else {"max_version": max_version}
    tensor = dlpack.consume_capsule(host.__dlpack__(**kwargs))
    assert tensor.ptr == host.ctypes.data and tensor.shape == host.shape
    assert tensor.strides == host.strides and tensor.dtype == host.dtype
    assert tensor.device == (1, 0)
    alive = weakref.ref(base)
    del base, host
    gc.collect()
    assert alive() is not None
    tensor.owner.release()
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_capsule_writer_matches_numpy(versioned):
    """Our exporter, on host memory, read by NumPy's own consumer."""
    host = random_host((3, 5), np.int16)[:, ::2]

    class Producer:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            return dlpack.export_capsule(host.ctypes.data, host.shape, host.strides,
                                         host.dtype, host, device=(1, 0), versioned=versioned)

    out = np.from_dlpack(Producer())
    assert out.ctypes.data == host.ctypes.data and out.strides == host.strides
    np.testing.assert_array_equal(out, host)
    assert dlpack.live_exports() == 1
    del out
    gc.collect()
    assert dlpack.live_exports() == 0


def test_dlpack_dtypes():
    for name in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64", "complex64", "complex128"]:
        code, bits = dlpack.dlpack_dtype(np.dtype(name))
        assert dlpack.numpy_dtype(code, bits) == np.dtype(name)
    assert dlpack.dlpack_dtype(np.dtype(bool)) == (6, 8)
    assert dlpack.dlpack_dtype(np.dtype(np.float32)) == (2, 32)
    with pytest.raises(BufferError):
        dlpack.dlpack_dtype(np.dtype(np.longdouble))
    with pytest.raises(TypeError):
        dlpack.numpy_dtype(2, 32, lanes=4)


def test_from_dlpack_errors(fake):
    with pytest.raises(TypeError, match="DLPack"):
        kd.from_dlpack([1, 2, 3])

    class OnDevice1:
        def __dlpack_device__(self):
            return (2, 1)

        def __dlpack__(self, **kwargs):
            raise AssertionError("not called")

    with pytest.raises(ValueError, match="device 1"):
        kd.from_dlpack(OnDevice1())


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["tpu", "cuda:1", "gpu"])
def test_unknown_devices(device):
    for make in (lambda: kd.zeros(3, device=device), lambda: kd.array([1.0], device=device),
                 lambda: kd.zeros(3).to(device)):
        with pytest.raises(ValueError) as info:
            make()
        assert repr(device) in str(info.value)


def test_cuda_python_missing(monkeypatch):
    for name in ("cuda", "cuda.bindings", "cuda.bindings.driver"):
        monkeypatch.setitem(sys.modules, name, None)
    driver_module.reset_driver()
    with pytest.raises(RuntimeError, match=r"install kdsl\[cuda\]") as info:
        kd.zeros(3, device="cuda")
    assert isinstance(info.value, ValueError) and "device='cpu'" in str(info.value)
    assert not driver_module.is_available()
    kd.synchronize()  # nothing was ever queued: nothing to do


def test_real_driver_without_a_gpu_is_a_clear_error():
    driver_module.reset_driver()
    if driver_module.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="CUDA is not available") as info:
        kd.ones(2, device="cuda")
    assert "cuda" in str(info.value) and "cpu" in str(info.value)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        kd.zeros(2).to("cuda")


def test_cpu_use_never_imports_cuda(run_python, tmp_path):
    (tmp_path / "cpu_only.py").write_text(
        "import sys\n"
        "import numpy as np\n"
        "import kdsl as kd\n"
        "@kd.kernel\n"
        "def double(a: kd.Array[kd.f32]):\n"
        "    for i in kd.prange(a.shape[0]):\n"
        "        a[i] = 2.0 * a[i]\n"
        "a = kd.array(np.arange(4, dtype=np.float32))\n"
        "double(a)\n"
        "assert a.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]\n"
        "kd.zeros_like(a); kd.ones(3); kd.full(2, 1.0); kd.from_dlpack(np.ones(2))\n"
        "kd.synchronize()\n"
        "CUDA_MODULES = sorted(m for m in sys.modules if m == 'cuda' or m.startswith('cuda.'))\n")
    result = run_python("import cpu_only; print(cpu_only.CUDA_MODULES)", path=tmp_path,
                        env={"KDSL_CACHE": "0"})
    assert result.stdout.strip() == "[]"


# --- the driver wrapper, over a fake cuda.bindings module ------------------------------


class FakeBindings:
    """Enough of ``cuda.bindings.driver``: real enums, calls recorded, results scripted."""

    def __init__(self, cu) -> None:
        self.CUresult = cu.CUresult
        self.CUdevice_attribute = cu.CUdevice_attribute
        self.CUevent_flags = cu.CUevent_flags
        self.calls: list[tuple] = []
        self.fail: dict[str, list] = {}  # name -> CUresults to return first
        self.pools = 1
        self.next_ptr = 0x1000

    def _result(self, name, *values):
        failures = self.fail.get(name)
        if failures:
            return (failures.pop(0),) + tuple(None for _ in values)
        return (self.CUresult.CUDA_SUCCESS, *values)

    def __getattr__(self, name):
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args):
            self.calls.append((name, threading.get_ident(), *args))
            if name in ("cuMemAllocAsync", "cuMemAlloc"):
                self.next_ptr += 0x100
                return self._result(name, self.next_ptr)
            if name == "cuDeviceGetAttribute":
                pools = self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
                values: tuple = (self.pools if args[0] == pools else 9,)
            else:
                values = {"cuDeviceGet": (0,), "cuDevicePrimaryCtxRetain": ("ctx",),
                          "cuDriverGetVersion": (13000,), "cuModuleLoadData": ("module",),
                          "cuModuleGetFunction": (0xF00,), "cuEventCreate": ("event",),
                          "cuDeviceGetName": (b"Fake GPU\x00\x00\x00",),
                          "cuGetErrorString": (b"described",)}.get(name, ())
            return self._result(name, *values)

        return call

    def names(self):
        return [c[0] for c in self.calls if c[0] != "cuGetErrorString"]


@pytest.fixture
def bindings(monkeypatch):
    cu = pytest.importorskip("cuda.bindings.driver")
    fake_bindings = FakeBindings(cu)
    monkeypatch.setattr(driver_module, "_import_bindings", lambda: fake_bindings)
    return fake_bindings


def test_driver_initialises_and_calls(bindings):
    d = driver_module.Driver()
    assert bindings.names()[:4] == ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
                                    "cuCtxSetCurrent"]
    ptr = d.alloc(0)
    assert bindings.calls[-1][2:] == (1, 0)  # at least one byte, on stream 0
    d.free(ptr)
    assert bindings.calls[-1][0] == "cuMemFreeAsync" and bindings.calls[-1][2:] == (ptr, 0)
    host = np.arange(4, dtype=np.float32)
    d.copy_to_device(ptr, host)
    assert bindings.calls[-1][0] == "cuMemcpyHtoD"
    assert bindings.calls[-1][2:] == (ptr, host.ctypes.data, 16)
    d.copy_to_host(host, ptr)
    assert bindings.calls[-1][2:] == (host.ctypes.data, ptr, 16)
    with pytest.raises(ValueError):
        d.copy_to_device(ptr, np.ones((4, 4))[:, ::2])
    d.copy_device(1, 2, 3)
    assert bindings.calls[-1][0] == "cuMemcpyDtoDAsync" and bindings.calls[-1][2:] == (1, 2, 3, 0)
    d.memset(5, 10, 0x1FF)
    assert bindings.calls[-1][2:] == (5, 0xFF, 10, 0)
    d.load_module(b".version 8.0")
    assert bindings.calls[-1][2:] == (b".version 8.0\x00",)
    d.load_module(b"\x7fELF...")
    assert bindings.calls[-1][2:] == (b"\x7fELF...",)
    assert d.get_function("module", "kern") == 0xF00
    assert bindings.calls[-1][3] == b"kern"
    assert d.compute_capability() == (9, 9) and d.driver_version() == 13000
    assert d.device_name() == "Fake GPU"
    d.synchronize()
    assert bindings.calls[-1][0] == "cuCtxSynchronize"
    d.stream_wait(7, 0)
    assert bindings.names()[-4:] == ["cuEventCreate", "cuEventRecord", "cuStreamWaitEvent",
                                     "cuEventDestroy"]


def test_driver_makes_its_context_current_in_every_thread(bindings):
    d = driver_module.Driver()
    d.alloc(8)
    worker = threading.Thread(target=lambda: (d.alloc(8), d.alloc(8)))
    worker.start()
    worker.join()
    current = [c[1] for c in bindings.calls if c[0] == "cuCtxSetCurrent"]
    assert len(current) == 2 and current[1] == worker.ident


def test_driver_errors(bindings):
    cu = bindings.CUresult
    d = driver_module.Driver()
    bindings.fail["cuMemcpyDtoH"] = [cu.CUDA_ERROR_ILLEGAL_ADDRESS]
    with pytest.raises(kd.CudaError) as info:
        d.copy_to_host(np.empty(2), 1)
    error = info.value
    assert isinstance(error, RuntimeError) and error.name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert error.code == int(cu.CUDA_ERROR_ILLEGAL_ADDRESS) and "cuMemcpyDtoH" in str(error)
    assert "described" in str(error)
    # out of memory: collect, synchronize, retry once, then MemoryError
    bindings.fail["cuMemAllocAsync"] = [cu.CUDA_ERROR_OUT_OF_MEMORY]
    assert d.alloc(64) > 0 and "cuCtxSynchronize" in bindings.names()
    bindings.fail["cuMemAllocAsync"] = [cu.CUDA_ERROR_OUT_OF_MEMORY] * 2
    with pytest.raises(MemoryError, match="CUDA_ERROR_OUT_OF_MEMORY"):
        d.alloc(1 << 40)


def test_driver_falls_back_to_synchronous_allocation(bindings):
    cu = bindings.CUresult
    d = driver_module.Driver()
    bindings.fail["cuMemAllocAsync"] = [cu.CUDA_ERROR_NOT_SUPPORTED]
    ptr = d.alloc(16)
    d.free(ptr)
    assert bindings.names()[-3:] == ["cuMemAllocAsync", "cuMemAlloc", "cuMemFree"]
    bindings.pools = 0
    d = driver_module.Driver()
    d.free(d.alloc(16))
    assert bindings.names()[-2:] == ["cuMemAlloc", "cuMemFree"]


def test_driver_without_a_device(bindings):
    bindings.fail["cuInit"] = [bindings.CUresult.CUDA_ERROR_NO_DEVICE]
    with pytest.raises(RuntimeError, match="CUDA_ERROR_NO_DEVICE"):
        driver_module.Driver()


def test_get_driver_creates_one_driver(monkeypatch):
    created = []

    class Slow:
        def __init__(self):
            created.append(self)
            threading.Event().wait(0.05)

    monkeypatch.setattr(driver_module, "Driver", Slow)
    driver_module.reset_driver()
    try:
        assert driver_module.current_driver() is None
        results = []
        threads = [threading.Thread(target=lambda: results.append(driver_module.get_driver()))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(created) == 1 and all(r is created[0] for r in results)
    finally:
        driver_module.reset_driver()

"""Random numbers in kernels: Philox-4x32-10 blocks indexed by the seed, the call, the
parallel loop, the iteration and the draw; the same numbers compiled, in plain Python,
with any number of threads, and on the (emulated) CUDA device."""

import kdsl_cuda_testing as cuda_testing
import numpy as np
import pytest
from kdsl_cpu_util import with_threads

import kdsl as kd
from kdsl.random_numbers import SERIAL_LOOP, philox4x32, uniform_from_words

# Known-answer vectors of Philox-4x32-10 from Random123 (kat_vectors)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,expected", KAT)
def test_philox_known_answers(counter, key, expected):
    assert philox4x32(counter, key) == expected


@kd.kernel
def draws(uniform, ints, normals, low: kd.i64, high: kd.i64):
    first = kd.random()
    for i in kd.prange(uniform.shape[0]):
        uniform[i] = kd.random()
        ints[i] = kd.randint(low, high)
        if i % 3 == 0:
            normals[i] = kd.randn()
        else:
            for _k in range(i % 4):
                normals[i] += kd.random()
    for step in range(2):
        for i, j in kd.ndrange((1, 3), 2):
            uniform[i * 2 + j] += kd.random() * (step + 1)
    return first + kd.random()


def _run(kernel, seed, n=257, low=-3, high=10, threads=None):
    kd.seed(seed)
    arrays = (np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n))
    if threads is None:
        result = kernel(*arrays, low, high)
    else:
        result = with_threads(threads, kernel, *arrays, low, high)
    return (result, *arrays)


def _assert_same_numbers(a, b, normal_rtol=1e-12):
    result, uniform, ints, normals = a
    np.testing.assert_array_equal(uniform, b[1])
    np.testing.assert_array_equal(ints, b[2])
    np.testing.assert_allclose(normals, b[3], rtol=normal_rtol, atol=1e-14)
    assert float(result) == float(b[0])


@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_draws_equal_the_plain_python_stream(threads):
    compiled = _run(draws, 2024, threads=threads)
    python = _run(draws.python, 2024)
    _assert_same_numbers(compiled, python)
    uniform, ints = compiled[1], compiled[2]
    assert len(set(uniform.tolist())) == uniform.size  # never all zero, never repeated
    assert ints.min() == -3 and ints.max() == 9


def test_numbers_do_not_depend_on_the_thread_count():
    _assert_same_numbers(_run(draws, 5, n=5000, threads=1), _run(draws, 5, n=5000, threads=2),
                         normal_rtol=0)


def test_seed_and_call_count_select_the_stream():
    first = _run(draws, 7)
    again = _run(draws, 7)
    _assert_same_numbers(first, again, normal_rtol=0)
    other_seed = _run(draws, 8)
    assert not np.array_equal(first[1], other_seed[1])
    kd.seed(7)
    arrays = (np.zeros(257), np.zeros(257, dtype=np.int64), np.zeros(257))
    draws(*arrays, -3, 10)
    draws(*arrays, -3, 10)  # the second call since the seed: another stream
    second_call = arrays[0]
    assert not np.array_equal(second_call, first[1])


@kd.kernel
def one_draw_per_iteration(out):
    for i, j in kd.ndrange((2, 4), 3):
        out[i, j] = kd.random()
    serial = kd.random()
    for i in kd.prange(out.shape[0]):
        out[i, 0] += kd.random() + kd.random()
    return serial


def test_the_stream_is_indexed_by_call_loop_iteration_and_draw():
    seed = 2**40 + 12345
    key = (seed & 0xFFFFFFFF, seed >> 32)
    kd.seed(seed)
    one_draw_per_iteration(np.zeros((4, 3)))  # call 0
    out = np.zeros((4, 3))
    serial = one_draw_per_iteration(out)  # call 1
    expected = np.zeros((4, 3))
    for index, (i, j) in enumerate((i, j) for i in range(2, 4) for j in range(3)):
        block = philox4x32((0, index, 0, 1), key)  # draw 0, iteration, loop 0, call 1
        expected[i, j] = uniform_from_words(block[0], block[1])
    for i in range(4):
        for draw in (0, 1):
            block = philox4x32((draw, i, 1, 1), key)  # the second parallel loop
            expected[i, 0] += uniform_from_words(block[0], block[1])
    block = philox4x32((0, 0, SERIAL_LOOP, 1), key)  # serial code: its own draw count
    assert serial == uniform_from_words(block[0], block[1])
    np.testing.assert_array_equal(out, expected)


@kd.kernel
def many(out):
    for i in kd.prange(out.shape[0]):
        out[i, 0] = kd.random()
        out[i, 1] = kd.randn()
        out[i, 2] = kd.randint(0, 6)


def test_distributions():
    kd.seed(1)
    out = np.zeros((200_000, 3))
    many(out)
    u, z, k = out[:, 0], out[:, 1], out[:, 2]
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    counts = np.bincount(k.astype(np.int64), minlength=6)
    assert counts.size == 6 and np.all(np.abs(counts / k.size - 1 / 6) < 0.005)


@kd.kernel
def to_f32(out):
    for i in kd.prange(out.shape[0]):
        out[i] = out[i] * 0.5 + kd.random()  # a weak f64: f32 arithmetic, as a Python float


def test_random_is_weak_like_a_python_float():
    x = np.ones(64, dtype=np.float32)
    kd.seed(3)
    to_f32(x)
    y = np.ones(64, dtype=np.float32)
    kd.seed(3)
    to_f32.python(y)
    np.testing.assert_array_equal(x, y)
    assert "f64" not in to_f32.ir(x).split("parallel_for")[1].split("array_store")[1]


def test_random_outside_kernels_and_seed_checks():
    kd.seed(0)
    x = kd.random()
    kd.seed(0)
    assert kd.random() == x and 0.0 <= x < 1.0
    assert isinstance(kd.randint(2, 5), int) and kd.randint(5, 5) == 5
    with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
        kd.seed(-1)
    with pytest.raises(TypeError, match="integer"):
        kd.seed(1.5)


@pytest.mark.parametrize("body,message", [
    ("x = kd.random() if i > 0 else 0.0", "conditional expression"),
    ("x = i > 0 and kd.random() > 0.5", "conditional expression"),
    ("x = kd.randint(0.5, 2)", "takes integers"),
    ("x = kd.random(2)", "takes no arguments"),
])
def test_errors(body, message):
    from kdsl_cpu_util import module_from_source

    module = module_from_source(f"""
        @kd.kernel
        def k(a):
            for i in kd.prange(a.shape[0]):
                x = 0.0
                {body}
                a[i] = x
        """)
    with pytest.raises(kd.CompileError, match=message):
        module.k(np.zeros(3))


@pytest.mark.skipif(not cuda_testing.enabled(), reason="CUDA tests are off")
def test_the_same_numbers_on_the_cuda_device():
    expected = _run(draws, 99)
    kd.seed(99)
    with cuda_testing.on_device():
        arrays = tuple(kd.array(a, device="cuda") for a in
                       (np.zeros(257), np.zeros(257, dtype=np.int64), np.zeros(257)))
        result = draws(*arrays, -3, 10)
        got = (result, *(a.numpy() for a in arrays))
    _assert_same_numbers(got, expected)


@kd.kernel
def nested(out):
    for i in kd.prange(out.shape[0]):
        for j in kd.prange(out.shape[1]):  # runs serially: draws of iteration i
            out[i, j] = kd.random()


def test_a_nested_parallel_loop_draws_for_the_outer_iteration():
    kd.seed(11)
    out = np.zeros((5, 4))
    nested(out)
    kd.seed(11)
    expected = np.zeros((5, 4))
    nested.python(expected)
    np.testing.assert_array_equal(out, expected)
    key = (11, 0)
    block = philox4x32((3, 2, 0, 0), key)  # draw 3 of iteration 2
    assert out[2, 3] == uniform_from_words(block[0], block[1])


@kd.func
def jitter(x):
    return x + kd.random() - 0.5


@kd.func
def jitter_twice(x):
    return jitter(x) + kd.randn() * 0.01


@kd.kernel
def with_funcs(a):
    first = jitter_twice(1.0)
    for i in kd.prange(a.shape[0]):
        a[i] = jitter(a[i]) + kd.random()
        if i % 2 == 0:
            a[i] += jitter_twice(a[i])
    return first


def test_funcs_draw_from_a_stream_keyed_by_their_call():
    a = np.arange(40.0)
    kd.seed(3)
    first = with_funcs(a)
    expected = np.arange(40.0)
    kd.seed(3)
    expected_first = with_funcs.python(expected)
    np.testing.assert_allclose(a, expected, rtol=1e-13)
    assert first == pytest.approx(expected_first, rel=1e-13)
    # a call of a func that draws is one draw of its caller: the func's key is that block
    key = (3, 0)
    caller = philox4x32((0, 5, 0, 0), key)  # draw 0 of iteration 5: jitter's key
    inner = philox4x32((0, 0, SERIAL_LOOP, 0), (caller[0], caller[1]))
    own = philox4x32((1, 5, 0, 0), key)  # draw 1 of iteration 5
    assert a[5] == 5.0 + uniform_from_words(inner[0], inner[1]) - 0.5 + uniform_from_words(
        own[0], own[1])


@pytest.mark.skipif(not cuda_testing.enabled(), reason="CUDA tests are off")
def test_funcs_draw_the_same_numbers_on_the_cuda_device():
    kd.seed(4)
    expected = np.arange(40.0)
    expected_first = with_funcs.python(expected)
    kd.seed(4)
    with cuda_testing.on_device():
        a = kd.array(np.arange(40.0), device="cuda")
        first = with_funcs(a)
        got = a.numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert float(first) == pytest.approx(expected_first, rel=1e-12)


@kd.kernel
def unrolled(out):
    for i, j in kd.static(kd.ndrange(2, 2)):  # unrolled: serial code, not a parallel loop
        out[i, j] = kd.random()
    for i in kd.prange(2):
        out[i, 0] += kd.random()


def test_static_ndrange_draws_as_serial_code():
    kd.seed(8)
    out = np.zeros((2, 2))
    unrolled(out)
    kd.seed(8)
    expected = np.zeros((2, 2))
    unrolled.python(expected)
    np.testing.assert_array_equal(out, expected)
    block = philox4x32((3, 0, SERIAL_LOOP, 0), (8, 0))  # the fourth serial draw
    assert out[1, 1] == uniform_from_words(block[0], block[1])

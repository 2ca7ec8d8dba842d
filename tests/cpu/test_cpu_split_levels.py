"""The part of a split module that holds no loop and no parallel region (the entry's
argument checks and its calls of the regions) is compiled at LLVM's light levels, the
regions at O3; the kernel gives the results of its own Python function either way."""

import numpy as np
import pytest
from llvmlite import ir

import kdsl as kd
from kdsl.codegen import cpu, llvm_direct, split_module


def cfg(edges: dict[int, list[int]], blocks: int) -> ir.Function:
    """A function whose block k branches to the blocks ``edges[k]`` (none: returns; three:
    a switch)."""
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(32)]), "f")
    bbs = [fn.append_basic_block(f"b{k}") for k in range(blocks)]
    for k, block in enumerate(bbs):
        b = ir.IRBuilder(block)
        targets = [bbs[t] for t in edges.get(k, [])]
        if not targets:
            b.ret_void()
        elif len(targets) == 1:
            b.branch(targets[0])
        elif len(targets) == 2:
            b.cbranch(b.icmp_signed("<", fn.args[0], ir.Constant(ir.IntType(32), 0)), *targets)
        else:
            switch = b.switch(fn.args[0], targets[0])
            for value, target in enumerate(targets[1:]):
                switch.add_case(value, target)
    return fn


@pytest.mark.parametrize("edges, blocks, loop", [
    ({}, 1, False),
    ({0: [1, 2], 1: [3], 2: [3]}, 4, False),  # a diamond
    ({0: [2], 2: [1, 3], 1: [3]}, 4, False),  # blocks out of order, no cycle
    ({0: [1], 1: [1, 2]}, 3, True),  # a block branching to itself
    ({0: [2], 1: [2], 2: [1, 3]}, 4, True),  # the header after its latch in the list
    ({0: [1, 2, 3], 2: [0]}, 4, True),  # a switch case back to the entry
])
def test_has_loop_finds_every_cycle_and_only_cycles(edges, blocks, loop):
    assert split_module.has_loop(cfg(edges, blocks)) is loop


@pytest.fixture
def levels(monkeypatch, tmp_path):
    """Every module with a parallel region is split, into a cache of its own; records the
    optimisation level each part is compiled at."""
    monkeypatch.setattr(split_module, "MIN_COST", 0)
    monkeypatch.setattr(split_module, "MIN_SHARE", 0.0)
    monkeypatch.setattr(cpu, "usable_cores", lambda: 2)
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    seen: list[int] = []
    real = cpu.compile_to_object
    real_direct = llvm_direct.compile_to_object

    def recording(text, machine=None, cpu_seconds=None, level=3):
        seen.append(level)
        return real(text, machine, cpu_seconds, level)

    def recording_direct(text, opt, level, cpu_seconds=None):
        if "@kdsl.warm_up" not in text:  # LLVM's warm-up on the thread that loads it
            seen.append(level)
        return real_direct(text, opt, level, cpu_seconds)

    # a part compiles through llvmlite.binding or through llvmlite's C functions directly
    monkeypatch.setattr(cpu, "compile_to_object", recording)
    monkeypatch.setattr(llvm_direct, "compile_to_object", recording_direct)
    return seen


@kd.kernel
def shifted_roots(a: kd.Array[kd.f32], out: kd.Array[kd.f32], s: kd.f32):
    for i in kd.prange(a.shape[0]):
        out[i] = s * a[i] + kd.sqrt(kd.abs(a[i]))


@kd.kernel
def with_serial_prefix(a: kd.Array[kd.f64], out: kd.Array[kd.f64]) -> kd.f64:
    first = 0.0
    for k in range(3):  # a loop in the entry: no part is light
        first += a[k] * a[k]
    for i in kd.prange(a.shape[0]):
        out[i] = a[i] * first
    return first


def test_the_entry_part_compiles_light_and_the_region_at_o3(levels, rng):
    a = rng.uniform(-2.0, 2.0, 1001).astype(np.float32)
    out, want = np.zeros_like(a), np.zeros_like(a)
    shifted_roots(a, out, np.float32(1.5))
    shifted_roots.python(a, want, np.float32(1.5))
    assert sorted(levels) == [cpu.LIGHT_PIPELINE, 3]
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_an_entry_with_a_loop_compiles_at_o3(levels, rng):
    a = rng.uniform(-2.0, 2.0, 257)
    out, want = np.zeros_like(a), np.zeros_like(a)
    got = with_serial_prefix(a, out)
    assert got == pytest.approx(with_serial_prefix.python(a, want), rel=1e-14)
    assert levels == [3, 3]
    np.testing.assert_allclose(out, want, rtol=1e-14)



@kd.kernel
def two_regions(a: kd.Array[kd.f32], out: kd.Array[kd.f32], back: kd.Array[kd.f32]):
    for i in kd.prange(a.shape[0]):
        out[i] = kd.exp(-kd.abs(a[i])) * a[i]
    for i in kd.prange(a.shape[0]):
        back[i] = out[a.shape[0] - 1 - i] + kd.sqrt(kd.abs(a[i]))


def test_regions_get_parts_of_their_own_beside_a_light_entry_part(levels, rng):
    a = rng.uniform(-2.0, 2.0, 3001).astype(np.float32)
    got = np.zeros_like(a), np.zeros_like(a)
    want = np.zeros_like(a), np.zeros_like(a)
    two_regions(a, *got)
    two_regions.python(a, *want)
    assert sorted(levels) == [cpu.LIGHT_PIPELINE, 3, 3]  # the entry's part and one per region
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def module_with(region_sizes: list[int], entry_loops: bool) -> ir.Module:
    """An entry point (a loop in it or not) and internal regions of straight-line code."""
    module = ir.Module()
    i64 = ir.IntType(64)
    for k, size in enumerate(region_sizes):
        fn = ir.Function(module, ir.FunctionType(i64, [i64]), f"k.parallel.{k + 1}")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        value = fn.args[0]
        for _ in range(size):
            value = b.mul(value, value)
        b.ret(value)
    entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64]), "kdsl_entry")
    first, body, done = (entry.append_basic_block(name) for name in ("entry", "body", "done"))
    ir.IRBuilder(first).branch(body)
    b = ir.IRBuilder(body)
    if entry_loops:
        b.cbranch(b.icmp_signed("<", entry.args[0], ir.Constant(i64, 0)), body, done)
    else:
        b.branch(done)
    ir.IRBuilder(done).ret_void()
    return module


def test_plans_with_a_light_entry_part():
    names = lambda plan: None if plan is None else [[f.name for f in p] for p in plan]  # noqa: E731
    # one region far costlier than the entry: split all the same, the entry part light
    assert names(split_module.plan_parts(module_with([2000], False), 2)) == [
        [], ["k.parallel.1"]]
    # two regions of about one cost: one part each
    assert names(split_module.plan_parts(module_with([400, 300], False), 2)) == [
        [], ["k.parallel.1"], ["k.parallel.2"]]
    # one of them too small for a part of its own: both in one part
    assert names(split_module.plan_parts(module_with([2000, 20], False), 2)) == [
        [], ["k.parallel.1", "k.parallel.2"]]
    # an entry with a loop is no light part: part 0 takes regions as its cost allows
    assert split_module.plan_parts(module_with([2000], True), 2) is None
    assert names(split_module.plan_parts(module_with([400, 300], True), 2)) == [
        ["k.parallel.2"], ["k.parallel.1"]]
    assert split_module.plan_parts(module_with([400, 300], False), 1) is None

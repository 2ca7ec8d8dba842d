"""The ``device_scan`` op on a CUDA device: running sums by block scans built from warp
shuffles, two levels deep.

A launch covers the array with at most ``MAX_SCAN_BLOCKS`` blocks of 256 threads, each
block a tile of consecutive elements (a multiple of 256 long):

1. ``reduce``: each block sums its tile (each thread a strided share, then butterfly
   shuffles within each warp and the warps' totals through shared memory);
2. ``scan`` of those block sums, exclusive, by one block: each block's start;
3. ``scan`` of the array: each block walks its tile 256 elements at a time. A warp scans
   its 32 values with ``shfl.sync.up`` (five steps; a lane below the distance keeps its
   own value), the warps' totals go through shared memory, and each thread adds the
   totals of the warps before its own, the block's start and the tiles before it.

One block's array (up to 256 elements a chunk, any number of chunks) skips steps 1-2.
Sums are in the type of ``out`` (NumPy's cumsum type), added in order within a thread's
values; float sums associate differently from a serial loop, as the CPU's blocked scan does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import ArrayView, i1, i8, i8_ptr, i32, i64, memory_type, void
from kdsl.ir.core import Operation

if TYPE_CHECKING:
    from kdsl.codegen.device_kernel import DeviceEmitter
    from kdsl.codegen.host_launch import HostEmitter

THREADS = 256  # the device's BLOCK_SIZE
WARP = 32
WARPS = THREADS // WARP
MAX_SCAN_BLOCKS = 1024  # block sums fit the scratch buffer's partials


# --- device kernels --------------------------------------------------------------------


def scan_kernels(device: DeviceEmitter, source: T.ScalarType, result: T.ScalarType) -> tuple[int, int]:
    """The indices (in ``device.functions``) of the ``reduce`` kernel of ``source`` values
    and the ``scan`` kernel of ``source`` values into ``result`` (made once per module)."""
    made = device.scan_kernel_indices
    for kind in ("reduce", "scan"):
        key = (kind, source, result)
        if key not in made:
            (_reduce_kernel if kind == "reduce" else _scan_kernel)(device, source, result)
            made[key] = len(device.functions) - 1
    return made[("reduce", source, result)], made[("scan", source, result)]


def _kernel(device: DeviceEmitter, kind: str, types: list[ir.Type]) -> ir.Function:
    from kdsl.codegen.device_kernel import DeviceFunction

    name = f"{device.kernel.name}_{kind}_{len(device.functions) + 1}".replace(".", "_")
    fn = ir.Function(device.module, ir.FunctionType(void, types), name)
    device.module.add_named_metadata("nvvm.annotations", [fn, "kernel", ir.Constant(i32, 1)])
    device._start_function(fn)
    device.functions.append(DeviceFunction(name, types, "parallel", 0))
    return fn


def _shared(device: DeviceEmitter, result: T.ScalarType) -> ir.Value:
    """Shared memory for one value of each warp."""
    t = ir.ArrayType(memory_type(result), WARPS)
    g = ir.GlobalVariable(device.module, t, f"{device.functions[-1].name}_warps", addrspace=3)
    g.linkage = "internal"
    g.initializer = ir.Constant(t, ir.Undefined)
    return g


def _shared_slot(device: DeviceEmitter, shared: ir.Value, index: ir.Value) -> ir.Value:
    return device.b.gep(shared, [ir.Constant(i32, 0), index])


def _load_element(device: DeviceEmitter, data: ir.Value, stride: ir.Value, index: ir.Value,
                  source: T.ScalarType, result: T.ScalarType) -> ir.Value:
    b = device.b
    address = b.gep(data, [b.mul(index, stride)])
    raw = b.load(b.bitcast(address, memory_type(source).as_pointer()))
    value = b.trunc(raw, i1) if source.is_bool else raw
    return device.scalar.cast(source, result, value)


def _barrier(device: DeviceEmitter) -> None:
    device.b.call(device.scalar.function("llvm.nvvm.barrier0", void, []), [])


def _thread(device: DeviceEmitter) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The thread's index in its block, its lane and its warp (i64)."""
    x = device._sreg("tid.x")
    return x, device.b.and_(x, ir.Constant(i64, WARP - 1)), device.b.lshr(x, ir.Constant(i64, 5))


def _tile(device: DeviceEmitter, n: ir.Value, tile: ir.Value) -> tuple[ir.Value, ir.Value]:
    """This block's tile: its first element and the end (at most ``n``)."""
    b = device.b
    start = b.mul(device._sreg("ctaid.x"), tile)
    end = b.add(start, tile)
    return start, b.select(b.icmp_signed("<", end, n), end, n)


def _reduce_kernel(device: DeviceEmitter, source: T.ScalarType, result: T.ScalarType) -> None:
    """``reduce(data, stride, n, tile, sums)``: ``sums[block]`` (8 bytes apart) is the sum
    of the block's tile."""
    fn = _kernel(device, "scan_reduce", [i8_ptr, i64, i64, i64, i8_ptr])
    data, stride, n, tile, sums = fn.args
    b, add = device.b, device.scalar.op_add
    x, lane, warp = _thread(device)
    start, end = _tile(device, n, tile)
    zero = device.scalar.const(result, 0)

    def step(i: ir.Value, carried: list) -> list:
        return [add(result, carried[0], _load_element(device, data, stride, i, source, result))]

    (acc,) = device._counted_loop(b.add(start, x), end, ir.Constant(i64, THREADS), [zero],
                                  [result], step)
    for mask in (16, 8, 4, 2, 1):
        acc = add(result, acc, device._shuffle("bfly", acc, mask, 31))
    shared = _shared(device, result)
    with b.if_then(b.icmp_unsigned("==", lane, ir.Constant(i64, 0))):
        b.store(acc, _shared_slot(device, shared, warp))
    _barrier(device)
    with b.if_then(b.icmp_unsigned("==", x, ir.Constant(i64, 0))):
        total = zero
        for w in range(WARPS):
            total = add(result, total, b.load(_shared_slot(device, shared, ir.Constant(i64, w))))
        slot = b.gep(sums, [b.mul(device._sreg("ctaid.x"), ir.Constant(i64, 8))])
        b.store(total, b.bitcast(slot, memory_type(result).as_pointer()))
    b.ret_void()
    device._finish_function(fn)


def _scan_kernel(device: DeviceEmitter, source: T.ScalarType, result: T.ScalarType) -> None:
    """``scan(data, stride, out, out_stride, n, tile, starts, exclusive)``: the running
    sums of the block's tile written to ``out``, each plus the block's start
    (``starts[block]``, 8 bytes apart, or 0 where ``starts`` is 0)."""
    fn = _kernel(device, "scan", [i8_ptr, i64, i8_ptr, i64, i64, i64, i64, i8])
    data, stride, out, out_stride, n, tile, starts, exclusive_byte = fn.args
    b, add = device.b, device.scalar.op_add
    x, lane, warp = _thread(device)
    start, end = _tile(device, n, tile)
    zero = device.scalar.const(result, 0)
    exclusive = b.icmp_unsigned("!=", exclusive_byte, ir.Constant(i8, 0))
    has_starts = b.icmp_unsigned("!=", starts, ir.Constant(i64, 0))
    result_ptr = memory_type(result).as_pointer()
    entry = b.block
    with b.if_then(has_starts):
        address = b.gep(b.inttoptr(starts, i8_ptr), [b.mul(device._sreg("ctaid.x"),
                                                          ir.Constant(i64, 8))])
        given = b.load(b.bitcast(address, result_ptr))
        then = b.block
    carry0 = b.phi(given.type)
    carry0.add_incoming(zero, entry)
    carry0.add_incoming(given, then)
    shared = _shared(device, result)

    def chunk(first: ir.Value, carried: list) -> list:
        carry = carried[0]
        i = b.add(first, x)
        inside = b.icmp_signed("<", i, end)
        entry = b.block
        with b.if_then(inside):
            loaded = _load_element(device, data, stride, i, source, result)
            then = b.block
        v = b.phi(loaded.type)
        v.add_incoming(zero, entry)
        v.add_incoming(loaded, then)
        # the warp's inclusive scan: a lane below the distance keeps its value
        inclusive: ir.Value = v
        for distance in (1, 2, 4, 8, 16):
            up = device._shuffle("up", inclusive, distance, 0)
            reaches = b.icmp_unsigned(">=", lane, ir.Constant(i64, distance))
            inclusive = b.select(reaches, add(result, inclusive, up), inclusive)
        before = device._shuffle("up", inclusive, 1, 0)
        before = b.select(b.icmp_unsigned("==", lane, ir.Constant(i64, 0)), zero, before)
        with b.if_then(b.icmp_unsigned("==", lane, ir.Constant(i64, WARP - 1))):
            b.store(inclusive, _shared_slot(device, shared, warp))
        _barrier(device)
        offset, total = zero, zero
        for w in range(WARPS):
            s = b.load(_shared_slot(device, shared, ir.Constant(i64, w)))
            earlier = b.icmp_unsigned("<", ir.Constant(i64, w), warp)
            offset = add(result, offset, b.select(earlier, s, zero))
            total = add(result, total, s)
        mine = b.select(exclusive, before, inclusive)
        with b.if_then(inside):
            value = add(result, carry, add(result, offset, mine))
            address = b.gep(out, [b.mul(i, out_stride)])
            b.store(value, b.bitcast(address, result_ptr))
        _barrier(device)  # every thread has read the warps' totals before the next chunk
        return [add(result, carry, total)]

    device._counted_loop(start, end, ir.Constant(i64, THREADS), [carry0], [result], chunk)
    b.ret_void()
    device._finish_function(fn)


# --- the host's launches -----------------------------------------------------------------


def _passed(host: HostEmitter, v: ir.Value) -> ir.Value:
    """An integer ``v`` as an instruction: launches pass only non-constant fields."""
    return host.b.or_(v, ir.Constant(v.type, 0)) if isinstance(v, ir.Constant) else v


def launch_device_scan(host: HostEmitter, op: Operation) -> None:
    """The launches of ``device_scan %a, %out``."""
    from kdsl.codegen.abi import STATUS_SLOTS

    a_view: ArrayView = host.values[op.operands[0]]
    out_view: ArrayView = host.values[op.operands[1]]
    source = T.element_scalar(op.operands[0].type.dtype)
    result = T.element_scalar(op.operands[1].type.dtype)
    reduce_index, scan_index = scan_kernels(host.device, source, result)
    sums_index = scan_kernels(host.device, result, result)[1]
    host.scratch_slots = max(host.scratch_slots, STATUS_SLOTS + MAX_SCAN_BLOCKS)
    b = host.b
    n = _passed(host, a_view.shape[0])
    c = lambda k: ir.Constant(i64, k)  # noqa: E731
    one = ir.Constant(i32, 1)
    with b.if_then(b.icmp_signed(">", n, c(0))):
        wanted = b.udiv(b.add(n, c(THREADS - 1)), c(THREADS))
        wanted = b.select(b.icmp_unsigned("<", wanted, c(MAX_SCAN_BLOCKS)), wanted,
                          c(MAX_SCAN_BLOCKS))
        per_block = b.udiv(b.add(n, b.sub(wanted, c(1))), wanted)
        tile = b.mul(b.udiv(b.add(per_block, c(THREADS - 1)), c(THREADS)), c(THREADS))
        blocks = b.udiv(b.add(n, b.sub(tile, c(1))), tile)
        sums = host._results_pointer()
        several = b.icmp_unsigned(">", blocks, c(1))
        src, stride = _passed(host, a_view.data), _passed(host, a_view.strides[0])
        with b.if_then(several):
            host._launch(op, reduce_index, [src, stride, n, tile, sums],
                         (b.trunc(blocks, i32), one), THREADS)
            host._launch(op, sums_index, [sums, _passed(host, c(8)), sums, _passed(host, c(8)),
                                          blocks, blocks, _passed(host, c(0)),
                                          _passed(host, ir.Constant(i8, 1))], (one, one), THREADS)
        starts = b.select(several, b.ptrtoint(sums, i64), c(0))
        exclusive = _passed(host, ir.Constant(i8, int(bool(op.attrs["exclusive"]))))
        host._launch(op, scan_index, [src, stride, out_view.data, _passed(host, out_view.strides[0]),
                                      n, tile, starts, exclusive],
                     (b.trunc(blocks, i32), one), THREADS)

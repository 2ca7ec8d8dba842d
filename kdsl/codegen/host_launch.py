"""The host side of a CUDA kernel: native code that runs the kernel's serial part and
launches its device kernels in order.

Control flow, scalars, allocations and returns run on the host. Each top-level parallel
loop becomes a launch of a grid (see device_kernel.py); its reductions come back as one
partial per block, combined here. A run of serial operations that reads or writes array
memory (which is device memory) becomes a kernel of one thread, whose results come back
through the scratch buffer. A serial loop that contains parallel loops stays on the host
and launches them on each iteration.

Launches and copies call the CUDA driver's ``cuLaunchKernel`` and ``cuMemcpyDtoH_v2``
directly through the runtime hook table, on the legacy default stream: launches run in
order, and a copy back waits for the launches before it.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.abi import STATUS_SLOTS, ErrorCode
from kdsl.codegen.device_kernel import (
    BLOCK_SHIFT,
    BLOCK_SIZE,
    MAX_REDUCTION_BLOCKS,
    MIN_LANES_SHIFT,
    SLOT,
    DeviceEmitter,
    DeviceFunction,
    memory_type_of,
    to_parameter_type,
)
from kdsl.codegen.emit_kernel import CodegenOptions, KernelEmitter
from kdsl.codegen.llvm_types import (
    ArrayView,
    Repr,
    flat_types,
    flatten,
    i1,
    i8,
    i8_ptr,
    i32,
    i64,
    row_major_strides,
    unflatten,
)
from kdsl.ir.analysis import free_values, users
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.effects import element_access
from kdsl.ir.structured import ParallelForOp
from kdsl.records import dataclass

HOST_ONLY_OPS = frozenset({"array_new", "array_free", "array_null", "print", "parallel_for"})
MAX_GRID_X = 1 << 24
MAX_GRID_Y = 65535
REDUCTION_GRID_Y = 64


@dataclass
class EmittedCudaKernel:
    host: ir.Module
    device_ir: str
    functions: list[DeviceFunction]
    entry_name: str
    sites: list
    allocates: bool
    scratch_bytes: int
    device_sites: bool  # device code can report errors: read the status back


def _kind(op: Operation) -> str:
    """'launch' (holds a parallel loop), 'device' (touches memory), 'host' (must run on
    the host) or 'neutral' (runs anywhere)."""
    names = {inner.name for inner in op.walk()}
    if "parallel_for" in names or "device_scan" in names:
        return "launch"
    if op.name in HOST_ONLY_OPS:
        return "host"
    if any(element_access(inner) is not None for inner in op.walk()):
        return "device"
    return "neutral"


class HostEmitter(KernelEmitter):
    """Emits the host program of a CUDA kernel, and its device kernels alongside."""

    def __init__(self, kernel: Function, options: CodegenOptions, module_name: str) -> None:
        super().__init__(kernel, options, module_name)
        self.device = DeviceEmitter(kernel, options, f"{module_name}_device", self.sites)
        self.scratch_slots = STATUS_SLOTS
        self.scratch: ir.Value = None  # type: ignore[assignment]
        self.users = users(kernel)

    def emit_cuda(self, entry_name: str) -> EmittedCudaKernel:
        emitted = self.emit(entry_name)
        return EmittedCudaKernel(
            emitted.module, self.device.ir_text(), self.device.functions, entry_name, self.sites,
            emitted.allocates, self.scratch_slots * SLOT,
            self.device.reports_errors,
        )

    # --- entry and arguments -----------------------------------------------------------

    def _extra_entry_parameters(self) -> list[ir.Type]:
        return [i64]  # the device address of the scratch buffer

    def _bind_extra_entry_parameters(self, params: list[ir.Value]) -> None:
        self.scratch = self.b.inttoptr(params[0], i8_ptr)

    def _unpack_array(self, t: Any, obj: ir.Value) -> ArrayView:
        """A device array arrives as a descriptor (an int64 NumPy array): the data's
        device address, the sizes of all axes, then their byte strides."""
        descriptor = self.b.bitcast(self._ndarray_data(obj), i64.as_pointer())

        def word(k: int) -> ir.Value:
            return self.b.load(self.b.gep(descriptor, [ir.Constant(i64, k)]))

        n = t.full_ndim
        data = self.b.inttoptr(word(0), i8_ptr)
        shape = [word(1 + k) for k in range(t.free_ndim)]
        shape += [ir.Constant(i64, s) for s in t.fixed_shape]
        if t.contiguous:
            strides = row_major_strides(self.b, shape, T.element_scalar(t.dtype).itemsize)
        else:
            strides = [word(1 + n + k) for k in range(n)]
        return ArrayView(data, shape, strides)

    # --- partitioning blocks into host code and device kernels -------------------------

    def emit_block(self, block: Block) -> list[Repr]:
        ops = block.ops
        k = 0
        while k < len(ops):
            op = ops[k]
            if op.name in ("yield", "condition", "return"):
                return super().emit_block(Block_of([op]))
            if _kind(op) != "device":
                self.emit_op(op)
                k += 1
                continue
            end = k + 1
            while end < len(ops) and ops[end].name not in ("yield", "condition", "return") \
                    and _kind(ops[end]) in ("device", "neutral"):
                end += 1
            while _kind(ops[end - 1]) == "neutral":  # trailing computation stays on the host
                end -= 1
            self._emit_serial_kernel(ops[k:end])
            k = end
        return []

    def _outputs(self, group: list[Operation]) -> list[Value]:
        inside = {id(inner) for op in group for inner in op.walk()}
        outputs = []
        for op in group:
            for r in op.results:
                if any(id(user) not in inside for user in self.users.get(r, [])):
                    outputs.append(r)
        return outputs

    def _emit_serial_kernel(self, group: list[Operation]) -> None:
        free = free_values(Block_of(group))
        outputs = self._outputs(group)
        results = self._results_pointer()
        fields: list[ir.Value] = [self.scratch, results]
        for v in free:
            fields.extend(flatten(self.values[v], v.type))
        function = self.device.serial_kernel(group, free, fields, outputs)
        index = len(self.device.functions) - 1
        one = ir.Constant(i32, 1)
        self._launch(group[0], index, fields, (one, one), 1)
        slots = function.result_slots
        if not slots:
            return
        self.scratch_slots = max(self.scratch_slots, STATUS_SLOTS + slots)
        buffer = self._entry_alloca(i64, slots)
        self._copy_to_host(group[0], buffer, results, ir.Constant(i64, slots * SLOT))
        base = self.b.bitcast(buffer, i8_ptr)
        slot = 0
        for v in outputs:
            parts = []
            for lt in flat_types(v.type):
                parts.append(self._load_host_slot(base, ir.Constant(i64, slot), lt))
                slot += 1
            self.values[v] = unflatten(v.type, parts)

    # --- parallel loops -------------------------------------------------------------

    def emit_parallel_for(self, op: Operation) -> list[Repr]:
        loop = ParallelForOp(op)
        ndim, kinds, body = loop.ndim, op.attrs["reductions"], loop.body
        extents = [self.values[v] for v in loop.extents]
        inits = [self.values[v] for v in loop.inits]
        types = [r.type for r in op.results]
        free = free_values(body)
        partials = self._results_pointer()
        zero = ir.Constant(i64, 0)
        inner = self.scalar.op_max(T.i64, extents[-1], zero)
        outer: ir.Value = ir.Constant(i64, 1)
        for e in extents[:-1]:
            outer = self.b.mul(outer, self.scalar.op_max(T.i64, e, zero))
        fields: list[ir.Value] = [self.scratch, partials, *extents]
        rows_per_block: ir.Value = ir.Constant(i64, 1)
        shift: ir.Value = ir.Constant(i64, BLOCK_SHIFT)
        if ndim > 1:  # lanes per row: the last extent rounded up to a power of two, 32..256
            shift = ir.Constant(i64, MIN_LANES_SHIFT)
            for k in range(MIN_LANES_SHIFT, BLOCK_SHIFT):
                wider = self.b.icmp_signed(">", inner, ir.Constant(i64, 1 << k))
                shift = self.b.add(shift, self.b.zext(wider, i64))
            fields.append(shift)
            rows_per_block = self.b.lshr(ir.Constant(i64, BLOCK_SIZE), shift)
        for v in free:
            fields.extend(flatten(self.values[v], v.type))
        function = self.device.parallel_kernel(op, free, fields)
        index = len(self.device.functions) - 1
        lanes = self.b.shl(ir.Constant(i64, 1), shift)
        blocks = self.b.udiv(self.b.add(inner, self.b.sub(lanes, ir.Constant(i64, 1))), lanes)
        limit_y = REDUCTION_GRID_Y if types else MAX_GRID_Y
        row_blocks = self.b.udiv(self.b.add(outer, self.b.sub(rows_per_block, ir.Constant(i64, 1))),
                                 rows_per_block)
        grid_y = self._clamp(row_blocks, limit_y)
        limit_x: ir.Value = ir.Constant(i64, MAX_GRID_X)
        if types:
            limit_x = self.b.udiv(ir.Constant(i64, MAX_REDUCTION_BLOCKS), grid_y)
        grid_x = self.scalar.op_max(T.i64, self.scalar.op_min(T.i64, blocks, limit_x),
                                    ir.Constant(i64, 1))
        self._launch(op, index, fields, (self.b.trunc(grid_x, i32), self.b.trunc(grid_y, i32)),
                     BLOCK_SIZE)
        if not types:
            return []
        width = function.result_slots
        self.scratch_slots = max(self.scratch_slots, STATUS_SLOTS + MAX_REDUCTION_BLOCKS * width)
        count = self.b.mul(grid_x, grid_y)
        buffer = self._entry_alloca(i64, MAX_REDUCTION_BLOCKS * width)
        self._copy_to_host(op, buffer, partials,
                           self.b.mul(count, ir.Constant(i64, width * SLOT)))
        base = self.b.bitcast(buffer, i8_ptr)

        def combine(block: ir.Value, carried: list[Repr]) -> list[Repr]:
            out = []
            component = 0
            for kind, t, acc in zip(kinds, types, carried):
                parts = []
                for lt in flat_types(t):
                    slot = self.b.add(self.b.mul(block, ir.Constant(i64, width)),
                                      ir.Constant(i64, component))
                    parts.append(self._load_host_slot(base, slot, lt))
                    component += 1
                out.append(self._combine(kind, t, acc, unflatten(t, parts)))
            return out

        return self._counted_loop(ir.Constant(i64, 0), count, ir.Constant(i64, 1), inits, types,
                                  combine)

    def emit_device_scan(self, op: Operation) -> list[Repr]:
        from kdsl.codegen.device_scan import launch_device_scan

        launch_device_scan(self, op)
        return []

    def _clamp(self, value: ir.Value, limit: int) -> ir.Value:
        low = self.scalar.op_max(T.i64, value, ir.Constant(i64, 1))
        return self.scalar.op_min(T.i64, low, ir.Constant(i64, limit))

    # --- driver calls ------------------------------------------------------------------

    def _results_pointer(self) -> ir.Value:
        return self.b.gep(self.scratch, [ir.Constant(i64, STATUS_SLOTS * SLOT)])

    def _launch(self, op: Operation, index: int, fields: list[ir.Value],
                grid: tuple[ir.Value, ir.Value], block_x: int) -> None:
        passed = [f for f in fields if not isinstance(f, ir.Constant)]
        storage_t = ir.LiteralStructType([to_parameter_type(f.type) for f in passed])
        storage = self._entry_alloca(storage_t)
        params = self._entry_alloca(i8_ptr, max(len(passed), 1))
        for k, f in enumerate(passed):
            slot = self.b.gep(storage, [ir.Constant(i32, 0), ir.Constant(i32, k)])
            self.b.store(self.b.zext(f, i8) if f.type == i1 else f, slot)
            self.b.store(self.b.bitcast(slot, i8_ptr), self.b.gep(params, [ir.Constant(i64, k)]))
        table = self.hooks.load(self.b, "cuda_functions")
        handle = self.b.load(self.b.gep(table, [ir.Constant(i64, index)]))
        one = ir.Constant(i32, 1)
        null = ir.Constant(i8_ptr.as_pointer(), None)
        rc = self.b.call(self.hooks.load(self.b, "cuda_launch"), [
            handle, grid[0], grid[1], one, ir.Constant(i32, block_x), one, one,
            ir.Constant(i32, 0), ir.Constant(i8_ptr, None), params, null,
        ])
        failed = self.b.icmp_signed("!=", rc, ir.Constant(i32, 0))
        self._fail_if(failed, ErrorCode.LAUNCH, op, "a kernel launch", self.b.zext(rc, i64),
                      stop=True)

    def _copy_to_host(self, op: Operation, buffer: ir.Value, source: ir.Value,
                      nbytes: ir.Value) -> None:
        rc = self.b.call(self.hooks.load(self.b, "cuda_copy_to_host"), [
            self.b.bitcast(buffer, i8_ptr), self.b.ptrtoint(source, i64), nbytes,
        ])
        failed = self.b.icmp_signed("!=", rc, ir.Constant(i32, 0))
        self._fail_if(failed, ErrorCode.LAUNCH, op, "a copy from the device",
                      self.b.zext(rc, i64), stop=True)

    def _load_host_slot(self, base: ir.Value, index: ir.Value, t: ir.Type) -> ir.Value:
        address = self.b.gep(base, [self.b.mul(index, ir.Constant(i64, SLOT))])
        if isinstance(t, ir.PointerType):
            return self.b.inttoptr(self.b.load(self.b.bitcast(address, i64.as_pointer())), t)
        v = self.b.load(self.b.bitcast(address, memory_type_of(t).as_pointer()))
        return self.b.trunc(v, i1) if t == i1 else v


def Block_of(ops: list[Operation]) -> Block:  # noqa: N802 - reads as a constructor
    """A block holding ``ops`` (not attached: for walking and emitting them)."""
    block = Block([])
    block.ops = list(ops)
    return block


def emit_cuda_kernel(kernel: Function, options: CodegenOptions, entry_name: str) -> EmittedCudaKernel:
    return HostEmitter(kernel, options, entry_name).emit_cuda(entry_name)


"""Device code for NVIDIA GPUs: the kernels a host program launches, as NVVM IR.

libNVVM reads, for compute_90 and older, the LLVM 7 dialect: typed pointers, no
``fneg``/``freeze``/``atomicrmw fadd``, math through libdevice. llvmlite's IR builder
prints typed pointers, so the CPU emitter's lowering of every op is reused; this module
adds what differs on the device:

- a parallel loop becomes a kernel over a grid: the last axis spread over
  ``blockIdx.x * blockDim.x + threadIdx.x`` and the other axes (flattened) over
  ``blockIdx.y``, each with a grid-stride loop, so any extent fits any grid;
- reductions combine each thread's partial with warp shuffles, then across the warps of
  a block in shared memory; each block writes one partial, which the host combines
  (one second pass per block, not one atomic per element);
- atomics are PTX atomics (``atom.add.f32``/``f64`` through NVVM's intrinsics, float
  min/max as compare-and-swap loops);
- ``print`` is ``vprintf``; arrays made inside device code use the device heap;
- a run of serial code that reads or writes arrays becomes a kernel of one thread.

Every kernel takes its values as separate parameters: the status slots (for run-time
errors), the partials (or results) buffer, then the flattened values it uses.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.device_scalar import DeviceScalarEmitter
from kdsl.codegen.emit_kernel import KernelEmitter
from kdsl.codegen.llvm_types import (
    ArrayView,
    Repr,
    atomicrmw_operation,
    flat_types,
    flatten,
    i1,
    i8,
    i8_ptr,
    i32,
    i64,
    memory_type,
    row_major_strides,
    unflatten,
    void,
)
from kdsl.ir.core import Function, Operation, Value
from kdsl.records import dataclass

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
NVPTX_DATA_LAYOUT = (
    "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-"
    "f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
)
BLOCK_SIZE = 256
BLOCK_SHIFT = 8  # log2(BLOCK_SIZE)
MIN_LANES_SHIFT = 5  # rows of at least a warp
WARPS = BLOCK_SIZE // 32
MAX_REDUCTION_BLOCKS = 1024  # blocks of a launch with reductions: partials fit the scratch
SLOT = 8  # bytes per value in the partials and results buffers


@dataclass
class DeviceFunction:
    """One kernel of the device module and what the host needs to launch it."""

    name: str
    parameter_types: list[ir.Type]  # in the order of the non-constant fields
    kind: str  # "parallel" or "serial"
    result_slots: int  # reduction components (per block) or serial results


def to_parameter_type(t: ir.Type) -> ir.Type:
    """Kernel parameters: bools travel as bytes."""
    return i8 if t == i1 else t


class DeviceEmitter(KernelEmitter):
    """Emits the device kernels of one kdsl kernel into an NVVM module."""

    scalar_emitter = DeviceScalarEmitter
    declares_hooks = False

    def __init__(self, kernel: Function, options: Any, module_name: str, sites: list) -> None:
        super().__init__(kernel, options, module_name)
        self.sites = sites  # shared with the host emitter: one numbering of error sites
        self.reports_errors = False  # whether device code may write the status
        self.module.triple = NVPTX_TRIPLE
        self.module.data_layout = NVPTX_DATA_LAYOUT
        self.functions: list[DeviceFunction] = []
        self.scan_kernel_indices: dict[tuple, int] = {}  # see device_scan.scan_kernels
        version = self.module.add_metadata([ir.Constant(i32, 2), ir.Constant(i32, 0)])
        self.module.add_named_metadata("nvvmir.version", version)

    def _site(self, kind: int, op: Any, detail: str) -> int:
        self.reports_errors = True
        return super()._site(kind, op, detail)

    def ir_text(self) -> str:
        return str(self.module)

    # --- kernels ---------------------------------------------------------------------

    def _new_kernel(self, kind: str, fields: list[ir.Value]) -> tuple[ir.Function, list[ir.Value]]:
        """A kernel taking the non-constant ``fields`` (host values) as parameters; returns
        it and the fields as device values (constants stay constants)."""
        passed = [f for f in fields if not isinstance(f, ir.Constant)]
        types = [to_parameter_type(f.type) for f in passed]
        name = f"{self.kernel.name}_{kind}_{len(self.functions) + 1}".replace(".", "_")
        fn = ir.Function(self.module, ir.FunctionType(void, types), name)
        self.module.add_named_metadata("nvvm.annotations", [fn, "kernel", ir.Constant(i32, 1)])
        self._start_function(fn)
        params = iter(fn.args)
        loaded = []
        for f in fields:
            if isinstance(f, ir.Constant):
                loaded.append(f)
                continue
            p = next(params)
            loaded.append(self.b.trunc(p, i1) if f.type == i1 else p)
        self.functions.append(DeviceFunction(name, types, kind, 0))
        return fn, loaded

    def _bind_free_values(self, free: list[Value], parts: list[ir.Value]) -> None:
        position = 0
        for v in free:
            width = len(flat_types(v.type))
            self.values[v] = unflatten(v.type, parts[position:position + width])
            position += width

    def parallel_kernel(self, op: Operation, free: list[Value], fields: list[ir.Value]) -> DeviceFunction:
        """The kernel of a top-level parallel loop. ``fields``: status, partials, the
        extents, for two or more axes the log2 of the lanes per row, then the free
        values' parts (host values: only their types are used).

        A block of 256 threads covers ``256 >> shift`` rows of ``1 << shift`` lanes each
        (``shift`` from 5 to 8, chosen by the host for the last axis's extent), so that
        narrow rows do not leave most of a block idle."""
        ndim = op.attrs["ndim"]
        kinds = op.attrs["reductions"]
        types = [r.type for r in op.results]
        fn, loaded = self._new_kernel("parallel", fields)
        self.status = self.b.bitcast(loaded[0], i64.as_pointer())
        partials = loaded[1]
        extents = loaded[2:2 + ndim]
        shift = loaded[2 + ndim] if ndim > 1 else ir.Constant(i64, BLOCK_SHIFT)
        self._bind_free_values(free, loaded[2 + ndim + (1 if ndim > 1 else 0):])
        self.in_parallel = True
        x = self._sreg("tid.x")
        block_x, blocks_x = self._sreg("ctaid.x"), self._sreg("nctaid.x")
        block_y, blocks_y = self._sreg("ctaid.y"), self._sreg("nctaid.y")
        lanes = self.b.shl(ir.Constant(i64, 1), shift)
        lane = self.b.and_(x, self.b.sub(lanes, ir.Constant(i64, 1)))
        first = self.b.add(self.b.mul(block_x, lanes), lane)
        stride = self.b.mul(blocks_x, lanes)
        accs = [self._identity(kind, t) for kind, t in zip(kinds, types)]
        body = op.regions[0]

        def inner(outer_ivs: list[ir.Value], carried: list[Repr]) -> list[Repr]:
            return self._counted_loop(first, extents[-1], stride, carried, types,
                                      lambda iv, c: self._run_body(body, outer_ivs + [iv] + c))

        if ndim == 1:
            finals = inner([], accs)
        else:
            outer: ir.Value = extents[0]
            for e in extents[1:-1]:
                outer = self.b.mul(outer, e)

            def rows(o: ir.Value, carried: list[Repr]) -> list[Repr]:
                ivs: list[ir.Value] = []
                rest = o
                for e in reversed(extents[1:-1]):
                    ivs.insert(0, self.b.srem(rest, e))
                    rest = self.b.sdiv(rest, e)
                return inner([rest] + ivs, carried)

            rows_per_block = self.b.lshr(ir.Constant(i64, BLOCK_SIZE), shift)
            row = self.b.lshr(x, shift)
            first_row = self.b.add(self.b.mul(block_y, rows_per_block), row)
            finals = self._counted_loop(first_row, outer, self.b.mul(blocks_y, rows_per_block),
                                        accs, types, rows)
        slots = 0
        if types:
            slots = self._block_reduce(finals, kinds, types, partials, block_x, blocks_x, block_y, x)
        self.b.ret_void()
        self._finish_function(fn)
        self.in_parallel = False
        self.functions[-1].result_slots = slots
        return self.functions[-1]

    def serial_kernel(self, ops: list[Operation], free: list[Value], fields: list[ir.Value],
                      outputs: list[Value]) -> DeviceFunction:
        """A kernel of one thread running ``ops``; ``outputs`` go to the results buffer.
        ``fields``: status, results, then the free values' parts."""
        fn, loaded = self._new_kernel("serial", fields)
        self.status = self.b.bitcast(loaded[0], i64.as_pointer())
        results = loaded[1]
        self._bind_free_values(free, loaded[2:])
        for op in ops:
            self.emit_op(op)
        slot = 0
        for v in outputs:
            for part in flatten(self.values[v], v.type):
                self._store_slot(results, ir.Constant(i64, slot), part)
                slot += 1
        self.b.ret_void()
        self._finish_function(fn)
        self.functions[-1].result_slots = slot
        return self.functions[-1]

    # --- special registers, shuffles, shared memory ----------------------------------

    def _sreg(self, name: str) -> ir.Value:
        fn = self.scalar.function(f"llvm.nvvm.read.ptx.sreg.{name}", i32, [])
        return self.b.zext(self.b.call(fn, []), i64)

    def _shuffle_xor(self, value: ir.Value, lane_mask: int) -> ir.Value:
        return self._shuffle("bfly", value, lane_mask, 31)

    def _shuffle(self, mode: str, value: ir.Value, operand: int, clamp: int) -> ir.Value:
        """``shfl.sync.<mode>`` over the full warp of a value of any scalar type (one
        32-bit shuffle, or two for 64-bit values): ``mode`` is ``bfly`` (lane xor
        ``operand``, ``clamp`` 31), ``up`` (lane - ``operand``, ``clamp`` 0; lanes below
        keep their own value), ``down`` or ``idx``."""
        shfl = self.scalar.function(f"llvm.nvvm.shfl.sync.{mode}.i32", i32, [i32, i32, i32, i32])
        t = value.type

        def shuffle32(v: ir.Value) -> ir.Value:
            return self.b.call(shfl, [ir.Constant(i32, -1), v, ir.Constant(i32, operand),
                                      ir.Constant(i32, clamp)])

        if isinstance(t, ir.IntType) and t.width <= 32:
            wide = self.b.zext(value, i32) if t.width < 32 else value
            out = shuffle32(wide)
            return self.b.trunc(out, t) if t.width < 32 else out
        if t == ir.FloatType():
            return self.b.bitcast(shuffle32(self.b.bitcast(value, i32)), t)
        bits = self.b.bitcast(value, i64) if t != i64 else value
        low = shuffle32(self.b.trunc(bits, i32))
        high = shuffle32(self.b.trunc(self.b.lshr(bits, ir.Constant(i64, 32)), i32))
        joined = self.b.or_(self.b.zext(low, i64),
                            self.b.shl(self.b.zext(high, i64), ir.Constant(i64, 32)))
        return self.b.bitcast(joined, t) if t != i64 else joined

    def _slot_pointer(self, base: ir.Value, index: ir.Value, t: ir.Type) -> ir.Value:
        address = self.b.gep(base, [self.b.mul(index, ir.Constant(i64, SLOT))])
        return self.b.bitcast(address, memory_type_of(t).as_pointer(base.type.addrspace))

    def _store_slot(self, base: ir.Value, index: ir.Value, value: ir.Value) -> None:
        if isinstance(value.type, ir.PointerType):
            value = self.b.ptrtoint(value, i64)
        stored = self.b.zext(value, i8) if value.type == i1 else value
        self.b.store(stored, self._slot_pointer(base, index, value.type))

    def _load_slot(self, base: ir.Value, index: ir.Value, t: ir.Type) -> ir.Value:
        if isinstance(t, ir.PointerType):
            return self.b.inttoptr(self.b.load(self._slot_pointer(base, index, i64)), t)
        v = self.b.load(self._slot_pointer(base, index, t))
        return self.b.trunc(v, i1) if t == i1 else v

    def _block_reduce(self, finals: list[Repr], kinds: tuple[str, ...], types: list[Any],
                      partials: ir.Value, block_x: ir.Value, blocks_x: ir.Value,
                      block_y: ir.Value, x: ir.Value) -> int:
        """Combines every thread's partials into one per block, written to ``partials``
        at slot ``block * width + component``; returns ``width``."""
        components: list[tuple[str, T.ScalarType, ir.Value]] = []
        for kind, t, final in zip(kinds, types, finals):
            scalar_t = T.element_scalar(t)
            if scalar_t.is_bool:
                kind = {"add": "bit_or", "mul": "bit_and"}.get(kind, kind)
            for part in flatten(final, t):
                components.append((kind, scalar_t, part))
        width = len(components)
        shared_t = ir.ArrayType(i64, WARPS * width)
        shared = ir.GlobalVariable(self.module, shared_t, f"{self.functions[-1].name}_shared",
                                   addrspace=3)
        shared.linkage = "internal"
        shared.initializer = ir.Constant(shared_t, ir.Undefined)
        shared_base = self.b.bitcast(shared, ir.PointerType(i8, 3))
        values = [c[2] for c in components]
        for mask in (16, 8, 4, 2, 1):
            values = [self._combine_scalar(kind, t, v, self._shuffle_xor(v, mask))
                      for (kind, t, _), v in zip(components, values)]
        lane = self.b.and_(x, ir.Constant(i64, 31))
        warp = self.b.lshr(x, ir.Constant(i64, 5))
        with self.b.if_then(self.b.icmp_unsigned("==", lane, ir.Constant(i64, 0))):
            for c, v in enumerate(values):
                index = self.b.add(self.b.mul(warp, ir.Constant(i64, width)), ir.Constant(i64, c))
                self._store_slot(shared_base, index, v)
        self.b.call(self.scalar.function("llvm.nvvm.barrier0", void, []), [])
        with self.b.if_then(self.b.icmp_unsigned("==", x, ir.Constant(i64, 0))):
            totals = [self._load_slot(shared_base, ir.Constant(i64, c), v.type)
                      for c, v in enumerate(values)]
            for w in range(1, WARPS):
                totals = [
                    self._combine_scalar(kind, t, total,
                                         self._load_slot(shared_base, ir.Constant(i64, w * width + c),
                                                         total.type))
                    for c, ((kind, t, _), total) in enumerate(zip(components, totals))
                ]
            block = self.b.add(self.b.mul(block_y, blocks_x), block_x)
            for c, total in enumerate(totals):
                index = self.b.add(self.b.mul(block, ir.Constant(i64, width)), ir.Constant(i64, c))
                self._store_slot(partials, index, total)
        return width

    def _combine_scalar(self, kind: str, t: T.ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
        return getattr(self.scalar, f"op_{kind}")(t, a, b)

    # --- memory --------------------------------------------------------------------

    def emit_atomic_rmw(self, op: Operation) -> list[Repr]:
        if not self.in_parallel:  # a kernel of one thread: plain updates
            return [self._plain_update(op)]
        pointers = self._element_pointers(op, op.operands[1:-1])
        scalar_t = T.element_scalar(op.operands[-1].type)
        kind = op.attrs["kind"]
        olds = [self._device_atomic(kind, scalar_t, p, v)
                for p, v in zip(pointers, flatten(self.values[op.operands[-1]]))]
        return [unflatten(op.result.type, olds)]

    def _device_atomic(self, kind: str, t: T.ScalarType, pointer: ir.Value, value: ir.Value) -> ir.Value:
        if t.is_float:
            if kind in ("add", "sub"):
                if kind == "sub":
                    value = self.scalar.op_neg(t, value)
                suffix = "f32.p0f32" if t == T.f32 else "f64.p0f64"
                fn = self.scalar.function(f"llvm.nvvm.atomic.load.add.{suffix}", value.type,
                                          [pointer.type, value.type])
                return self.b.call(fn, [pointer, value])
            return self._compare_and_swap_loop(kind, t, pointer, value)
        if t.bits < 32:
            from kdsl.errors import CompileError

            raise CompileError(f"atomic updates of {t} are not supported on CUDA (use 32- or "
                               "64-bit integers)")
        return self.b.atomic_rmw(atomicrmw_operation(kind, t), pointer, value, "monotonic")

    def _compare_and_swap_loop(self, kind: str, t: T.ScalarType, pointer: ir.Value,
                               value: ir.Value) -> ir.Value:
        """``atomic min/max`` of floats: retried compare-and-swap of the bits."""
        bits_t = ir.IntType(t.bits)
        bits_pointer = self.b.bitcast(pointer, bits_t.as_pointer())
        entry = self.b.block
        fn = self.b.function
        loop = fn.append_basic_block("atomic.cas")
        done = fn.append_basic_block("atomic.done")
        first = self.b.load(bits_pointer)
        self.b.branch(loop)
        self.b.position_at_end(loop)
        old_bits = self.b.phi(bits_t)
        old_bits.add_incoming(first, entry)
        old = self.b.bitcast(old_bits, value.type)
        new = getattr(self.scalar, f"op_{kind}")(t, old, value)
        pair = self.b.cmpxchg(bits_pointer, old_bits, self.b.bitcast(new, bits_t), "monotonic",
                              "monotonic")
        seen = self.b.extract_value(pair, 0)
        swapped = self.b.extract_value(pair, 1)
        old_bits.add_incoming(seen, self.b.block)
        self.b.cbranch(swapped, done, loop)
        self.b.position_at_end(done)
        return old

    def emit_array_new(self, op: Operation) -> list[Repr]:
        """An array made in device code: the device heap (``malloc``)."""
        t: T.ArrayType = op.result.type
        ndim = t.ndim
        shape = [self.values[v] for v in op.operands[:t.free_ndim]]
        shape += [ir.Constant(i64, s) for s in t.fixed_shape]  # as flatten() leaves them
        scalar_t = T.element_scalar(t.dtype)
        count: ir.Value = ir.Constant(i64, 1)
        for size in shape:
            count = self.b.mul(count, self.scalar.op_max(T.i64, size, ir.Constant(i64, 0)))
        malloc = self.scalar.function("malloc", i8_ptr, [i64])
        data = self.b.call(malloc, [self.b.mul(count, ir.Constant(i64, max(scalar_t.itemsize, 1)))])
        from kdsl.codegen.abi import ErrorCode

        failed = self.b.icmp_unsigned("==", data, ir.Constant(i8_ptr, None))
        self._fail_if(failed, ErrorCode.MEMORY, op, "allocation")
        fill = op.attrs["fill"]
        if fill != "empty":
            if fill == "full":
                value = self.scalar.cast(op.operands[ndim].type, scalar_t, self.values[op.operands[ndim]])
            else:
                value = self.scalar.const(scalar_t, 0 if fill == "zeros" else 1)
            typed = self.b.bitcast(data, memory_type(scalar_t).as_pointer())
            stored = self.b.zext(value, i8) if scalar_t.is_bool else value

            def put(k: ir.Value, carried: list[Repr]) -> list[Repr]:
                self.b.store(stored, self.b.gep(typed, [k]))
                return []

            self._counted_loop(ir.Constant(i64, 0), count, ir.Constant(i64, 1), [], [], put)
        return [ArrayView(data, shape, row_major_strides(self.b, shape, scalar_t.itemsize))]

    def emit_array_free(self, op: Operation) -> list[Repr]:
        view: ArrayView = self.values[op.operands[0]]
        self.b.call(self.scalar.function("free", void, [i8_ptr]), [view.data])
        return []

    def emit_print(self, op: Operation) -> list[Repr]:
        from kdsl.codegen.device_print import emit_device_print

        emit_device_print(self, op)
        return []

    def _store_results(self, values: list[Repr], op: Operation) -> None:
        raise AssertionError("a return in device code")  # returns stay on the host


def memory_type_of(t: ir.Type) -> ir.Type:
    return i8 if t == i1 else t

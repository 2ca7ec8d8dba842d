"""Lowering of an optimised kernel to LLVM IR: values, arrays and effects (structured control
flow is in control_flow.py).

Parallel loops are outlined into functions of one `i8*` context argument and run on the
OpenMP runtime (`GOMP_parallel`); each thread takes a contiguous chunk of the outermost
axis. Reductions keep one partial per thread, combined in thread order afterwards.
A parallel loop inside another runs serially.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.abi import STATUS_SLOTS, ErrorCode, Site, init_symbol
from kdsl.codegen.control_flow import ControlFlow
from kdsl.codegen.gemm_op import GemmOps
from kdsl.codegen.llvm_types import (
    ArrayView,
    Repr,
    atomicrmw_operation,
    f64,
    first_stride,
    flatten,
    i1,
    i8,
    i8_ptr,
    i32,
    i64,
    implied_strides,
    memory_type,
    row_major_strides,
    scalar_type,
    unflatten,
    void,
)
from kdsl.codegen.parallel import CopyScopes, ParallelLoops
from kdsl.codegen.row_prefetch import RowPrefetch
from kdsl.codegen.runtime_hooks import RuntimeHooks
from kdsl.codegen.scalar_ops import WIDE_ELEMENT_BYTES, ScalarEmitter
from kdsl.codegen.streaming_stores import StreamingStores
from kdsl.codegen.views import ArrayViews
from kdsl.ir.core import Block, Function, Operation, Value
from kdsl.ir.ops import COMPARISONS, Trait, lookup
from kdsl.records import dataclass


@dataclass
class CodegenOptions:
    fastmath: tuple[str, ...] = ("reassoc", "contract")
    ndarray_offsets: tuple[int, int, int, int] = (16, 24, 32, 40)  # data, nd, dims, strides
    # libmvec calls where loops vectorise (codegen.vector_math); off where results must
    # not depend on vectorisation (a gradient finds a min/max winner by recomputing it)
    vector_math: bool = True


@dataclass
class EmittedKernel:
    module: ir.Module
    entry_name: str
    sites: list[Site] = field(default_factory=list)
    allocates: bool = False



class KernelEmitter(ParallelLoops, ControlFlow, ArrayViews, GemmOps, StreamingStores,
                    RowPrefetch):
    """Emits one kernel (and its outlined parallel regions) into an LLVM module."""

    scalar_emitter = ScalarEmitter
    declares_hooks = True  # the runtime's function pointers (not in device code)

    def __init__(self, kernel: Function, options: CodegenOptions, module_name: str) -> None:
        self.kernel = kernel
        self.options = options
        self.module = ir.Module(name=module_name)
        self.scalar = self.scalar_emitter(self.module, options.fastmath)
        if not options.vector_math:
            self.scalar.vector_math = False
        self.values: dict[Value, Repr] = {}
        self.sites: list[Site] = []
        self.in_parallel = False
        self.private_copies: dict[Value, tuple[ir.Value, ArrayView]] = {}
        self.single_thread: ir.Value | None = None  # in a parallel region: team size is 1
        # in a parallel region updating private copies only: their alias scope (parallel.py)
        self.copy_scope: CopyScopes | None = None
        self.allocates = False
        self.region_count = 0
        self.status: ir.Value = None  # type: ignore[assignment]
        self.alloca_builders: dict[ir.Function, tuple[ir.IRBuilder, ir.Block]] = {}
        # device modules have no hooks (and use none of the methods that load them)
        self.hooks: RuntimeHooks = (RuntimeHooks.declare(self.module) if self.declares_hooks
                                    else None)  # type: ignore[assignment]

    @property
    def b(self) -> ir.IRBuilder:
        return self.scalar.builder

    # --- the entry function ----------------------------------------------------------

    def emit(self, entry_name: str) -> EmittedKernel:
        self.hooks.emit_init(init_symbol(entry_name))
        kernel = self.kernel
        param_types: list[ir.Type] = []
        for arg in kernel.args:
            t = arg.type
            if isinstance(t, (T.ArrayType, T.VectorType, T.MatrixType)):
                param_types.append(i8_ptr)
            elif isinstance(t, T.ScalarType) and t.is_float:
                param_types.append(f64)
            else:
                param_types.append(i64)
        param_types.append(i8_ptr)  # the status array
        extra = self._extra_entry_parameters()
        fn = ir.Function(self.module, ir.FunctionType(void, param_types + extra), entry_name)
        self._start_function(fn)
        count = len(kernel.args)
        self.status = self.b.bitcast(self._ndarray_data(fn.args[count]), i64.as_pointer())
        self._bind_extra_entry_parameters(list(fn.args[count + 1:]))
        for arg, param in zip(kernel.args, fn.args[:count]):
            self.values[arg] = self._unpack_argument(arg.type, param)
        self.emit_block(kernel.body)
        self.b.ret_void()
        self._finish_function(fn)
        return EmittedKernel(self.module, entry_name, self.sites, self.allocates)

    def _extra_entry_parameters(self) -> list[ir.Type]:
        return []

    def _bind_extra_entry_parameters(self, params: list[ir.Value]) -> None:
        pass

    def _start_function(self, fn: ir.Function) -> None:
        """Allocas go into a block of their own, so that they run once per call."""
        allocas = fn.append_basic_block("allocas")
        body = fn.append_basic_block("entry")
        self.alloca_builders[fn] = (ir.IRBuilder(allocas), body)
        self.scalar.builder = ir.IRBuilder(body)

    def _finish_function(self, fn: ir.Function) -> None:
        builder, body = self.alloca_builders.pop(fn)
        builder.branch(body)
        self.fence_streaming_stores(fn)

    def _field(self, obj: ir.Value, offset: int, t: ir.Type) -> ir.Value:
        address = self.b.gep(obj, [ir.Constant(i64, offset)])
        return self.b.load(self.b.bitcast(address, t.as_pointer()))

    def _ndarray_data(self, obj: ir.Value) -> ir.Value:
        return self._field(obj, self.options.ndarray_offsets[0], i8_ptr)

    def _unpack_argument(self, t: Any, param: ir.Value) -> Repr:
        if isinstance(t, T.ArrayType):
            return self._unpack_array(t, param)
        if isinstance(t, (T.VectorType, T.MatrixType)):
            elem = memory_type(t.element)
            data = self.b.bitcast(self._ndarray_data(param), elem.as_pointer())
            out = []
            for k in range(t.count):
                v = self.b.load(self.b.gep(data, [ir.Constant(i64, k)]))
                out.append(self.b.icmp_unsigned("!=", v, ir.Constant(i8, 0)) if t.element.is_bool else v)
            return out
        assert isinstance(t, T.ScalarType)
        if t.is_float:
            return self.b.fptrunc(param, scalar_type(t)) if t == T.f32 else param
        if t.is_bool:
            return self.b.icmp_unsigned("!=", param, ir.Constant(i64, 0))
        if t.bits < 64:
            return self.b.trunc(param, scalar_type(t))
        return param

    def _unpack_array(self, t: T.ArrayType, obj: ir.Value) -> ArrayView:
        data_off, _, dims_off, strides_off = self.options.ndarray_offsets
        data = self._field(obj, data_off, i8_ptr)
        dims = self._field(obj, dims_off, i64.as_pointer())
        shape = [self.b.load(self.b.gep(dims, [ir.Constant(i64, k)])) for k in range(t.free_ndim)]
        shape += [ir.Constant(i64, s) for s in t.fixed_shape]
        itemsize = T.element_scalar(t.dtype).itemsize
        if t.contiguous:
            strides = row_major_strides(self.b, shape, itemsize)
        else:  # padded rows: the leading strides come with the array, the others are constants
            sp = self._field(obj, strides_off, i64.as_pointer())
            passed = t.free_ndim - 1 if t.row_pitch is not None else t.full_ndim
            first = 1 if t.unit_first_stride else 0  # column-major: a constant first stride
            strides = [first_stride(t)] if first else []
            strides += [self.b.load(self.b.gep(sp, [ir.Constant(i64, k)]))
                        for k in range(first, passed)]
            if t.row_pitch is not None:
                strides += implied_strides(t)
        return ArrayView(data, shape, strides)

    # --- blocks and ops ---------------------------------------------------------------

    def emit_block(self, block: Block) -> list[Repr]:
        """Emits a block's operations; returns the reprs its terminator passes on."""
        for op in block.ops:
            if op.name in ("yield", "condition"):
                return [self.values[v] for v in op.operands]
            if op.name == "return":
                self._store_results([self.values[v] for v in op.operands], op)
                return []
            self.emit_op(op)
        return []

    def emit_op(self, op: Operation) -> None:
        definition = lookup(op.name)
        method = getattr(self, f"emit_{op.name}", None)
        if method is not None:
            results = method(op)
        elif op.name in COMPARISONS:
            a, b = (self.values[v] for v in op.operands)
            results = [self.scalar.compare(op.name, op.operands[0].type, a, b)]
        elif definition.has(Trait.ELEMENTWISE):
            results = [self.elementwise(op)]
        else:
            raise NotImplementedError(f"no LLVM lowering for op '{op.name}'")
        for value, r in zip(op.results, results or []):
            self.values[value] = r

    def elementwise(self, op: Operation) -> Repr:
        t = op.result.type
        operands = [self.values[v] for v in op.operands]
        scalar_t = T.element_scalar(op.operands[0].type if op.operands else t)
        if isinstance(t, T.ScalarType):  # the operands' type: isnan's result is a bool
            return self.scalar.emit(op.name, scalar_t, operands, op.attrs)
        return [
            self.scalar.emit(op.name, scalar_t, [o[k] for o in operands], op.attrs)
            for k in range(t.count)
        ]

    def emit_constant(self, op: Operation) -> list[Repr]:
        return [self.scalar.const(op.attrs["type"], op.attrs["value"])]

    def emit_cast(self, op: Operation) -> list[Repr]:
        source, target = op.operands[0].type, op.result.type
        v = self.values[op.operands[0]]
        if isinstance(target, T.ArrayType):
            return [v]  # a contiguous array seen as one of any layout: same view
        if isinstance(target, T.ScalarType):
            return [self.scalar.cast(source, target, v)]
        return [[self.scalar.cast(source.element, target.element, c) for c in v]]

    def emit_bitcast(self, op: Operation) -> list[Repr]:
        return [self.b.bitcast(self.values[op.operands[0]], scalar_type(op.result.type))]

    def emit_select(self, op: Operation) -> list[Repr]:
        c, a, b = (self.values[v] for v in op.operands)
        t = op.result.type
        parts = [self.b.select(c, x, y) for x, y in zip(flatten(a, t), flatten(b, t))]
        return [unflatten(t, parts)]

    # --- vectors and matrices ----------------------------------------------------

    def emit_splat(self, op: Operation) -> list[Repr]:
        return [[self.values[op.operands[0]]] * op.result.type.count]

    def emit_make_vector(self, op: Operation) -> list[Repr]:
        return [[self.values[v] for v in op.operands]]

    def emit_extract(self, op: Operation) -> list[Repr]:
        return [self.values[op.operands[0]][op.attrs["index"]]]

    def emit_insert(self, op: Operation) -> list[Repr]:
        parts = list(self.values[op.operands[0]])
        parts[op.attrs["index"]] = self.values[op.operands[1]]
        return [parts]

    def _sum_of_products(self, t: T.ScalarType, xs: list, ys: list) -> ir.Value:
        total = self.scalar.op_mul(t, xs[0], ys[0])
        for x, y in zip(xs[1:], ys[1:]):
            total = self.scalar.op_add(t, total, self.scalar.op_mul(t, x, y))
        return total

    def emit_dot(self, op: Operation) -> list[Repr]:
        a, b = (self.values[v] for v in op.operands)
        return [self._sum_of_products(op.result.type, a, b)]

    def emit_cross(self, op: Operation) -> list[Repr]:
        a, b = (self.values[v] for v in op.operands)
        t = op.result.type.element
        s = self.scalar

        def term(i: int, j: int) -> ir.Value:
            return s.op_sub(t, s.op_mul(t, a[i], b[j]), s.op_mul(t, a[j], b[i]))

        return [[term(1, 2), term(2, 0), term(0, 1)]]

    def emit_matmul(self, op: Operation) -> list[Repr]:
        a, b = (self.values[v] for v in op.operands)
        ta, tb = op.operands[0].type, op.operands[1].type
        t = ta.element
        rows = [a[r * ta.cols:(r + 1) * ta.cols] for r in range(ta.rows)]
        if isinstance(tb, T.VectorType):
            return [[self._sum_of_products(t, row, b) for row in rows]]
        cols = [[b[k * tb.cols + c] for k in range(tb.rows)] for c in range(tb.cols)]
        return [[self._sum_of_products(t, row, col) for row in rows for col in cols]]

    def emit_transpose(self, op: Operation) -> list[Repr]:
        m = self.values[op.operands[0]]
        t = op.operands[0].type
        return [[m[r * t.cols + c] for c in range(t.cols) for r in range(t.rows)]]

    def emit_outer(self, op: Operation) -> list[Repr]:
        a, b = (self.values[v] for v in op.operands)
        t = op.result.type.element
        return [[self.scalar.op_mul(t, x, y) for x in a for y in b]]

    # --- arrays --------------------------------------------------------------------

    def emit_array_new(self, op: Operation) -> list[Repr]:
        """Allocates through the runtime (a NumPy array owned by the call)."""
        self.allocates = True
        t: T.ArrayType = op.result.type
        ndim = t.ndim
        shape = [self.values[v] for v in op.operands[:t.free_ndim]]
        shape += [ir.Constant(i64, s) for s in t.fixed_shape]  # as flatten() leaves them
        dims = shape[:ndim]
        buffer = self._entry_alloca(i64, len(shape))
        for k, size in enumerate(shape):
            self.b.store(size, self.b.gep(buffer, [ir.Constant(i64, k)]))
        for size in dims:
            negative = self.b.icmp_signed("<", size, ir.Constant(i64, 0))
            self._fail_if(negative, ErrorCode.VALUE, op, "negative dimensions are not allowed",
                          size, stop=True)
        scalar_t = T.element_scalar(t.dtype)
        fill_kinds = {"empty": 0, "zeros": 1, "ones": 2, "full": 3}
        fill = ir.Constant(f64, 0.0)
        if op.attrs["fill"] == "full":
            fill = self.scalar.cast(op.operands[ndim].type, T.f64, self.values[op.operands[ndim]])
        token = self.b.ptrtoint(self.status, i64)
        data = self.b.call(self.hooks.load(self.b, "allocate"), [
            token, ir.Constant(i32, T.SCALAR_TYPES.index(scalar_t)), ir.Constant(i32, len(shape)),
            buffer, ir.Constant(i32, fill_kinds[op.attrs["fill"]]), fill,
        ])
        failed = self.b.icmp_unsigned("==", data, ir.Constant(i8_ptr, None))
        self._fail_if(failed, ErrorCode.MEMORY, op, "allocation", stop=True)
        return [ArrayView(data, shape, row_major_strides(self.b, shape, scalar_t.itemsize))]

    def emit_array_free(self, op: Operation) -> list[Repr]:
        view: ArrayView = self.values[op.operands[0]]
        token = self.b.ptrtoint(self.status, i64)
        self.b.call(self.hooks.load(self.b, "release"), [token, view.data])
        return []

    def emit_array_null(self, op: Operation) -> list[Repr]:
        t: T.ArrayType = op.result.type
        zero = ir.Constant(i64, 0)
        return [ArrayView(ir.Constant(i8_ptr, None), [zero] * t.full_ndim, [zero] * t.full_ndim)]

    def emit_array_dim(self, op: Operation) -> list[Repr]:
        return [self.values[op.operands[0]].shape[op.attrs["axis"]]]

    def _element_pointers(self, op: Operation, indices: list[Value]) -> list[ir.Value]:
        array_t: T.ArrayType = op.operands[0].type
        view: ArrayView = self.values[op.operands[0]]
        # in bounds (an index out of range is an error: see docs/language.md): LLVM then
        # knows the address of row j + 1 cannot wrap, and loads rows with a gap (three
        # of every four elements) whole, shuffling the components apart, not gathering
        # them. The last index steps from its row's address in a step of its own (as a
        # vector's components do), which LLVM keeps in bounds: it then stores such rows
        # with one masked store, not a scatter per component.
        base = view.data
        last = len(indices) - 1
        for axes in (range(last), range(last, len(indices))) if indices else ():
            offset: ir.Value | None = None
            for k in axes:
                term = self.b.mul(self.values[indices[k]], view.strides[k])
                offset = term if offset is None else self.b.add(offset, term)
            if offset is not None:
                base = self.b.gep(base, [offset], inbounds=True)
        elem = memory_type(T.element_scalar(array_t.dtype)).as_pointer()
        count = T.element_count(array_t.dtype)
        if count == 1:
            return [self.b.bitcast(base, elem)]
        strides = view.strides[array_t.ndim:]
        shape = T.element_shape(array_t.dtype)
        pointers = []
        for flat in range(count):
            rest, part = flat, None
            for axis in reversed(range(len(shape))):
                component = rest % shape[axis]
                rest //= shape[axis]
                term = self.b.mul(ir.Constant(i64, component), strides[axis])
                part = term if part is None else self.b.add(part, term)
            pointers.append(self.b.bitcast(self.b.gep(base, [part], inbounds=True), elem))
        return pointers

    def _from_memory(self, t: T.ScalarType, v: ir.Value) -> ir.Value:
        return self.b.icmp_unsigned("!=", v, ir.Constant(i8, 0)) if t.is_bool else v

    def _to_memory(self, t: T.ScalarType, v: ir.Value) -> ir.Value:
        return self.b.zext(v, i8) if t.is_bool else v

    def emit_array_load(self, op: Operation) -> list[Repr]:
        pointers = self._element_pointers(op, op.operands[1:])
        scalar_t = T.element_scalar(op.result.type)
        self._note_wide_element(len(pointers), scalar_t, op.operands[0].type)
        loads = [self.b.load(p) for p in pointers]
        if self.copy_scope is not None:  # arrays are never a thread's private copy
            for load in loads:
                self.copy_scope.note_load(load)
        parts = [self._from_memory(scalar_t, v) for v in loads]
        return [parts[0] if len(parts) == 1 and isinstance(op.result.type, T.ScalarType) else parts]

    def emit_array_store(self, op: Operation) -> list[Repr]:
        if self.emit_streamed_store(op):
            return []
        pointers = self._element_pointers(op, op.operands[1:-1])
        value = self.values[op.operands[-1]]
        scalar_t = T.element_scalar(op.operands[-1].type)
        self._note_wide_element(len(pointers), scalar_t, op.operands[0].type)
        parts = value if isinstance(value, list) else [value]
        for p, v in zip(pointers, parts):
            self.b.store(self._to_memory(scalar_t, v), p)
        return []

    def _note_wide_element(self, components: int, scalar_t: T.ScalarType,
                           array_t: T.ArrayType) -> None:
        if array_t.middle_axis_size is not None:  # f[p, r, k] of 3x3 matrices: a whole one
            components = max(components, math.prod(array_t.fixed_shape))
        if components * scalar_t.itemsize > WIDE_ELEMENT_BYTES:
            self.scalar.wide_element_accesses += 1

    def emit_atomic_rmw(self, op: Operation) -> list[Repr]:
        if self.single_thread is None:  # outside parallel regions updates need no atomics
            return [self._plain_update(op)]
        private = self._private_update(op, lambda: self._atomic(op))
        if private is not None:  # a team of one updates the array as its copy
            return private
        # a team of one thread (kd.set_num_threads(1)) needs no atomics either
        with self.b.if_else(self.single_thread) as (alone, shared):
            with alone:
                plain = self._plain_update(op)
                plain_end = self.b.block
            with shared:
                atomic = self._atomic(op)
                atomic_end = self.b.block
        merged = []
        for p, a in zip(flatten(plain), flatten(atomic)):
            phi = self.b.phi(p.type)
            phi.add_incoming(p, plain_end)
            phi.add_incoming(a, atomic_end)
            merged.append(phi)
        return [unflatten(op.result.type, merged)]

    def _plain_update(self, op: Operation) -> Repr:
        """The update as a load, an operation and a store; returns the old value."""
        pointers = self._element_pointers(op, op.operands[1:-1])
        scalar_t = T.element_scalar(op.operands[-1].type)
        method = getattr(self.scalar, f"op_{op.attrs['kind']}")
        olds = []
        for p, v in zip(pointers, flatten(self.values[op.operands[-1]])):
            old = self.b.load(p)
            self.b.store(method(scalar_t, old, v), p)
            olds.append(old)
        return unflatten(op.result.type, olds)

    def _atomic(self, op: Operation) -> Repr:
        pointers = self._element_pointers(op, op.operands[1:-1])
        value = self.values[op.operands[-1]]
        scalar_t = T.element_scalar(op.operands[-1].type)
        llvm_op = atomicrmw_operation(op.attrs["kind"], scalar_t)
        parts = value if isinstance(value, list) else [value]
        olds = [self.b.atomic_rmw(llvm_op, p, v, "monotonic") for p, v in zip(pointers, parts)]
        return olds[0] if isinstance(op.result.type, T.ScalarType) else olds

    # --- effects -------------------------------------------------------------------

    def _site(self, kind: int, op: Operation, detail: str) -> int:
        self.sites.append(Site(kind, op.location, detail))
        return len(self.sites) - 1

    def _report(self, code: int, site: int, index: ir.Value | None, size: ir.Value | None) -> None:
        """Records the error unless one was recorded first (the status's first slots)."""
        slots = [ir.Constant(i64, site), index or ir.Constant(i64, 0), size or ir.Constant(i64, 0)]
        if self.declares_hooks:  # host code: one shared function, not a copy per site
            self.b.call(self._reporter(), [self.status, ir.Constant(i64, code), *slots])
            return
        fn = self.b.function
        store_bb = fn.append_basic_block("error.first")
        done_bb = fn.append_basic_block("error.done")
        pair = self.b.cmpxchg(self.status, ir.Constant(i64, 0), ir.Constant(i64, code),
                              "monotonic", "monotonic")
        first = self.b.extract_value(pair, 1)
        self.b.cbranch(first, store_bb, done_bb)
        self.b.position_at_end(store_bb)
        for k, v in enumerate(slots, start=1):
            self.b.store(v, self.b.gep(self.status, [ir.Constant(i64, k)]))
        self.b.branch(done_bb)
        self.b.position_at_end(done_bb)

    def _reporter(self) -> ir.Function:
        """``kdsl.report(status, code, site, index, size)``: _report's stores, in a function
        of the module's own, called from the (cold) error paths."""
        existing = self.module.globals.get("kdsl.report")
        if isinstance(existing, ir.Function):
            return existing
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [i64.as_pointer()] + [i64] * 4),
                         "kdsl.report")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("cold")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        status, code, *slots = fn.args
        store_bb = fn.append_basic_block("first")
        done_bb = fn.append_basic_block("done")
        pair = b.cmpxchg(status, ir.Constant(i64, 0), code, "monotonic", "monotonic")
        b.cbranch(b.extract_value(pair, 1), store_bb, done_bb)
        b.position_at_end(store_bb)
        for k, v in enumerate(slots, start=1):
            b.store(v, b.gep(status, [ir.Constant(i64, k)]))
        b.branch(done_bb)
        b.position_at_end(done_bb)
        b.ret_void()
        return fn

    def emit_raise_index_error(self, op: Operation) -> list[Repr]:
        index, size, ok = (self.values[v] for v in op.operands)
        detail = f"axis {op.attrs['axis']}" + (f" of '{op.attrs['array']}'" if op.attrs.get("array") else "")
        self._fail_if(self._not(ok), ErrorCode.INDEX, op, detail, index, size)
        return []

    def emit_assert(self, op: Operation) -> list[Repr]:
        cond = self.values[op.operands[0]]
        self._fail_if(self._not(cond), ErrorCode.ASSERT, op, op.attrs.get("message", ""))
        return []

    def _not(self, flag: ir.Value) -> ir.Value:
        return self.b.xor(flag, ir.Constant(i1, 1))

    def _fail_if(self, failed: ir.Value, code: int, op: Operation, detail: str,
                 index: ir.Value | None = None, size: ir.Value | None = None,
                 stop: bool = False) -> None:
        """Reports a run-time error at ``op`` when ``failed``; with ``stop``, the function
        returns at once (a debug-mode index error instead skips only the access)."""
        site = self._site(code, op, detail)
        with self.b.if_then(failed, likely=False):
            self._report(code, site, index, size)
            if stop:
                self.b.ret_void()
                self.b.position_at_end(self.b.function.append_basic_block("unreachable"))

    def emit_print(self, op: Operation) -> list[Repr]:
        from kdsl.codegen.printing import emit_print

        emit_print(self, op)
        return []

    def _store_results(self, values: list[Repr], op: Operation) -> None:
        slot = STATUS_SLOTS
        for v, value in zip(op.operands, values):
            if isinstance(v.type, T.ArrayType):  # data pointer, sizes and strides: a view
                parts = [self.b.ptrtoint(value.data, i64), *value.shape, *value.strides]
                for part in parts:
                    self.b.store(part, self.b.gep(self.status, [ir.Constant(i64, slot)]))
                    slot += 1
                continue
            scalar_t = T.element_scalar(v.type)
            for part in flatten(value):
                if scalar_t.is_float:
                    bits = self.b.bitcast(self.b.fpext(part, f64) if scalar_t == T.f32 else part, i64)
                elif scalar_t.is_bool or not scalar_t.is_signed:
                    bits = self.b.zext(part, i64) if scalar_t.bits < 64 else part
                else:
                    bits = self.b.sext(part, i64) if scalar_t.bits < 64 else part
                self.b.store(bits, self.b.gep(self.status, [ir.Constant(i64, slot)]))
                slot += 1


def emit_kernel(kernel: Function, options: CodegenOptions, entry_name: str) -> EmittedKernel:
    return KernelEmitter(kernel, options, entry_name).emit(entry_name)

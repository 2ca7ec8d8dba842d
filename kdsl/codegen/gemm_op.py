"""The ``gemm`` op of the kernel emitter: a call of the matrix-product library
(``runtime.gemm_library``) through the ``gemm`` hook, loading it on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from kdsl.codegen.llvm_types import i1, i8_ptr, i32, i64, void


class GemmOps:
    """The ``gemm`` op of the kernel emitter (mixed into KernelEmitter)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def emit_gemm(self, op: Any) -> list[Any]:
        from kdsl import types as T
        from kdsl.codegen.abi import ErrorCode

        a, bm, c = (self.values[v] for v in op.operands[:3])
        scalar = T.element_scalar(op.operands[2].type.dtype)
        size = ir.Constant(i64, scalar.itemsize)
        b = self.b
        slots = self.hooks.load(b, "gemm")
        slot = b.gep(slots, [ir.Constant(i32, 0 if scalar == T.f32 else 1)])
        with b.if_then(b.icmp_unsigned("==", b.load(slot), ir.Constant(i8_ptr, None)), likely=False):
            loader = b.load(b.gep(slots, [ir.Constant(i32, 2)]))
            b.call(b.bitcast(loader, ir.FunctionType(void, []).as_pointer()), [])
        entry = b.load(slot)
        missing = b.icmp_unsigned("==", entry, ir.Constant(i8_ptr, None))
        self._fail_if(missing, ErrorCode.MEMORY, op, "the matrix product could not be loaded",
                      stop=True)

        def elements(stride: ir.Value) -> ir.Value:
            return self.b.sdiv(stride, size)

        rows, a_data, c_data = a.shape[0], a.data, c.data
        if len(op.operands) == 5:  # rows first to first + count only
            first, rows = (self.values[v] for v in op.operands[3:])
            a_data = b.gep(a.data, [b.mul(first, a.strides[0])])
            c_data = b.gep(c.data, [b.mul(first, c.strides[0])])
        args = [rows, bm.shape[1], a.shape[1],
                a_data, elements(a.strides[0]), elements(a.strides[1]),
                bm.data, elements(bm.strides[0]), elements(bm.strides[1]),
                c_data, elements(c.strides[0]), elements(c.strides[1]),
                ir.Constant(i1, bool(self.in_parallel))]
        entry_t = ir.FunctionType(i32, [arg.type for arg in args])
        failed = b.call(b.bitcast(b.load(slot), entry_t.as_pointer()), args)
        self._fail_if(b.icmp_unsigned("!=", failed, ir.Constant(i32, 0)), ErrorCode.MEMORY, op,
                      "no memory for the matrix product's packing buffers")
        return []

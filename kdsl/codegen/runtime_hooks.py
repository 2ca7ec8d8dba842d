"""The runtime services compiled code calls, reached through pointers that an exported
init function fills in after loading.

Compiled code has no undefined symbols of kdsl's own: the same object code works when
loaded into the JIT or as a shared library from the disk cache, in any process.
"""

from __future__ import annotations

from llvmlite import ir

from kdsl.codegen.abi import HOOK_ORDER
from kdsl.codegen.llvm_types import f64, i8, i8_ptr, i32, i64, void
from kdsl.records import dataclass

REGION_T = ir.FunctionType(void, [i8_ptr])
HOOK_TYPES: dict[str, ir.FunctionType] = {
    "print": ir.FunctionType(void, [i32, i8.as_pointer(), i64.as_pointer()]),
    "parallel": ir.FunctionType(void, [REGION_T.as_pointer(), i8_ptr, i32, i32]),
    "thread_num": ir.FunctionType(i32, []),
    "num_threads": ir.FunctionType(i32, []),
    # allocate(call token, scalar type code, ndim, shape*, fill kind, fill value) -> data
    "allocate": ir.FunctionType(i8_ptr, [i64, i32, i32, i64.as_pointer(), i32, f64]),
    # release(call token, data): the array is not used any more
    "release": ir.FunctionType(void, [i64, i8_ptr]),
    # CUDA (null on the CPU): the driver's cuLaunchKernel and cuMemcpyDtoH_v2, called
    # directly, and the table of the module's CUfunction handles
    "cuda_launch": ir.FunctionType(i32, [i8_ptr, i32, i32, i32, i32, i32, i32, i32, i8_ptr,
                                         i8_ptr.as_pointer(), i8_ptr.as_pointer()]),
    "cuda_copy_to_host": ir.FunctionType(i32, [i8_ptr, i64, i64]),
}
# gemm: the table of the packed matrix products (runtime.gemm_library.GEMM_SLOTS)
_POINTER_HOOKS = {"cuda_functions": i8_ptr.as_pointer(), "gemm": i8_ptr.as_pointer()}


@dataclass
class RuntimeHooks:
    """Module-private globals holding the runtime's function pointers."""

    module: ir.Module
    globals: dict[str, ir.GlobalVariable]

    @staticmethod
    def declare(module: ir.Module) -> RuntimeHooks:
        hooks = {}
        for name in HOOK_ORDER:
            if name in HOOK_TYPES:
                t = HOOK_TYPES[name].as_pointer()
            else:
                t = _POINTER_HOOKS.get(name, i32.as_pointer())
            g = ir.GlobalVariable(module, t, f"kdsl.hook.{name}")
            g.linkage = "internal"
            g.initializer = ir.Constant(t, None)
            hooks[name] = g
        return RuntimeHooks(module, hooks)

    def load(self, builder: ir.IRBuilder, name: str) -> ir.Value:
        return builder.load(self.globals[name])

    def emit_init(self, name: str) -> None:
        """``void name(i8** hooks)``: stores each hook pointer, in HOOK_ORDER. It runs
        once per load: LLVM neither optimises it nor spends its full instruction
        selection on it (``optnone``)."""
        fn = ir.Function(self.module, ir.FunctionType(void, [i8_ptr.as_pointer()]), name)
        fn.attributes.add("noinline")
        fn.attributes.add("optnone")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        for k, hook in enumerate(HOOK_ORDER):
            pointer = b.load(b.gep(fn.args[0], [ir.Constant(i32, k)]))
            g = self.globals[hook]
            b.store(b.bitcast(pointer, g.type.pointee), g)
        b.ret_void()

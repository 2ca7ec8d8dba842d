"""``print`` in device code: one ``vprintf`` per call, its format string built at compile
time. Floats print with ``%g`` (Python's shortest round-trip form is not available
there); lines from different threads come out in no particular order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import f64, flatten, i8, i8_ptr, i32, i64
from kdsl.ir.core import Operation

if TYPE_CHECKING:
    from kdsl.codegen.device_kernel import DeviceEmitter


def _string(emitter: DeviceEmitter, text: str) -> ir.Value:
    data = bytearray(text.encode("utf-8")) + b"\0"
    t = ir.ArrayType(i8, len(data))
    g = ir.GlobalVariable(emitter.module, t, f"kdsl_text_{len(emitter.module.globals)}")
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(t, data)
    return emitter.b.bitcast(g, i8_ptr)


def emit_device_print(emitter: DeviceEmitter, op: Operation) -> None:
    b = emitter.b
    pieces: list[str] = []
    args: list[ir.Value] = []
    operands = iter(op.operands)
    for part in op.attrs["parts"]:
        if part is not None:
            pieces.append(part.replace("%", "%%"))
            continue
        v = next(operands)
        scalar_t = T.element_scalar(v.type)
        texts = []
        for p in flatten(emitter.values[v]):
            if scalar_t.is_float:
                texts.append("%g")
                args.append(b.fpext(p, f64) if scalar_t == T.f32 else p)
            elif scalar_t.is_bool:
                texts.append("%s")
                args.append(b.select(p, _string(emitter, "True"), _string(emitter, "False")))
            elif scalar_t.is_signed:
                texts.append("%lld")
                args.append(b.sext(p, i64) if scalar_t.bits < 64 else p)
            else:
                texts.append("%llu")
                args.append(b.zext(p, i64) if scalar_t.bits < 64 else p)
        pieces.append(" ".join(texts) if isinstance(v.type, T.ScalarType) else "[" + " ".join(texts) + "]")
    separators = op.attrs.get("separators") or [" " if k else "" for k in range(len(pieces))]
    fmt = _string(emitter, "".join(s + p for s, p in zip(separators, pieces)) + "\n")
    buffer = emitter._entry_alloca(i64, max(len(args), 1))
    for k, a in enumerate(args):
        slot = b.gep(buffer, [ir.Constant(i64, k)])
        if isinstance(a.type, ir.PointerType):
            a = b.ptrtoint(a, i64)
        b.store(a, b.bitcast(slot, a.type.as_pointer()))
    vprintf = emitter.scalar.function("vprintf", i32, [i8_ptr, i8_ptr])
    b.call(vprintf, [fmt, b.bitcast(buffer, i8_ptr)])

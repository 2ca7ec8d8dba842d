"""``print`` in kernels: values are packed with a kind code each and handed to the
runtime's print hook, which formats them as Python would."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from kdsl import types as T
from kdsl.codegen.llvm_types import f64, flatten, i8, i8_ptr, i32, i64
from kdsl.ir.core import Operation

if TYPE_CHECKING:
    from kdsl.codegen.emit_kernel import KernelEmitter


class PrintKind:
    SIGNED = 0
    UNSIGNED = 1
    FLOAT64 = 2
    FLOAT32 = 3
    BOOL = 4
    TEXT = 5
    OPEN = 6  # starts a vector: '['
    CLOSE = 7  # ends it: ']'


def _text_constant(emitter: KernelEmitter, text: str) -> ir.Value:
    data = bytearray(text.encode("utf-8")) + b"\0"
    t = ir.ArrayType(i8, len(data))
    name = f"kdsl.text.{len(emitter.module.globals)}"
    g = ir.GlobalVariable(emitter.module, t, name)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(t, data)
    return emitter.b.bitcast(g, i8_ptr)


def emit_print(emitter: KernelEmitter, op: Operation) -> None:
    b = emitter.b
    items: list[tuple[int, ir.Value]] = []
    operands = iter(op.operands)
    separators = op.attrs.get("separators")  # f-strings: no space between their pieces
    for k, part in enumerate(op.attrs["parts"]):
        separator = separators[k] if separators else " " if k else ""
        if separator:
            items.append((PrintKind.TEXT, _text_constant(emitter, separator)))
        if part is not None:
            items.append((PrintKind.TEXT, _text_constant(emitter, part)))
            continue
        v = next(operands)
        scalar_t = T.element_scalar(v.type)
        parts = flatten(emitter.values[v])
        shaped = not isinstance(v.type, T.ScalarType)
        if shaped:
            items.append((PrintKind.OPEN, ir.Constant(i64, 0)))
        for p in parts:
            if scalar_t.is_float:
                kind = PrintKind.FLOAT32 if scalar_t == T.f32 else PrintKind.FLOAT64
                bits = b.bitcast(b.fpext(p, f64) if scalar_t == T.f32 else p, i64)
            elif scalar_t.is_bool:
                kind, bits = PrintKind.BOOL, b.zext(p, i64)
            elif scalar_t.is_signed:
                kind = PrintKind.SIGNED
                bits = b.sext(p, i64) if scalar_t.bits < 64 else p
            else:
                kind = PrintKind.UNSIGNED
                bits = b.zext(p, i64) if scalar_t.bits < 64 else p
            items.append((kind, bits))
        if shaped:
            items.append((PrintKind.CLOSE, ir.Constant(i64, 0)))
    n = len(items)
    kinds = emitter._entry_alloca(i8, max(n, 1))
    payload = emitter._entry_alloca(i64, max(n, 1))
    for k, (kind, value) in enumerate(items):
        b.store(ir.Constant(i8, kind), b.gep(kinds, [ir.Constant(i64, k)]))
        if value.type != i64:
            value = b.ptrtoint(value, i64)
        b.store(value, b.gep(payload, [ir.Constant(i64, k)]))
    callback = emitter.hooks.load(b, "print")
    b.call(callback, [ir.Constant(i32, n), kinds, payload])

"""Prints IR as stable, readable text: the debugging interface and golden-test format."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Block, Function, Operation, Value

_HIDDEN_ATTRS = ("type", "types")
_REGION_SEPARATORS = {"if": "else", "while": "do"}


class _Namer:
    def __init__(self) -> None:
        self.names: dict[Value, str] = {}
        self.used: set[str] = set()
        self.counter = 0

    def define(self, value: Value) -> str:
        hint = value.name_hint
        if hint and hint not in self.used and hint.isidentifier():
            name = hint
        else:
            name = str(self.counter)
            self.counter += 1
        self.used.add(name)
        self.names[value] = "%" + name
        return self.names[value]

    def __call__(self, value: Value) -> str:
        return self.names.get(value, "%<undefined>")


def _format_attr(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_format_attr(v) for v in value) + "]"
    return str(value)


def print_op(op: Operation, namer: _Namer, indent: str, lines: list[str]) -> None:
    operands = ", ".join(namer(v) for v in op.operands)
    results = ", ".join(namer.define(r) for r in op.results)
    head = f"{results} = " if op.results else ""
    if op.name == "constant":
        lines.append(f"{indent}{head}constant {_format_attr(op.attrs['value'])} : {op.attrs['type']}")
        return
    attrs = {k: v for k, v in op.attrs.items() if k not in _HIDDEN_ATTRS and not k.startswith("_")}
    attr_text = ""
    if attrs:
        attr_text = " {" + ", ".join(f"{k} = {_format_attr(v)}" for k, v in attrs.items()) + "}"
    type_text = ""
    if op.results:
        type_text = " : " + ", ".join(str(r.type) for r in op.results)
    text = f"{indent}{head}{op.name}"
    if operands:
        text += f" {operands}"
    text += attr_text + type_text
    if not op.regions:
        lines.append(text)
        return
    for i, region in enumerate(op.regions):
        args = ", ".join(f"{namer.define(a)}: {a.type}" for a in region.args)
        opener = " (" + args + ")" if region.args else ""
        separator = _REGION_SEPARATORS.get(op.name, "region")
        lines.append((text if i == 0 else f"{indent}}} {separator}") + opener + " {")
        print_block(region, namer, indent + "  ", lines)
    lines.append(f"{indent}}}")


def print_block(block: Block, namer: _Namer, indent: str, lines: list[str]) -> None:
    for op in block.ops:
        print_op(op, namer, indent, lines)


def print_function(fn: Function) -> str:
    namer = _Namer()
    args = ", ".join(f"{namer.define(a)}: {a.type}" for a in fn.args)
    kind = "kernel" if fn.is_kernel else "func"
    results = ", ".join(str(t) for t in fn.result_types)
    lines = [f"{kind} @{fn.name}({args})" + (f" -> {results}" if results else "") + " {"]
    print_block(fn.body, namer, "  ", lines)
    lines.append("}")
    return "\n".join(lines)

"""Parses the text ``kdsl.ir.printer`` prints back into IR, so that tests can start from
IR text (a golden input) and compare IR text after a pass.

The format, one op per line::

    %s = parallel_for %n, %0 {ndim = 1, reductions = ['add']} : f32 (%i: i64, %acc: f32) {
      ...
      yield %1
    }

Attribute values are Python literals (lists stand for tuples) or types. The ``type`` and
``types`` attributes the printer leaves out are restored from the result types wherever
the op's type rule asks for them.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kdsl import types as T
from kdsl.ir.core import Block, Function, Module, Operation, Value
from kdsl.ir.ops import REGISTRY

_REGION_OPENERS = ("} else", "} do", "} region")


class IRParseError(ValueError):
    """The text is not IR as the printer writes it; the message names the line."""


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` split at ``separator`` outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for k, c in enumerate(text):
        if quote:
            if c == quote and text[k - 1] != "\\":
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == separator and depth == 0:
            parts.append(text[start:k].strip())
            start = k + 1
    last = text[start:].strip()
    return parts + [last] if last or parts else []


_SCALARS = {t.name: t for t in T.SCALAR_TYPES}
_NAMED = {t.name: t for t in (*T.NAMED_VECTORS, *T.NAMED_MATRICES)}


def parse_type(text: str) -> Any:
    """A type as ``str()`` prints it: ``f32``, ``vec3``, ``vec2<i64>``, ``mat23<f64>``,
    ``array<vec3, 1, C>``, ``array<f32, 2, C, ?x3>``, ``array<f32, 2, P4, ?x3>``,
    ``array<f32, 2, F>``, ``array<f32, 3, C, ?x3x3>``."""
    text = text.strip()
    if text in _SCALARS:
        return _SCALARS[text]
    if text in _NAMED:
        return _NAMED[text]
    if text.startswith("array<") and text.endswith(">"):
        parts = split_top_level(text[len("array<"):-1])
        layout = {"C": True, "A": False, "F": False}.get(parts[2]) if len(parts) >= 3 else None
        unit_first = len(parts) >= 3 and parts[2] == "F"
        pitch = int(parts[2][1:]) if len(parts) >= 3 and parts[2].startswith("P") else None
        if pitch is not None:
            layout = False
        sizes = [int(v) for v in parts[3].removeprefix("?x").split("x")] if len(parts) == 4 else []
        last = sizes[-1] if sizes else None
        middle = sizes[0] if len(sizes) == 2 else None
        return T.ArrayType(parse_type(parts[0]), int(parts[1]), layout, last, pitch, unit_first,
                           middle)
    match = re.fullmatch(r"vec(\d+)<(\w+)>", text)
    if match:
        return T.vector_type(_SCALARS[match.group(2)], int(match.group(1)))
    match = re.fullmatch(r"mat(\d)(\d)<(\w+)>", text)
    if match:
        return T.matrix_type(_SCALARS[match.group(3)], int(match.group(1)), int(match.group(2)))
    raise IRParseError(f"unknown type {text!r}")


def _as_tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_as_tuples(v) for v in value)
    return value


def parse_value(text: str) -> Any:
    """An attribute or constant value: a Python literal, a list (as a tuple), or a type."""
    text = text.strip()
    if text in ("inf", "-inf", "nan"):
        return float(text)
    if text.startswith("[") and text.endswith("]"):
        return tuple(parse_value(v) for v in split_top_level(text[1:-1]))
    try:
        return _as_tuples(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return parse_type(text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.lines = [line.strip() for line in text.splitlines() if line.strip()]
        self.position = 0
        self.values: dict[str, Value] = {}

    def fail(self, message: str) -> IRParseError:
        line = self.lines[self.position] if self.position < len(self.lines) else "<end>"
        return IRParseError(f"line {self.position + 1} ({line!r}): {message}")

    def define(self, name: str, t: Any) -> Value:
        value = Value(t, "" if name[1:].isdigit() else name[1:])
        self.values[name] = value
        return value

    def use(self, name: str) -> Value:
        if name not in self.values:
            raise self.fail(f"{name} is not defined")
        return self.values[name]

    def arguments(self, text: str) -> list[Value]:
        out = []
        for item in split_top_level(text):
            name, _, type_text = item.partition(":")
            out.append(self.define(name.strip(), parse_type(type_text)))
        return out

    def function(self) -> Function:
        header = re.fullmatch(r"(kernel|func) @([\w.]+)\((.*)\)(?: -> (.*))? \{", self.lines[self.position])
        if header is None:
            raise self.fail("expected 'kernel @name(...) {' or 'func @name(...) {'")
        kind, name, args, results = header.groups()
        self.position += 1
        body = Block(self.arguments(args))
        self.block_into(body)
        result_types = [parse_type(t) for t in split_top_level(results or "")]
        return Function(name, body, result_types, kind == "kernel",
                        arg_names=[a.name_hint for a in body.args])

    def block_into(self, block: Block) -> str:
        """Parses ops into ``block`` up to its closing line; returns that line."""
        while self.position < len(self.lines):
            line = self.lines[self.position]
            if line == "}" or line.startswith(_REGION_OPENERS):
                self.position += 1
                return line
            block.append(self.operation(line))
        raise self.fail("a block is not closed")

    def operation(self, line: str) -> Operation:
        self.position += 1
        regions_text = ""
        if line.endswith("{"):
            line, regions_text = self._split_region_opener(line)
        head, _, rest = line.partition(" = ") if re.match(r"%[\w.]+(, %[\w.]+)* = ", line) else ("", "", line)
        name, _, rest = rest.partition(" ")
        if name not in REGISTRY:
            raise IRParseError(f"line {self.position} ({line!r}): unknown op '{name}'")
        if name == "constant":
            value_text, _, type_text = rest.rpartition(" : ")
            t = parse_type(type_text)
            op = Operation("constant", [], [t], {"value": parse_value(value_text), "type": t})
            self._name_results(op, head)
            return op
        body, types = rest, []
        match = re.search(r" ?: ([^:{}]*)$", rest) if rest else None
        if match and not match.group(1).strip().startswith("%"):
            types = [parse_type(t) for t in split_top_level(match.group(1))]
            body = rest[:match.start()]
        attrs: dict[str, Any] = {}
        brace = body.find("{")
        if brace >= 0:
            for item in split_top_level(body[brace + 1:body.rindex("}")]):
                key, _, value = item.partition(" = ")
                attrs[key.strip()] = parse_value(value)
            body = body[:brace]
        operands = [self.use(v) for v in split_top_level(body)]
        self._restore_hidden_attrs(name, operands, attrs, types)
        op = Operation(name, operands, types, attrs)
        self._name_results(op, head)
        if regions_text:
            op.regions = self.regions(regions_text)
            for region in op.regions:
                region.parent = op
        return op

    @staticmethod
    def _split_region_opener(line: str) -> tuple[str, str]:
        """(the op's text, its first region's argument list in parentheses or '()')."""
        line = line[:-1].rstrip()
        if line.endswith(")"):
            depth = 0
            for k in range(len(line) - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(line[k], 0)
                if depth == 0:
                    if line[k - 1] == " " and ": " in line[k:]:
                        return line[:k - 1], line[k:]
                    break
        return line, "()"

    def regions(self, first_args: str) -> list[Block]:
        blocks = []
        args_text = first_args
        while True:
            block = Block(self.arguments(args_text[1:-1]))
            closing = self.block_into(block)
            blocks.append(block)
            if closing == "}":
                return blocks
            match = re.fullmatch(r"\} \w+(?: (\(.*\)))? \{", closing)
            if match is None:
                raise self.fail(f"expected a region opener, got {closing!r}")
            args_text = match.group(1) or "()"

    def _name_results(self, op: Operation, head: str) -> None:
        names = [n.strip() for n in head.split(",")] if head else []
        if len(names) != len(op.results):
            raise self.fail(f"'{op.name}' has {len(op.results)} results, {len(names)} named")
        for name, result in zip(names, op.results):
            result.name_hint = "" if name[1:].isdigit() else name[1:]
            self.values[name] = result

    @staticmethod
    def _restore_hidden_attrs(name: str, operands: list[Value], attrs: dict, types: list) -> None:
        rule = REGISTRY[name].result_types
        for _ in range(2):
            try:
                rule([v.type for v in operands], attrs)
                return
            except KeyError as exc:
                if exc.args and exc.args[0] == "type" and len(types) == 1:
                    attrs["type"] = types[0]
                elif exc.args and exc.args[0] == "types":
                    attrs["types"] = list(types)
                else:
                    return
            except Exception:  # the verifier reports type errors, not the parser
                return


def parse_module(text: str) -> Module:
    """The functions in ``text`` (the kernel first, as ``Kernel.ir`` prints it)."""
    parser = _Parser(text)
    functions = []
    while parser.position < len(parser.lines):
        functions.append(parser.function())
    if not functions:
        raise IRParseError("no function in the text")
    kernel, *funcs = functions
    return Module(kernel, {f.name: f for f in funcs})


def parse_function(text: str) -> Function:
    """One function, as ``print_function`` prints it."""
    return parse_module(text).kernel

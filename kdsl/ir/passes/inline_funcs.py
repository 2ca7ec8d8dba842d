"""Inlining: every call of a func is replaced by a copy of its body."""

from __future__ import annotations

from typing import Any

from kdsl.ir.core import Block, Function, Module, Operation, Value
from kdsl.ir.location import SourceLocation
from kdsl.ir.rewrite import clone_op, remap_operands

GENERATED_FILE_PREFIX = "<kdsl "
"""How the file names of the funcs kdsl generates (kdsl.primitives) begin."""


def _inline_into(block: Block, funcs: dict[str, Function], mapping: dict[Value, Value],
                 keep_custom_gradients: bool = False, device: bool | None = None,
                 in_parallel: bool = False) -> None:
    """Inlines the calls in ``block``. A call with a device version (``device_callee``,
    a primitive's CUDA form) is kept where ``device`` is None (inside funcs, where it is
    not yet known where the call ends up); else it inlines the device version where
    ``device`` holds and the call is outside parallel loops, and the func elsewhere."""
    new_ops = []
    for op in block.ops:
        for region in op.regions:
            _inline_into(region, funcs, mapping, keep_custom_gradients, device,
                         in_parallel or op.name == "parallel_for")
        if op.name != "call" or (keep_custom_gradients and "gradient" in op.attrs) or (
                device is None and "device_callee" in op.attrs):
            new_ops.append(op)
            continue
        on_device = device and not in_parallel and "device_callee" in op.attrs
        callee = funcs[op.attrs["device_callee" if on_device else "callee"]]
        local: dict[Value, Value] = {
            a: mapping.get(v, v) for a, v in zip(callee.args, op.operands)
        }
        body_ops = callee.body.ops
        for inner in body_ops[:-1]:
            clone = clone_op(inner, local)
            clone.parent = block
            _locate_library_code_at(clone, op.location)
            new_ops.append(clone)
        returned = [local.get(v, v) for v in body_ops[-1].operands]
        for result, value in zip(op.results, returned):
            mapping[result] = value
    block.ops = new_ops
    for op in new_ops:
        op.parent = block


def _locate_library_code_at(op: Operation, call_site: SourceLocation) -> None:
    """Ops of kdsl's generated funcs (``kd.sort``'s radix passes, say) take the location
    of the user's call, so that errors about them name the user's line."""
    for inner in op.walk():
        if inner.location.file.startswith(GENERATED_FILE_PREFIX):
            inner.location = call_site


def run(module: Module, options: Any = None) -> None:
    """Inlines every call; under a gradient (``options.gradient``, ``options.tangent``),
    calls of funcs with a hand-written gradient stay whole for the differentiation (which
    inlines them after). For a CUDA device (``options.target``), a primitive called
    outside parallel loops becomes its device version (a block scan, say)."""
    keep = getattr(options, "gradient", None) is not None or getattr(
        options, "tangent", None) is not None
    funcs = {f.name: f for f in module.funcs.values()}
    # inline inside funcs first, so that copies carry no calls
    for f in funcs.values():
        mapping: dict[Value, Value] = {}
        _inline_into(f.body, funcs, mapping, keep)
        remap_operands(f.body, mapping)
    device = getattr(options, "target", "cpu") == "cuda" and not keep and not getattr(
        options, "vjp", False)
    while True:  # the copies of funcs may carry calls with device versions
        mapping = {}
        _inline_into(module.kernel.body, funcs, mapping, keep, device)
        remap_operands(module.kernel.body, mapping)
        if not any(op.name == "call" and "device_callee" in op.attrs
                   for op in module.kernel.body.walk()):
            break
    drop_uncalled_funcs(module)


def drop_uncalled_funcs(module: Module) -> None:
    """Removes the funcs nothing calls any more, so that later passes, which run over every
    function of the module, spend no time on copies already inlined."""
    by_name = {f.name: f for f in module.funcs.values()}
    wanted: set[str] = set()
    work = [module.kernel]
    while work:
        for op in work.pop().walk():
            if op.name != "call":
                continue
            for name in (op.attrs.get("callee"), op.attrs.get("gradient"),
                         op.attrs.get("device_callee")):
                if isinstance(name, str) and name not in wanted and name in by_name:
                    wanted.add(name)
                    work.append(by_name[name])
    module.funcs = {k: f for k, f in module.funcs.items() if f.name in wanted}


"""The IR verifier: every operand is defined before use in an enclosing scope, every op's
types follow its registry rule, and every region ends in the right terminator."""

from __future__ import annotations

from kdsl import types as T
from kdsl.ir.core import Block, Function, Module, Operation, Value
from kdsl.ir.ops import REGISTRY, OpTypeError, Trait
from kdsl.ir.structured import IfOp, loop_inits


class VerificationError(Exception):
    """The IR breaks an invariant; the message names the op and what is wrong."""


_TERMINATORS = {"for": ("yield",), "parallel_for": ("yield",), "if": ("yield", "yield"),
                "while": ("condition", "yield")}


def _fail(op: Operation, context: str, message: str) -> None:
    where = f" at {op.location}" if op.location.line else ""
    raise VerificationError(f"{context}: '{op.name}'{where}: {message}")


def _check_types(op: Operation, context: str) -> None:
    definition = REGISTRY.get(op.name)
    if definition is None:
        _fail(op, context, "unregistered op")
        return
    if op.name in ("for", "parallel_for", "while", "if", "call", "constant"):
        return
    try:
        expected = definition.result_types([v.type for v in op.operands], op.attrs)
    except (OpTypeError, KeyError, IndexError, AttributeError) as exc:
        _fail(op, context, f"operand types rejected: {exc}")
        return
    actual = [r.type for r in op.results]
    if expected != actual:
        _fail(op, context, f"result types {actual} but the rule gives {expected}")


def _check_regions(op: Operation, context: str) -> None:
    expected = _TERMINATORS.get(op.name)
    if expected is None:
        if op.regions:
            _fail(op, context, "has regions but is not a control-flow op")
        return
    if len(op.regions) != len(expected):
        _fail(op, context, f"needs {len(expected)} regions, has {len(op.regions)}")
    for region, terminator in zip(op.regions, expected):
        last = region.terminator
        if last is None or last.name != terminator:
            _fail(op, context, f"a region must end in '{terminator}'")
    carried = [r.type for r in op.results]
    inits = loop_inits(op)
    if inits is not None:
        initial = [v.type for v in inits]
        if initial != carried:
            _fail(op, context, f"initial values {initial} but the loop carries {carried}")
        body_args = [a.type for a in op.regions[-1].args[len(op.regions[-1].args) - len(carried):]]
        if body_args != carried:
            _fail(op, context, f"body arguments {body_args} but the loop carries {carried}")
        body = op.regions[-1]
        yielded = [v.type for v in body.ops[-1].operands]
        if yielded != carried:
            _fail(op, context, f"body yields {yielded} but the loop carries {carried}")
    if op.name == "if":
        branch = IfOp(op)
        for region in (branch.then_block, branch.else_block):
            yielded = [v.type for v in region.ops[-1].operands]
            if yielded != carried:
                _fail(op, context, f"a branch yields {yielded} but the if gives {carried}")
        if branch.condition.type != T.bool_:
            _fail(op, context, "the condition must be a bool")


def _verify_block(block: Block, visible: set[Value], context: str) -> None:
    scope = set(visible) | set(block.args)
    for k, op in enumerate(block.ops):
        for v in op.operands:
            if v not in scope:
                _fail(op, context, f"uses a value not defined in an enclosing scope ({v!r})")
        is_terminator = REGISTRY[op.name].has(Trait.TERMINATOR) if op.name in REGISTRY else False
        if is_terminator and k != len(block.ops) - 1:
            _fail(op, context, "a terminator must end its block")
        _check_types(op, context)
        _check_regions(op, context)
        for region in op.regions:
            _verify_block(region, scope, context)
        scope.update(op.results)


def verify_module(module: Module, context: str = "verify") -> None:
    """Verifies the kernel and every func of ``module``."""
    for function in module.functions:
        verify_function(function, context)


def verify_function(fn: Function, context: str = "verify") -> None:
    body = fn.body
    if not body.ops or body.ops[-1].name != "return":
        raise VerificationError(f"{context}: function @{fn.name} must end in 'return'")
    _verify_block(body, set(), context)

"""Compile-time unrolling, as Taichi's ``ti.static``: ``for k in kd.static(range(3))``,
``for i, j in kd.static(kd.ndrange(3, 3))`` and ``for v in kd.static(offsets)`` (a tuple)
lower their body once per value, with the loop variable a constant, so small tuples and
lists (of vectors, of weights) can be indexed by it."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable
from typing import Any

from kdsl import builtins as kb
from kdsl.frontend.analysis import first_jump
from kdsl.frontend.expressions import ExpressionLowering
from kdsl.frontend.values import Static, TupleValue

MAX_UNROLLED_ITERATIONS = 4096


class StaticLoopLowering(ExpressionLowering):
    """``for ... in kd.static(...)``: the loop unrolled while lowering."""

    def block(self, stmts: list[ast.stmt]) -> None:  # provided by StatementLowering
        raise NotImplementedError

    def store(self, target: ast.expr, value: Any, node: ast.AST) -> None:  # as block
        raise NotImplementedError

    def if_statement(self, cond: Any, then_fn: Callable[[], None], else_fn: Callable[[], None],
                     node: ast.AST) -> None:  # as block
        raise NotImplementedError

    def is_static_call(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Call):
            return False
        callee = self.expr(node.func)
        return isinstance(callee, Static) and callee.obj is kb.static

    def unrolled_loop(self, node: ast.For) -> None:
        call = node.iter
        assert isinstance(call, ast.Call)
        if len(call.args) != 1 or call.keywords:
            self.error("kd.static() takes one argument", call)
        self.unrolled_values(node, self.static_values(call.args[0]))

    def unrolled_values(self, node: ast.For, values: list[Any]) -> None:
        """The body of the loop ``node`` lowered once per value of its variable."""
        jump = first_jump(node.body, (ast.Break, ast.Continue), False) or first_jump(
            node.body, (ast.Return,), True)
        if jump is not None:
            self.error("break, continue and return are not supported in a kd.static() loop "
                       "or a loop over a tuple (it is unrolled at compile time)", jump)
        if len(values) > MAX_UNROLLED_ITERATIONS:
            self.error(f"this loop would unroll {len(values)} iterations (at most "
                       f"{MAX_UNROLLED_ITERATIONS})", node.iter)
        for value in values:
            self.store(node.target, value, node)
            self.block(node.body)

    def static_values(self, node: ast.expr) -> list[Any]:
        """The values a kd.static() loop takes: constants for ranges, items for tuples."""
        if isinstance(node, ast.Call):
            callee = self.expr(node.func)
            obj = getattr(callee, "obj", None)
            if obj is range:
                return [self.constant(k) for k in range(*self._constant_ints(node, "range"))]
            if obj in (kb.ndrange, kb.prange):
                if obj is kb.prange:
                    return [self.constant(k) for k in range(*self._constant_ints(node, "prange"))]
                axes = [self._axis_range(a) for a in node.args]
                return [TupleValue(tuple(self.constant(k) for k in ks)) if len(axes) > 1
                        else self.constant(ks[0]) for ks in itertools.product(*axes)]
        iterable = self.expr(node)
        if isinstance(iterable, Static) and isinstance(iterable.obj, (tuple, list)):
            return [Static(x) for x in iterable.obj]
        if isinstance(iterable, TupleValue):
            return list(iterable.items)
        self.error("kd.static() in a for loop needs range(...), kd.ndrange(...) or a tuple "
                   "of compile-time length", node)

    def _constant_ints(self, call: ast.Call, name: str) -> list[int]:
        if call.keywords or not 1 <= len(call.args) <= 3:
            self.error(f"{name}() takes one to three integers", call)
        values = [self._static_int(self.expr(a)) for a in call.args]
        for v, a in zip(values, call.args):
            if v is None:
                self.error(f"kd.static({name}(...)) needs compile-time integer bounds", a)
        if len(values) == 3 and values[2] == 0:
            self.error("range() step must not be zero", call)
        return values  # type: ignore[return-value]

    def _axis_range(self, node: ast.expr) -> range:
        """One axis of kd.ndrange: an extent or a (start, stop) pair."""
        x = self.expr(node)
        items = list(x.items) if isinstance(x, TupleValue) else [x]
        bounds = [self._static_int(i) for i in items]
        if not 1 <= len(bounds) <= 2 or any(b is None for b in bounds):
            self.error("kd.static(kd.ndrange(...)) needs compile-time extents or (start, stop) "
                       "pairs", node)
        return range(*bounds)  # type: ignore[arg-type]


def _static_value(lo: Any, node: ast.Call, args: list) -> Any:
    """``kd.static(x)`` outside a for: ``x`` itself, which must be known at compile time."""
    if len(args) != 1:
        lo.error("kd.static() takes one argument", node)
    x = args[0]
    if isinstance(x, (Static, TupleValue)):
        return x
    known = lo._static_int(x) if x is not None else None
    if known is None:
        known = lo.builder.known_constants.get(x)
    if known is None:
        lo.error("kd.static() needs a value known at compile time", node)
    return x


def _register() -> None:
    from kdsl.frontend.calls import builtin

    builtin(kb.static)(_static_value)


_register()

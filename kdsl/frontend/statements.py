"""Lowering of statements, and of Python control flow to structured regions (the loops
themselves are in loops.py).

``break``, ``continue`` and early ``return`` become boolean locals (flags): the
statements after one that may jump are guarded by ``if not flag``, and a loop that may
break or return becomes a ``while`` whose condition also tests the flags. Every later
pass sees only structured regions.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.builtins import swizzle_indices
from kdsl.frontend import masks, parallel_returns
from kdsl.frontend.analysis import (
    stmt_may_jump,
)
from kdsl.frontend.expressions import COMPONENT_NAMES
from kdsl.frontend.loops import RETURN_FLAG, LoopLowering
from kdsl.frontend.scope import VariableType
from kdsl.frontend.tensors import is_array
from kdsl.frontend.unsupported import unsupported_message
from kdsl.frontend.values import Static, TupleValue
from kdsl.ir.core import Block, Value

_AUG_OPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "bit_and", ast.BitOr: "bit_or",
    ast.BitXor: "bit_xor", ast.LShift: "shl", ast.RShift: "shr", ast.MatMult: "matmul",
}


class StatementLowering(LoopLowering):
    """Turns statement lists into ops, building structured control flow."""

    # --- statement lists with jumps -----------------------------------------------------

    def block(self, stmts: list[ast.stmt]) -> None:
        for k, stmt in enumerate(stmts):
            self.stmt(stmt)
            if isinstance(stmt, (ast.Break, ast.Continue, ast.Return)):
                return  # the rest of this block is unreachable
            flags = self._flags_set_by(stmt)
            if flags and k + 1 < len(stmts):
                rest = stmts[k + 1:]
                guard = self._none_set(flags, stmt)

                def lower_rest(rest: list[ast.stmt] = rest) -> None:
                    self.block(rest)

                self.if_statement(guard, lower_rest, lambda: None, rest[0])
                return

    def _flags_set_by(self, stmt: ast.stmt) -> list[str]:
        brk, cont, ret = stmt_may_jump(stmt)
        flags = []
        frame = self.loops[-1] if self.loops else None
        if brk and frame and frame.break_flag:
            flags.append(frame.break_flag)
        if cont and frame and frame.continue_flag:
            flags.append(frame.continue_flag)
        if ret and self.uses_return_flag:
            flags.append(RETURN_FLAG)
        return flags

    def _none_set(self, flags: list[str], node: ast.AST) -> Value:
        any_set = self.env[flags[0]]
        for f in flags[1:]:
            any_set = self.op("bit_or", any_set, self.env[f])
        return self.op("logical_not", any_set)

    def stmt(self, node: ast.stmt) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            self.error(unsupported_message(node, "statement"), node)
        with self.at(node):
            method(node)

    # --- simple statements ----------------------------------------------------------------

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        self.expr(node.value)

    def stmt_Assign(self, node: ast.Assign) -> None:
        target = node.targets[0]
        if len(node.targets) == 1 and isinstance(target, ast.Subscript) and (
            masks.assign_through_mask(self, target, node)
        ):
            return
        value = self.expr(node.value)
        for target in node.targets:
            self.store(target, value, node)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            self.error("annotated assignment needs a plain name", node)
        annotation = self.expr(node.annotation)
        t = getattr(annotation, "obj", None)
        if t in (float, int, bool):
            t = T.as_element_type(t)
        if not isinstance(t, (T.ScalarType, T.VectorType, T.MatrixType)):
            self.error("a local's annotation must be a kdsl scalar, vector or matrix type", node)
        self.types.fixed[node.target.id] = VariableType(t, False)
        if node.value is not None:
            self.store(node.target, self.expr(node.value), node)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        op_name = _AUG_OPS.get(type(node.op))
        if op_name is None:
            self.error(f"unsupported augmented assignment {type(node.op).__name__}", node)
        target = node.target
        if self.parallel_depth > 0 and op_name in ("add", "sub") and self.atomic_component_update(
            target, op_name, node.value, node
        ):  # grid_v[i, j].y -= g
            return
        if isinstance(target, ast.Subscript):
            base = self.value(target.value)
            if isinstance(base.type, T.ArrayType):
                if masks.update_through_mask(self, base, target, op_name, node):
                    return
                if self.selects_view(base.type, target.slice):  # c[1:-1] += x, in place
                    view = self.array_view(base, target.slice, target)
                    self.update_in_place(view, op_name, self.value(node.value), node)
                    return
                self.array_update(base, target, op_name, self.value(node.value), node)
                return
        if isinstance(target, ast.Name):
            current = self.value_of(self.lookup(target.id, target), target)
        else:
            current = self.value(target)
        if is_array(current):  # pos += dt * vel updates the array in place, as in NumPy
            self.update_in_place(current, op_name, self.value(node.value), node)
            return
        self.store(target, self.binary(op_name, current, self.value(node.value), node), node)

    def update_in_place(self, dest: Value, op_name: str, value: Value, node: ast.AST) -> None:
        """``dest op= value`` on an array. Inside a parallel loop ``+=`` and ``-=`` add each
        element atomically: iterations may share the array (Numba's array reduction,
        ``y += x[i]``), and the compiler gives each thread a private copy where that pays."""
        if self.parallel_depth > 0 and op_name in ("add", "sub"):
            target = T.element_scalar(dest.type.dtype)
            if is_array(value):
                self.check_in_place(dest, value, node)
            elif not isinstance(value.type, T.ScalarType):
                self.error(f"cannot add a value of type {value.type} into an array in place", node)
            elif not np.can_cast(T.promote(target, False, value.type, self.is_weak(value))[0]
                                 .numpy_dtype, target.numpy_dtype, "same_kind"):
                self.error(f"cannot update an array of {target} in place with {value.type} "
                           "values (as in NumPy); cast explicitly", node)
            self.builder.create("tensor_assign", [dest, value], {"accumulate": op_name})
            return
        result = self.binary(op_name, dest, value, node)
        self.check_in_place(dest, result, node)
        self.tensor_assign(dest, result, node)

    def check_in_place(self, dest: Value, result: Value, node: ast.AST) -> None:
        """NumPy refuses an in-place update that would need an unsafe cast (int += float)."""
        source = T.element_scalar(result.type.dtype if is_array(result) else result.type)
        target = T.element_scalar(dest.type.dtype)
        if not np.can_cast(source.numpy_dtype, target.numpy_dtype, "same_kind"):
            self.error(f"cannot update an array of {target} in place with {source} values "
                       "(as in NumPy); cast explicitly", node)

    def array_update(
        self, array: Value, target: ast.Subscript, op_name: str, value: Value, node: ast.AST
    ) -> None:
        """``a[idx] op= v``: atomic inside a parallel loop for += and -=."""
        assert isinstance(array.type, T.ArrayType)
        indices = self.array_indices(array, target.slice, node)
        if self.parallel_depth > 0 and op_name in ("add", "sub"):
            v = self.coerce(value, array.type.dtype, node)
            self.op("atomic_rmw", array, *indices, v, kind=op_name, implicit=True, node=node)
            return
        old = self.op("array_load", array, *indices, node=node)
        new = self.binary(op_name, old, value, node)
        self.builder.create("array_store", [array, *indices, self.coerce(new, array.type.dtype, node)])

    def store(self, target: ast.expr, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Value) and isinstance(value.type, T.ArrayType) and not value.name_hint:
                value.name_hint = target.id  # debug-mode errors name the array
            self.assign(target.id, value, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Static) and isinstance(value.obj, tuple):  # a global tuple
                value = TupleValue(tuple(Static(item) for item in value.obj))
            if any(isinstance(t, ast.Starred) for t in target.elts):
                self.error("starred assignment (x, *rest = ...) is not supported in kernels: "
                           "name every item", node)
            value = self.unpacked_parts(value)
            if not isinstance(value, TupleValue):
                self.error("only tuples (such as a.shape), vectors and matrices can be "
                           "unpacked", node)
            if len(value.items) != len(target.elts):
                self.error(
                    f"cannot unpack {len(value.items)} values into {len(target.elts)} names", node
                )
            for t, v in zip(target.elts, value.items):
                self.store(t, v, node)
        elif isinstance(target, ast.Subscript):
            self.store_subscript(target, value, node)
        elif isinstance(target, ast.Attribute):
            if not self.store_swizzle(target, value):
                self.store_component(target.value, COMPONENT_NAMES.get(target.attr), value, target)
        else:
            self.error(f"cannot assign to {type(target).__name__}", node)

    def store_subscript(self, target: ast.Subscript, value: Any, node: ast.AST) -> None:
        base = self.value(target.value)
        if isinstance(value, TupleValue) and isinstance(base.type, T.ArrayType):  # a[i] = [0, 0]
            value = self.literal_value(value, base.type.dtype, node)
        v = self.value_of(value, node)
        if isinstance(base.type, T.ArrayType) and self.selects_view(base.type, target.slice):
            self.tensor_assign(self.array_view(base, target.slice, target), v, node)
            return
        if isinstance(base.type, T.ArrayType):
            indices = self.array_indices(base, target.slice, node)
            if is_array(v):
                self.error(f"cannot store an array ({v.type}) into one element of an array of "
                           f"{base.type.dtype}", node)
            stored = self.coerce(v, base.type.dtype, node)
            self.builder.create("array_store", [base, *indices, stored])
            return
        if isinstance(base.type, T.MatrixType) and not isinstance(target.slice, ast.Tuple):
            self.store_matrix_row(target, base.type, v, node)  # m[r] = v, as in NumPy
            return
        if isinstance(base.type, (T.VectorType, T.MatrixType)):
            k = self.component_index(base.type, target.slice, node)
            self.store_component(target.value, k, v, target)
            return
        self.error(f"a value of type {base.type} cannot be assigned into", node)

    def store_matrix_row(self, target: ast.Subscript, t: T.MatrixType, value: Any,
                         node: ast.AST) -> None:
        """``m[r] = v``: row ``r`` (a constant or a run-time index, negative from the end)
        from a vector of as many components, or from one scalar for every component."""
        v = self.value_of(value, node)
        if isinstance(v.type, T.VectorType) and v.type.count == t.cols:
            parts = [self.op("extract", v, index=c) for c in range(t.cols)]
        elif isinstance(v.type, T.ScalarType):
            parts = [v] * t.cols
        else:
            self.error(f"a row of {t} takes a vector of {t.cols} components or a scalar, "
                       f"got {v.type}", node)
        index = self.expr(target.slice)
        row = self._matrix_axis_index(index, self._static_int(index), t.rows, node, 0)  # type: ignore[attr-defined]
        known = self.builder.known_constants.get(row)
        for c, part in enumerate(parts):
            if isinstance(known, int):
                k: Any = known * t.cols + c
            else:
                k = self.op("add", self.op("mul", row, self.constant(t.cols, T.i64)),
                            self.constant(c, T.i64))
            self.store_component(target.value, k, part, target)

    def store_swizzle(self, target: ast.Attribute, value: Any) -> bool:
        """``v.xy = w``, ``c.rgb = e``, ``c.r = s``: each named component from the vector
        assigned; False where ``target.attr`` is no swizzle."""
        indices = swizzle_indices(target.attr)
        if indices is None:
            return False
        v = self.value_of(value, target)
        if len(indices) == 1:
            self.store_component(target.value, indices[0], v, target)
            return True
        if len(set(indices)) != len(indices):
            self.error(f"'.{target.attr}' names a component twice; it cannot be assigned", target)
        if not isinstance(v.type, T.VectorType) or v.type.count != len(indices):
            self.error(f"assigning '.{target.attr}' needs a vector of {len(indices)} "
                       f"components, got {v.type}", target)
        for position, k in enumerate(indices):
            self.store_component(target.value, k, self.op("extract", v, index=position), target)
        return True

    def store_component(self, base_node: ast.expr, k: Any, value: Any, node: ast.AST) -> None:
        if self.store_array_component(base_node, k, value, node):  # v[i].x = e
            return
        if not isinstance(base_node, ast.Name):
            self.error("only a local vector's components can be assigned", node)
        base = self.value_of(self.lookup(base_node.id, base_node), base_node)
        if not isinstance(base.type, (T.VectorType, T.MatrixType)) or k is None:
            self.error(f"a value of type {base.type} has no such component to assign", node)
        element = self.coerce(self.value_of(value, node), base.type.element, node)
        if isinstance(k, Value):
            updated = base
            for c in range(base.type.count):
                hit = self.op("eq", k, self.constant(c, T.i64))
                inserted = self.op("insert", base, element, index=c)
                updated = self.op("select", hit, inserted, updated)
        else:
            updated = self.op("insert", base, element, index=k)
        self.assign(base_node.id, updated, node)

    def stmt_Assert(self, node: ast.Assert) -> None:
        if not self.context.debug:
            return
        cond = self.truth(self.value(node.test), node.test)
        message = ""
        if node.msg is not None:
            if isinstance(node.msg, (ast.JoinedStr, ast.BinOp, ast.Call)):
                self.error("an assert message must be a string literal: values cannot be "
                           "formatted into it (print them before the assert)", node.msg)
            msg = self.expr(node.msg)
            if not (isinstance(msg, Static) and isinstance(msg.obj, str)):
                self.error("an assert message must be a string literal", node.msg)
            message = msg.obj
        self.builder.create("assert", [cond], {"message": message})

    # --- jumps ----------------------------------------------------------------------------

    def stmt_Break(self, node: ast.Break) -> None:
        frame = self.loops[-1] if self.loops else None
        if frame is None:
            self.error("'break' outside a loop", node)
        assert frame.break_flag
        self.env[frame.break_flag] = self.constant(True, T.bool_)
        if frame.parallel and self.parallel_return is not None:
            parallel_returns.store_break(self, self.parallel_return)

    def stmt_Continue(self, node: ast.Continue) -> None:
        frame = self.loops[-1] if self.loops else None
        if frame is None:
            self.error("'continue' outside a loop", node)
        assert frame.continue_flag
        self.env[frame.continue_flag] = self.constant(True, T.bool_)

    def stmt_Return(self, node: ast.Return) -> None:
        if node.value is None:
            values: list[Any] = []
        else:
            result = self.expr(node.value)
            values = list(result.items) if isinstance(result, TupleValue) else [result]
            self.returns_tuple = isinstance(result, TupleValue)
        if any(isinstance(v, TupleValue) for v in values):
            self.error("a tuple inside a returned tuple (such as a.shape) is not supported: "
                       "return one flat tuple (return x, y, z, not return (x, y), z)", node)
        values = [self.value_of(v, node) for v in values]
        if self.return_arity is None:
            self.return_arity = len(values)
        elif self.return_arity != len(values):
            self.error("every return of a function must give the same number of values", node)
        if self.parallel_depth > 0 and values:  # see parallel_returns.py
            assert self.parallel_return is not None
            parallel_returns.store(self, self.parallel_return, values, node)
            self.env[RETURN_FLAG] = self.constant(True, T.bool_)
            return
        for k, v in enumerate(values):
            name = f"$result{k}"
            if self.uses_return_flag:
                self.assign(name, v, node)
            else:
                self.types.observe(name, self.variable_type(v))
                self.env[name] = v
        if self.uses_return_flag:
            self.env[RETURN_FLAG] = self.constant(True, T.bool_)

    # --- if -------------------------------------------------------------------------------

    def stmt_If(self, node: ast.If) -> None:
        test = self.expr(node.test)
        if isinstance(test, Static):  # a compile-time condition picks one branch
            self.block(node.body if test.obj else node.orelse)
            return
        cond = self.truth(self.value_of(test, node.test), node.test)
        self.if_statement(cond, lambda: self.block(node.body), lambda: self.block(node.orelse), node)

    def if_statement(
        self, cond: Value, then_fn: Callable[[], None], else_fn: Callable[[], None], node: ast.AST
    ) -> None:
        before = dict(self.env)
        then_block, else_block = Block(), Block()
        with self.builder.at(then_block):
            then_fn()
        then_env, self.env = self.env, dict(before)
        with self.builder.at(else_block):
            else_fn()
        else_env = self.env
        merged = []
        for name in list(then_env) + [n for n in else_env if n not in then_env]:
            tv, ev = then_env.get(name), else_env.get(name)
            if tv is before.get(name) and ev is before.get(name):
                continue
            if isinstance(tv, Value) and isinstance(ev, Value):
                merged.append(name)
            elif tv is not None and tv is ev:
                before[name] = tv
        types = []
        for name in merged:
            t, weak = self.merged_type(name, [then_env[name], else_env[name]], node)
            self.note_assumption(name, VariableType(t, weak))
            types.append((t, weak))
        with self.builder.at(then_block):
            self.builder.create("yield", [self.coerce(then_env[n], t, node) for n, (t, _) in zip(merged, types)])
        with self.builder.at(else_block):
            self.builder.create("yield", [self.coerce(else_env[n], t, node) for n, (t, _) in zip(merged, types)])
        op = self.builder.create(
            "if", [cond], {"types": [t for t, _ in types]}, [then_block, else_block],
            [t for t, _ in types],
        )
        self.env = before
        for name, result, (_, weak) in zip(merged, op.results, types):
            if then_env[name] in self.placeholders and else_env[name] in self.placeholders:
                self.placeholders.add(result)
            result.name_hint = name if name.isidentifier() else ""
            self.env[name] = self.mark_weak(result, weak)

"""Lowering of statements, and of Python control flow to structured regions.

``break``, ``continue`` and early ``return`` become boolean locals (flags): the
statements after one that may jump are guarded by ``if not flag``, and a loop that may
break or return becomes a ``while`` whose condition also tests the flags. Every later
pass sees only structured regions.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from kdsl import builtins as kb
from kdsl import types as T
from kdsl.frontend import masks, neighbor_loops, random_draws
from kdsl.frontend.analysis import (
    assigned_names,
    first_jump,
    may_break_or_continue,
    may_return,
    stmt_may_jump,
)
from kdsl.frontend.expressions import COMPONENT_NAMES
from kdsl.frontend.lowering import LoopFrame
from kdsl.frontend.scope import VariableType
from kdsl.frontend.static_loops import StaticLoopLowering
from kdsl.frontend.tensors import is_array
from kdsl.frontend.values import IterationSpace, Static, TupleValue
from kdsl.ir.core import Block, Value

RETURN_FLAG = "$return"
_AUG_REDUCTIONS = {ast.Add: "add", ast.Sub: "add", ast.Mult: "mul", ast.Div: "mul"}
_AUG_OPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "bit_and", ast.BitOr: "bit_or",
    ast.BitXor: "bit_xor", ast.LShift: "shl", ast.RShift: "shr", ast.MatMult: "matmul",
}


class StatementLowering(StaticLoopLowering):
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
            self.error(f"unsupported statement: {type(node).__name__}", node)
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
            if not isinstance(value, TupleValue):
                self.error("only tuples (such as a.shape) can be unpacked", node)
            if len(value.items) != len(target.elts):
                self.error(
                    f"cannot unpack {len(value.items)} values into {len(target.elts)} names", node
                )
            for t, v in zip(target.elts, value.items):
                self.store(t, v, node)
        elif isinstance(target, ast.Subscript):
            self.store_subscript(target, value, node)
        elif isinstance(target, ast.Attribute):
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
        if isinstance(base.type, (T.VectorType, T.MatrixType)):
            k = self.component_index(base.type, target.slice, node)
            self.store_component(target.value, k, v, target)
            return
        self.error(f"a value of type {base.type} cannot be assigned into", node)

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
        if frame.parallel:
            self.error("'break' directly inside a parallel loop: iterations have no order to stop", node)
        assert frame.break_flag
        self.env[frame.break_flag] = self.constant(True, T.bool_)

    def stmt_Continue(self, node: ast.Continue) -> None:
        frame = self.loops[-1] if self.loops else None
        if frame is None:
            self.error("'continue' outside a loop", node)
        assert frame.continue_flag
        self.env[frame.continue_flag] = self.constant(True, T.bool_)

    def stmt_Return(self, node: ast.Return) -> None:
        if self.parallel_depth > 0:
            self.error("'return' inside a parallel loop: iterations run concurrently", node)
        if node.value is None:
            values: list[Any] = []
        else:
            result = self.expr(node.value)
            values = list(result.items) if isinstance(result, TupleValue) else [result]
            self.returns_tuple = isinstance(result, TupleValue)
        values = [self.value_of(v, node) for v in values]
        if self.return_arity is None:
            self.return_arity = len(values)
        elif self.return_arity != len(values):
            self.error("every return of a function must give the same number of values", node)
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

    def note_assumption(self, name: str, vt: VariableType) -> None:
        """Records a type chosen without a declaration; a later mismatch forces a rebuild."""
        if self.types.declared(name) is None and not name.startswith("$"):
            self.assumptions.append((name, vt))

    # --- loops ----------------------------------------------------------------------------

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            self.error("'while ... else' is not supported", node)
        brk, cont = may_break_or_continue(node.body)
        self.loop_depth_counter += 1
        depth = self.loop_depth_counter
        frame = LoopFrame(f"$break{depth}" if brk else None, f"$continue{depth}" if cont else None,
                          False, depth)
        if frame.break_flag:
            self.env[frame.break_flag] = self.constant(False, T.bool_)
        returns = self.uses_return_flag and may_return(node.body)

        def condition() -> Value:
            cond = self.truth(self.value(node.test), node.test)
            return self._and_not_flags(cond, frame, returns)

        extra = [frame.break_flag] if frame.break_flag else []
        self.while_loop(
            node, frame, condition, lambda: self.loop_body(node.body, frame), extra, returns
        )
        if frame.break_flag:
            del self.env[frame.break_flag]

    def _and_not_flags(self, cond: Value, frame: LoopFrame, returns: bool) -> Value:
        for flag in ([frame.break_flag] if frame.break_flag else []) + ([RETURN_FLAG] if returns else []):
            cond = self.op("bit_and", cond, self.op("logical_not", self.env[flag]))
        return cond

    def loop_body(self, body: list[ast.stmt], frame: LoopFrame) -> None:
        self.loops.append(frame)
        if frame.continue_flag:
            self.env[frame.continue_flag] = self.constant(False, T.bool_)
        self.block(body)
        if frame.continue_flag:
            del self.env[frame.continue_flag]
        self.loops.pop()

    def carried_names(self, body: list[ast.stmt], extra: list[str], returns: bool,
                      target: str | None = None) -> list[str]:
        """Locals a loop carries: assigned in it (or its loop variable) and defined before
        or read after it."""
        inside = Counter(
            n.id for s in body for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        )
        names = []
        candidates = assigned_names(body)
        rebound = set(assigned_names(body, component_bases=False))
        if target is not None and target not in candidates:
            candidates.append(target)
        for name in candidates:
            if self._is_array(name) and name not in rebound:
                continue  # a[i] = ... writes the array, it does not rebind a
            if isinstance(self.env.get(name), Value):
                names.append(name)
            elif name not in self.env and self.loaded_counts[name] > inside[name]:
                names.append(name)
        names += [n for n in extra if isinstance(self.env.get(n), Value) and n not in names]
        names += [n for n in random_draws.CARRIED if n in self.env and n not in names]
        if returns:
            names += [n for n in self.env if n.startswith("$result") or n == RETURN_FLAG]
        return names

    def loop_initial_values(self, names: list[str]) -> list[Value]:
        values = []
        for name in names:
            v = self.env.get(name)
            if not isinstance(v, Value):
                v = self.placeholder(name)
            declared = self.types.declared(name)
            if declared is not None:
                v = self.coerce(v, declared.type, None)
            else:
                self.note_assumption(name, self.variable_type(v))
            values.append(v)
        return values

    def while_loop(
        self, node: ast.AST, frame: LoopFrame, condition: Callable[[], Value],
        body: Callable[[], None], extra: list[str], returns: bool,
    ) -> None:
        body_nodes = node.body if isinstance(node, (ast.While, ast.For)) else []
        target = node.target.id if isinstance(node, ast.For) and isinstance(node.target, ast.Name) else None
        names = self.carried_names(body_nodes, extra, returns, target)
        inits = self.loop_initial_values(names)
        weak = [self.is_weak(v) for v in inits]
        before_block = Block([Value(v.type, n) for v, n in zip(inits, names)])
        body_block = Block([Value(v.type, n) for v, n in zip(inits, names)])
        self._keep_placeholders(inits, before_block.args, body_block.args)
        outer = dict(self.env)
        self._bind(names, before_block.args, weak)
        with self.builder.at(before_block):
            cond = condition()
            self.builder.create("condition", [cond])
        self.env = dict(outer)
        self._bind(names, body_block.args, weak)
        with self.builder.at(body_block):
            body()
            self.builder.create("yield", [
                self.carry(n, self.env[n], v, node) if n in self.env else v
                for n, v in zip(names, body_block.args)
            ])
        op = self.builder.create("while", inits, {}, [before_block, body_block], [v.type for v in inits])
        self._keep_placeholders(inits, op.results)
        self._finish_loop(outer, names, op.results, weak)

    def carry(self, name: str, value: Value, carried: Value, node: ast.AST) -> Value:
        """``value`` converted to the type the loop carries for ``name``. While that type is
        only assumed (the first lowering), a value that cannot be converted forces another
        lowering with the joined type instead of an error."""
        if self.types.declared(name) is None and not self._convertible(value.type, carried.type):
            self.needs_rebuild = True
            return carried
        return self.coerce(value, carried.type, node)

    @staticmethod
    def _convertible(source: Any, target: Any) -> bool:
        if source == target or isinstance(source, T.ScalarType) and isinstance(target, T.ScalarType):
            return True
        if isinstance(target, (T.VectorType, T.MatrixType)):
            return isinstance(source, T.ScalarType) or getattr(source, "shape", None) == target.shape
        return False

    def _bind(self, names: list[str], values: list[Value], weak: list[bool]) -> None:
        for name, v, w in zip(names, values, weak):
            self.env[name] = self.mark_weak(v, w)

    def _keep_placeholders(self, inits: list[Value], *carried: list[Value]) -> None:
        """A loop-carried value that starts as a placeholder is one too: its type is not
        known in this lowering, so it never conflicts with a real assignment's type."""
        for k, init in enumerate(inits):
            if init in self.placeholders:
                for values in carried:
                    self.placeholders.add(values[k])

    def _finish_loop(
        self, outer: dict[str, Any], names: list[str], results: list[Value], weak: list[bool]
    ) -> None:
        self.env = outer
        for name, r, w in zip(names, results, weak):
            r.name_hint = name if name.isidentifier() else ""
            self.env[name] = self.mark_weak(r, w)

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            self.error("'for ... else' is not supported", node)
        grid = neighbor_loops.grid_of_loop(self, node)
        if grid is not None:  # for j in grid.neighbors(q, radius)
            neighbor_loops.lower_neighbor_loop(self, node, grid)
            return
        if self.is_static_call(node.iter):  # for k in kd.static(range(3)): unrolled
            self.unrolled_loop(node)
            return
        space = self.serial_axes.pop(id(node), None) or self.iteration_space(node.iter)
        if space.parallel and self.parallel_depth > 0:
            self.nested_parallel_loop(node, space)
        elif space.parallel:
            self.parallel_loop(node, space)
        else:
            self.serial_range_loop(node, space)

    def nested_parallel_loop(self, node: ast.For, space: IterationSpace) -> None:
        """A parallel loop inside another runs serially (one loop per axis, the first
        outermost): its locals are private to the outer iteration and read as in any
        serial loop."""
        targets = self._parallel_targets(node, space)
        loops = [
            ast.copy_location(ast.For(target=ast.copy_location(ast.Name(t.id, ast.Store()), t),
                                      iter=node.iter, body=[], orelse=[], type_comment=None), node)
            for t in targets
        ]
        for k, loop in enumerate(loops):
            loop.body = [loops[k + 1]] if k + 1 < len(loops) else node.body
            self.serial_axes[id(loop)] = IterationSpace(
                False, (space.starts[k],), (space.stops[k],), (space.steps[k],))
        self.stmt_For(loops[0])

    def _parallel_targets(self, node: ast.For, space: IterationSpace) -> list[ast.Name]:
        """The loop variables of a parallel loop, one per axis; no break or return in it."""
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if not all(isinstance(t, ast.Name) for t in targets) or len(targets) != len(space.stops):
            self.error(f"this parallel loop needs {len(space.stops)} loop variable(s)", node.target)
        brk, _ = may_break_or_continue(node.body)
        if brk:
            self.error("'break' directly inside a parallel loop: iterations have no order to stop",
                       first_jump(node.body, (ast.Break,), False) or node)
        if may_return(node.body):
            self.error("'return' inside a parallel loop: iterations run concurrently",
                       first_jump(node.body, (ast.Return,), True) or node)
        return targets  # type: ignore[return-value]

    def iteration_space(self, node: ast.expr) -> IterationSpace:
        if not isinstance(node, ast.Call):
            self.error("a kernel can only loop over range(), kd.prange() or kd.ndrange()", node)
        fn = self.expr(node.func)
        obj = getattr(fn, "obj", None)
        if obj not in (range, kb.prange, kb.ndrange):
            self.error("a kernel can only loop over range(), kd.prange() or kd.ndrange()", node)
        if obj is kb.ndrange:
            return self.ndrange_space(node)
        args = [self.loop_bound(self.value(a), a) for a in node.args]
        if not 1 <= len(args) <= 3:
            self.error("range() takes one to three arguments", node)
        if len(args) == 1:
            start, stop, step = self.constant(0), args[0], self.constant(1)
        elif len(args) == 2:
            start, stop, step = args[0], args[1], self.constant(1)
        else:
            start, stop, step = args
            if self._defining_constant(step) == 0:
                self.error("range() step must not be zero", node)
        return IterationSpace(obj is kb.prange, (start,), (stop,), (step,))

    def loop_bound(self, a: Value, node: ast.AST) -> Value:
        if not isinstance(a.type, T.ScalarType) or a.type.is_float:
            self.error(f"loop bounds must be integers, got {a.type}", node)
        return self.mark_weak(self.builder.cast(a, T.i64), self.is_weak(a))

    def ndrange_space(self, node: ast.Call) -> IterationSpace:
        """``kd.ndrange(n, (start, stop), ...)``: per axis an extent or a (start, stop) pair."""
        if not 1 <= len(node.args) <= 3:
            self.error("kd.ndrange() takes one to three extents", node)
        starts, stops = [], []
        for a in node.args:
            bound = self.expr(a)
            if isinstance(bound, TupleValue):
                if len(bound.items) != 2:
                    self.error("a kd.ndrange() axis is an extent or a (start, stop) pair, "
                               f"got a tuple of {len(bound.items)}", a)
                starts.append(self.loop_bound(self.value_of(bound.items[0], a), a))
                stops.append(self.loop_bound(self.value_of(bound.items[1], a), a))
            else:
                starts.append(self.constant(0))
                stops.append(self.loop_bound(self.value_of(bound, a), a))
        one = self.constant(1)
        return IterationSpace(True, tuple(starts), tuple(stops), (one,) * len(stops))

    def trip_count(self, start: Value, stop: Value, step: Value, node: ast.AST) -> Value:
        """``len(range(start, stop, step))``, for any sign of step and any bounds; a step
        that is zero at run time raises Python's ValueError."""
        if not isinstance(self._defining_constant(step), int):
            self.builder.create("raise_value_error", [self.op("ne", step, self.constant(0)), step],
                                {"what": "range() arg 3 must not be zero"})
        return self.op("range_length", start, stop, step)

    def induction_value(self, counter: Value, start: Value, step: Value) -> Value:
        step_value = self._defining_constant(step)
        start_value = self._defining_constant(start)
        scaled = counter if step_value == 1 else self.op("mul", counter, step)
        iv = scaled if start_value == 0 else self.op("add", start, scaled)
        return self.mark_weak(iv)

    def serial_range_loop(self, node: ast.For, space: IterationSpace) -> None:
        if not isinstance(node.target, ast.Name):
            self.error("a range() loop needs a single loop variable", node.target)
        start, stop, step = space.starts[0], space.stops[0], space.steps[0]
        brk, cont = may_break_or_continue(node.body)
        returns = self.uses_return_flag and may_return(node.body)
        self.loop_depth_counter += 1
        depth = self.loop_depth_counter
        frame = LoopFrame(f"$break{depth}" if brk or returns else None,
                          f"$continue{depth}" if cont else None, False, depth)
        simple_step = isinstance(self._defining_constant(step), int) and self._defining_constant(step) > 0
        target = node.target.id
        if not (brk or returns) and simple_step:
            self.counted_loop(node, target, start, stop, step, frame)
            return
        count = self.trip_count(start, stop, step, node.iter)
        counter_name = f"$counter{depth}"
        self.env[counter_name] = self.constant(0)
        if frame.break_flag:
            self.env[frame.break_flag] = self.constant(False, T.bool_)

        def condition() -> Value:
            cond = self.op("lt", self.env[counter_name], count)
            return self._and_not_flags(cond, frame, returns)

        def body() -> None:
            counter = self.env[counter_name]
            self.assign(target, self.induction_value(counter, start, step), node)
            self.loop_body(node.body, frame)
            self.env[counter_name] = self.op("add", counter, self.constant(1))

        extra = [counter_name] + ([frame.break_flag] if frame.break_flag else [])
        self.while_loop(node, frame, condition, body, extra, returns)
        for name in (counter_name, frame.break_flag):
            if name:
                self.env.pop(name, None)

    def counted_loop(
        self, node: ast.For, target: str, start: Value, stop: Value, step: Value, frame: LoopFrame
    ) -> None:
        names = self.carried_names(node.body, [], False, target)
        inits = self.loop_initial_values(names)
        weak = [self.is_weak(v) for v in inits]
        body_block = Block([Value(T.i64, target)] + [Value(v.type, n) for v, n in zip(inits, names)])
        self._keep_placeholders(inits, body_block.args[1:])
        outer = dict(self.env)
        self._bind(names, body_block.args[1:], weak)
        with self.builder.at(body_block):
            self.assign(target, self.mark_weak(body_block.args[0]), node)
            self.loop_body(node.body, frame)
            self.builder.create("yield", [
                self.carry(n, self.env[n], v, node) for n, v in zip(names, body_block.args[1:])
            ])
        op = self.builder.create(
            "for", [start, stop, step, *inits], {}, [body_block], [v.type for v in inits]
        )
        self._keep_placeholders(inits, op.results)
        self._finish_loop(outer, names, op.results, weak)

    # --- parallel loops ---------------------------------------------------------------

    def parallel_loop(self, node: ast.For, space: IterationSpace) -> None:
        targets = self._parallel_targets(node, space)
        _, cont = may_break_or_continue(node.body)
        target_names = [t.id for t in targets]
        reductions = self.find_reductions(node, target_names)
        extents = [
            self.trip_count(a, b, c, node.iter) if not (self._defining_constant(a) == 0 and self._defining_constant(c) == 1)
            else self.op("max", b, self.constant(0))
            for a, b, c in zip(space.starts, space.stops, space.steps)
        ]
        names = list(reductions)
        inits = self.loop_initial_values(names)
        weak = [self.is_weak(v) for v in inits]
        random_loop = random_draws.begin_parallel(self)
        ivs = [Value(T.i64, n) for n in target_names]
        body_block = Block(ivs + [Value(v.type, n) for v, n in zip(inits, names)])
        outer = dict(self.env)
        self._bind(names, body_block.args[len(ivs):], weak)
        self.loop_depth_counter += 1
        frame = LoopFrame(None, f"$continue{self.loop_depth_counter}" if cont else None, True,
                          self.loop_depth_counter)
        self.parallel_depth += 1
        with self.builder.at(body_block):
            for name, iv, start, step in zip(target_names, ivs, space.starts, space.steps):
                self.assign(name, self.induction_value(iv, start, step), node)
            random_draws.enter_iteration(self, ivs, extents, random_loop)
            self.loop_body(node.body, frame)
            self.builder.create("yield", [
                self.carry(n, self.env[n], v, node)
                for n, v in zip(names, body_block.args[len(ivs):])
            ])
        self.parallel_depth -= 1
        op = self.builder.create(
            "parallel_for", [*extents, *inits],
            {"ndim": len(extents), "reductions": tuple(reductions[n] for n in names)},
            [body_block], [v.type for v in inits],
        )
        self._finish_loop(outer, names, op.results, weak)
        random_draws.end_parallel(self, random_loop)

    def _is_array(self, name: str) -> bool:
        v = self.env.get(name)
        return isinstance(v, Value) and isinstance(v.type, T.ArrayType)

    def _updated_in_place(self, node: ast.For) -> set[str]:
        """Arrays the loop updates only in place (``y += e``), never rebinding them."""
        in_place, rebound = set(), set()
        for n in (n for b in node.body for n in ast.walk(b)):
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                in_place.add(n.target.id)
            targets = (list(n.targets) if isinstance(n, ast.Assign) else [n.target]
                       if isinstance(n, (ast.AnnAssign, ast.For, ast.NamedExpr)) else [])
            while targets:
                target = targets.pop()
                if isinstance(target, ast.Name):
                    rebound.add(target.id)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    targets.extend(target.elts)
        return {name for name in in_place - rebound if self._is_array(name)}

    def find_reductions(self, node: ast.For, targets: list[str]) -> dict[str, str]:
        """Outer locals the parallel body updates: each must be a reduction."""
        kinds: dict[str, str] = {}
        for stmt in (s for b in node.body for s in ast.walk(b)):
            name, kind = _reduction_form(stmt)
            if name is not None and self._is_array(name) and isinstance(stmt, ast.AugAssign):
                if kind not in ("add", "sub"):  # += and -= accumulate atomically
                    self.error(f"'{name}' is an array shared by the iterations of this parallel "
                               f"loop: only {name} += e and {name} -= e may update it in place",
                               stmt)
                continue
            if name is not None and isinstance(self.env.get(name), Value):
                if kinds.get(name, kind) != kind:
                    self.error(f"'{name}' is reduced with two different operations", stmt)
                kinds[name] = kind
        rebound = set(assigned_names(node.body, component_bases=False)) - self._updated_in_place(node)
        for name in assigned_names(node.body):
            if name in targets or not isinstance(self.env.get(name), Value) or (
                self._is_array(name) and name not in rebound
            ):
                continue
            for stmt in (s for b in node.body for s in ast.walk(b)):
                if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and name in (
                    assigned_names([stmt])
                ) and _reduction_form(stmt)[0] != name:
                    self.error(
                        f"'{name}' is defined outside this parallel loop and assigned inside it; "
                        f"only reductions ({name} += e, {name} -= e, {name} *= e, {name} /= e, "
                        f"{name} = min({name}, e), {name} = max({name}, e)) may update it",
                        stmt,
                    )
        for name in kinds:
            allowed = {
                id(a) for b in node.body for stmt in ast.walk(b)
                if _reduction_form(stmt)[0] == name and isinstance(stmt, ast.Assign)
                for a in stmt.value.args  # type: ignore[attr-defined]
                if isinstance(a, ast.Name) and a.id == name
            }
            for b in node.body:
                for n in ast.walk(b):
                    if (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                            and id(n) not in allowed):
                        self.error(
                            f"reduction variable '{name}' is read inside the parallel loop, "
                            "where it holds only a partial result", n,
                        )
        return kinds


def _reduction_form(stmt: ast.AST) -> tuple[str | None, str]:
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        kind = _AUG_REDUCTIONS.get(type(stmt.op))
        if kind:
            return stmt.target.id, kind
    if (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)
        and len(stmt.value.args) == 2
    ):
        name = stmt.targets[0].id
        func = stmt.value.func
        fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if fname in ("min", "max") and any(
            isinstance(a, ast.Name) and a.id == name for a in stmt.value.args
        ):
            return name, fname
    return None, ""

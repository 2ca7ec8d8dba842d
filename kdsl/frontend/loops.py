"""Lowering of ``for`` and ``while`` loops to structured regions: serial loops with
their carried values, parallel loops with their reductions, and the iteration spaces
(``range``, ``kd.prange``, ``kd.ndrange``) they run over.

A loop that may ``break`` or ``return`` becomes a ``while`` whose condition also tests the
flags the jumps set (see statements.py). In a parallel loop the break and return flags
are 'or' reductions instead: each thread skips the iterations it has not started once one
of its own set them, and the combined flag tells the code after the loop.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from typing import Any

from kdsl import builtins as kb
from kdsl import types as T
from kdsl.frontend import neighbor_loops, parallel_returns, random_draws, sequence_loops
from kdsl.frontend.analysis import (
    assigned_names,
    first_jump,
    may_break_or_continue,
    may_return,
)
from kdsl.frontend.lowering import LoopFrame
from kdsl.frontend.scope import VariableType
from kdsl.frontend.static_loops import StaticLoopLowering
from kdsl.frontend.tensors import is_array
from kdsl.frontend.values import IterationSpace, Static, TupleValue
from kdsl.ir.core import Block, Value

RETURN_FLAG = "$return"
_AUG_REDUCTIONS = {ast.Add: "add", ast.Sub: "add", ast.Mult: "mul", ast.Div: "mul"}


class LoopLowering(StaticLoopLowering):
    """Turns loops into structured ops."""

    parallel_return: parallel_returns.ParallelReturn | None = None  # the loop being lowered

    def note_assumption(self, name: str, vt: VariableType) -> None:
        """Records a type chosen without a declaration; a later mismatch forces a rebuild."""
        if self.types.declared(name) is None and not name.startswith("$"):
            self.assumptions.append((name, vt))

    # --- loops ----------------------------------------------------------------------------

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            self.error("'while ... else' is not supported here", node)  # see loop_else.py
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
        rebound = set(assigned_names(body, component_bases=False)) - self.arrays_updated_in_place(body)
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
            self.error("'for ... else' over a parallel loop is not supported: iterations "
                       "break independently; test a flag after the loop", node)
        grid = neighbor_loops.grid_of_loop(self, node)
        if grid is not None:  # for j in grid.neighbors(q, radius)
            neighbor_loops.lower_neighbor_loop(self, node, grid)
            return
        if self.is_static_call(node.iter):  # for k in kd.static(range(3)): unrolled
            self.unrolled_loop(node)
            return
        for sequence in getattr(node, "kd_sequences", ()):  # for v in a (sequence_loops.py)
            iterated = self.expr(sequence)
            if hasattr(node, "kd_original") and _is_tuple(iterated):  # for d in offsets
                self.loop_over_value(node.kd_original)
                return
            if not is_array(iterated):
                self.error("a kernel can only loop over range(), kd.prange(), kd.ndrange() "
                           "or arrays", sequence)
        space = self.serial_axes.pop(id(node), None)
        if space is None and not self._loops_over_range(node.iter):
            self.loop_over_value(node)
            return
        space = space or self.iteration_space(node.iter)
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
        brk, _ = may_break_or_continue(node.body)
        if brk and len(targets) > 1:  # a break would leave only the innermost axis's loop
            self.error("'break' directly inside a kd.ndrange loop nested in a parallel loop",
                       first_jump(node.body, (ast.Break,), False) or node)
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
        """The loop variables of a parallel loop, one per axis."""
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if not all(isinstance(t, ast.Name) for t in targets) or len(targets) != len(space.stops):
            self.error(f"this parallel loop needs {len(space.stops)} loop variable(s)", node.target)
        return targets  # type: ignore[return-value]

    def loop_over_value(self, node: ast.For) -> None:
        """``for c in kd.cumsum(a)``: a serial loop over the array an expression gives
        (computed once, before the loop); ``for d in (-1, 1)``: over a tuple, unrolled (as
        ``kd.static``)."""
        value = self.expr(node.iter)
        if _is_tuple(value):
            self.unrolled_values(node, self.static_values(node.iter) if isinstance(value, Static)
                                 else list(value.items))
            return
        name = f"_kd_iterated_{id(node)}"
        self.store(ast.copy_location(ast.Name(name, ast.Store()), node.iter), value, node.iter)
        self.block(sequence_loops.loop_over_local(node, name))

    def _loops_over_range(self, node: ast.expr) -> bool:
        """``range(...)``, ``kd.prange(...)`` or ``kd.ndrange(...)``."""
        if not isinstance(node, ast.Call) or isinstance(node.func, ast.Lambda):
            return False
        return getattr(self.expr(node.func), "obj", None) in (range, kb.prange, kb.ndrange)

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
        brk, cont = may_break_or_continue(node.body)
        returns = self.uses_return_flag and may_return(node.body)
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
        self.loop_depth_counter += 1
        frame = LoopFrame(f"$break{self.loop_depth_counter}" if brk else None,
                          f"$continue{self.loop_depth_counter}" if cont else None, True,
                          self.loop_depth_counter)
        # break and return set a stop flag each thread carries as an 'or' reduction
        stops = ([frame.break_flag] if frame.break_flag else []) + ([RETURN_FLAG] if returns else [])
        inits += [self.env[RETURN_FLAG] if n == RETURN_FLAG else self.constant(False, T.bool_)
                  for n in stops]
        weak += [False] * len(stops)
        kinds = [reductions[n] for n in names] + ["add"] * len(stops)
        names += stops
        returned = self._parallel_return_frame(node, returns, brk, extents)
        if returned is not None:  # return value: keys of the first iteration returning
            keys = returned.all_key_names()
            inits += parallel_returns.no_keys(self, returned)
            weak += [False] * len(keys)
            kinds += ["min"] * len(keys)
            names += keys
        saved_return, self.parallel_return = self.parallel_return, returned
        ivs = [Value(T.i64, n) for n in target_names]
        body_block = Block(ivs + [Value(v.type, n) for v, n in zip(inits, names)])
        outer = dict(self.env)
        self._bind(names, body_block.args[len(ivs):], weak)
        self.parallel_depth += 1
        with self.builder.at(body_block):
            for name, iv, start, step in zip(target_names, ivs, space.starts, space.steps):
                self.assign(name, self.induction_value(iv, start, step), node)
            random_draws.enter_iteration(self, ivs, extents, random_loop)
            if returned is not None:
                parallel_returns.enter_iteration(self, returned, ivs, extents)
            if stops:  # the iterations after a break or return on this thread are skipped
                self.if_statement(self._none_stopped(stops), lambda: self.loop_body(node.body, frame),
                                  lambda: None, node)
            else:
                self.loop_body(node.body, frame)
            self.builder.create("yield", [
                self.carry(n, self.env[n], v, node)
                for n, v in zip(names, body_block.args[len(ivs):])
            ])
        self.parallel_depth -= 1
        op = self.builder.create(
            "parallel_for", [*extents, *inits],
            {"ndim": len(extents), "reductions": tuple(kinds), **({"stops": True} if stops else {})},
            [body_block], [v.type for v in inits],
        )
        self._finish_loop(outer, names, op.results, weak)
        self.parallel_return = saved_return
        if returned is not None:
            parallel_returns.finish(self, returned, RETURN_FLAG, node)
        if frame.break_flag:
            del self.env[frame.break_flag]
        random_draws.end_parallel(self, random_loop)

    def _parallel_return_frame(self, node: ast.For, returns: bool, breaks: bool,
                               extents: list[Value]) -> parallel_returns.ParallelReturn | None:
        arity = parallel_returns.returned_arity(node.body) if returns else 0
        return parallel_returns.begin(self, arity, breaks, extents, node) if arity else None

    def _none_stopped(self, stops: list[str]) -> Value:
        stopped = self.env[stops[0]]
        for name in stops[1:]:
            stopped = self.op("bit_or", stopped, self.env[name])
        return self.op("logical_not", stopped)

    def _is_array(self, name: str) -> bool:
        v = self.env.get(name)
        return isinstance(v, Value) and isinstance(v.type, T.ArrayType)

    def arrays_updated_in_place(self, body: list[ast.stmt]) -> set[str]:
        """Arrays the statements update only in place (``y += e``), never rebinding them."""
        in_place, rebound = set(), set()
        for n in (n for b in body for n in ast.walk(b)):
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
            if name is not None and self._is_array(name):
                if kind not in ("add", "sub") or not isinstance(stmt, ast.AugAssign):
                    # += and -= accumulate atomically
                    self.error(f"'{name}' is an array shared by the iterations of this parallel "
                               f"loop: only {name} += e and {name} -= e may update it in place",
                               stmt)
                continue
            if name is not None and isinstance(self.env.get(name), Value):
                if kinds.get(name, kind) != kind:
                    self.error(f"'{name}' is reduced with two different operations", stmt)
                kinds[name] = kind
        rebound = set(assigned_names(node.body, component_bases=False)) - self.arrays_updated_in_place(node.body)
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
                for a in _reduction_operands(stmt.value)
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
    if (  # s = s + e, s = e + s, s = s - e, s = s * e, s = e * s, s = s / e (Numba's forms)
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.BinOp)
    ):
        name = stmt.targets[0].id
        left, right, op = stmt.value.left, stmt.value.right, type(stmt.value.op)
        kind = _AUG_REDUCTIONS.get(op)
        if kind is not None and _is_name(left, name) and not _reads(right, name):
            return name, kind
        if op in (ast.Add, ast.Mult) and _is_name(right, name) and not _reads(left, name):
            return name, str(kind)
    return None, ""


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _reads(node: ast.expr, name: str) -> bool:
    return any(_is_name(n, name) for n in ast.walk(node))


def _reduction_operands(value: ast.expr) -> list[ast.expr]:
    """The operands of a reduction's right side, ``min(s, e)`` or ``s + e``."""
    if isinstance(value, ast.BinOp):
        return [value.left, value.right]
    return list(value.args) if isinstance(value, ast.Call) else []


def _is_tuple(value: Any) -> bool:
    """A tuple or list of values written in the kernel, or a global tuple. As in Numba, a
    global list is not a constant (loop over ``kd.static(name)`` to unroll it)."""
    return isinstance(value, TupleValue) or (
        isinstance(value, Static) and isinstance(value.obj, tuple))

"""Forward mode: the Jacobian-vector product of a kernel as a new kernel (``kd.jvp``).

Its arguments are the kernel's, then one tangent per differentiated argument (an array of
the same shape for an array); it returns the kernel's value and that value's tangent.
Each op is emitted followed by its tangent (tangent_rules.py); loops carry the tangents of
their carried values, branches yield them, parallel loops sum them, and an array whose
elements vary has a tangent array updated by the same stores. It runs after the tensor
lowering: whole-array expressions are loops then, and a matrix product (``gemm``) gets
the products of its tangent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kdsl import types as T
from kdsl.ir.autodiff import tangent_rules  # noqa: F401  (attaches the rules to the registry)
from kdsl.ir.autodiff.activity import is_float, varied_values
from kdsl.ir.autodiff.bits import check_bits_round_trips
from kdsl.ir.autodiff.checks import check_no_early_exits, reduction_location
from kdsl.ir.autodiff.emitter import AdjointEmitter, located_error
from kdsl.ir.autodiff.memory import array_bases, zeros_like_array
from kdsl.ir.autodiff.tensor_activity import check_array_results
from kdsl.ir.builder import IRBuilder
from kdsl.ir.core import Block, Function, Module, Operation, Value
from kdsl.ir.ops import lookup

_VIEWS = ("array_view", "array_transpose", "cast")
_TENSOR_OPS = ("tensor_map", "tensor_reduce", "tensor_assign", "tensor_matmul")
_EFFECTS = frozenset({"array_store", "atomic_rmw", "print", "assert", "raise_index_error",
                      "raise_shape_error", "raise_value_error", "array_free"})
_INDEX = T.i64


def tangent_name(name: str) -> str:
    return f"t_{name}"


class TangentSweep(AdjointEmitter):
    """Emits each op of a function and then its tangent (``self.tangents``; arrays'
    in ``self.tangent_arrays``)."""

    def __init__(self, builder: IRBuilder, varied: set[Value], varied_arrays: set[Value]) -> None:
        super().__init__(builder, varied, varied_arrays, {}, set())
        self.tangents: dict[Value, Value] = {}
        self.tangent_arrays: dict[Value, Value] = {}
        self._effects = True  # False while an iteration is replayed for its tangent

    def tangent_of(self, v: Value) -> Value | None:
        return self.tangents.get(v)

    def tangent_or_zero(self, v: Value) -> Value:
        found = self.tangents.get(v)
        return found if found is not None else self.zero(v.type)

    def carries(self, v: Value) -> bool:
        return v in self.varied and is_float(v.type)

    def emit_block(self, ops: Sequence[Operation], m: dict[Value, Value]) -> None:
        for op in ops:
            if op.name not in ("yield", "condition", "return"):
                self.emit(op, m)

    def emit(self, op: Operation, m: dict[Value, Value]) -> None:
        self.b.location = op.location
        self._mapping = m
        if not self._effects and op.name in _EFFECTS:
            return
        if op.name in _TENSOR_OPS:  # lowered before forward mode: not met
            raise located_error("whole-array expressions cannot be differentiated in forward "
                                "mode here", op.location)
        if op.name == "for":
            self._for(op, m)
        elif op.name == "while":
            self._while(op, m)
        elif op.name == "if":
            self._if(op, m)
        elif op.name == "parallel_for":
            self._parallel_for(op, m)
        elif op.name == "stop_gradient":
            m[op.result] = m.get(op.operands[0], op.operands[0])
        elif op.name == "call" and "gradient" in op.attrs:
            self._custom_gradient_call(op, m)
        elif op.name == "call":
            raise located_error("calls that were not inlined cannot be differentiated",
                                op.location)
        else:
            self._plain(op, m)

    # --- straight-line ops --------------------------------------------------------------

    def _plain(self, op: Operation, m: dict[Value, Value]) -> None:
        new = self.clone(op, m, recompute=False)
        assert new is not None
        name = op.name
        if name == "array_load":
            tangent_array = self.tangent_arrays.get(op.operands[0])
            if tangent_array is not None and self.carries(op.result):
                self.tangents[op.result] = self.b.create(
                    "array_load", [tangent_array, *new.operands[1:]]).result
        elif name in ("array_store", "atomic_rmw"):
            self._store(op, new)
        elif name == "gemm":
            self._gemm(op, new)
        elif name == "array_new":
            if op.result in self.varied_arrays:
                self.tangent_arrays[op.result] = zeros_like_array(self, new.result)
        elif name in _VIEWS and isinstance(op.results[0].type, T.ArrayType):
            source = self.tangent_arrays.get(op.operands[0])
            if source is not None:
                view = Operation(name, [source, *new.operands[1:]], [op.results[0].type],
                                 dict(op.attrs), [], op.location)
                self.b.block.append(view)
                self.tangent_arrays[op.results[0]] = view.results[0]
        elif len(op.results) == 1 and self.carries(op.result):
            tangents = [self.tangents.get(v) for v in op.operands]
            if any(t is not None for t in tangents):
                rule = lookup(name).tangent
                if rule is None:
                    raise located_error(
                        f"'{name}' has no derivative rule; its result cannot be differentiated",
                        op.location)
                self.current = op
                tangent = rule(self, op, list(new.operands), tangents)
                if tangent is not None:
                    self.tangents[op.result] = tangent

    def _custom_gradient_call(self, op: Operation, m: dict[Value, Value]) -> None:
        """A func with a hand-written gradient: the tangent of its result is the sum of
        the gradient's adjoints (given a unit adjoint of the result) times the arguments'
        tangents, so that forward and reverse mode agree."""
        new = self.clone(op, m, recompute=False)
        assert new is not None
        if not self.carries(op.result):
            return
        result_type = op.result.type
        if not isinstance(result_type, T.ScalarType):
            raise located_error(
                "forward mode of a func with a hand-written gradient needs a scalar result; "
                f"this one returns {result_type}", op.location)
        count = op.attrs["arguments"]
        arguments, captures = new.operands[:count], new.operands[count:]
        types = [v.type for v in op.operands[:count]]
        call = self.b.create("call", [*arguments, self.const(1.0, result_type), *captures],
                             {"callee": op.attrs["gradient"], "types": types},
                             result_types=types)
        tangent: Value | None = None
        for v, partial in zip(op.operands[:count], call.results):
            t = self.tangents.get(v)
            if t is None or not is_float(v.type):
                continue
            if isinstance(v.type, T.VectorType):
                term = self.op("dot", partial, t)
            elif isinstance(v.type, T.ScalarType):
                term = self.op("mul", partial, t)
            else:
                raise located_error(
                    "forward mode of a func with a hand-written gradient takes scalar and "
                    f"vector arguments; this one takes a {v.type}", op.location)
            term = self.b.cast(term, result_type)
            tangent = term if tangent is None else self.op("add", tangent, term)
        if tangent is not None:
            self.tangents[op.result] = tangent

    def _gemm(self, op: Operation, new: Operation) -> None:
        """``c = a @ b`` (rows ``first`` to ``first + count`` when given): the tangent of
        ``c`` is ``ta @ b + a @ tb``, the same packed product twice."""
        a, b, c = new.operands[:3]
        rows = new.operands[3:]
        tc = self.tangent_arrays.get(op.operands[2])
        ta, tb = (self.tangent_arrays.get(v) for v in op.operands[:2])
        if tc is None or (ta is None and tb is None):
            return
        if tb is None:
            assert ta is not None
            self.b.create("gemm", [ta, b, tc, *rows])
            return
        if ta is None:
            self.b.create("gemm", [a, tb, tc, *rows])
            return
        self.b.create("gemm", [ta, b, tc, *rows])
        dims = [self.b.create("array_dim", [tc], {"axis": k}).result for k in range(2)]
        t = tc.type
        assert isinstance(t, T.ArrayType)
        other = self.b.create("array_new", dims, {"type": T.ArrayType(t.dtype, 2, True),
                                                  "fill": "empty"}).result
        self.b.create("gemm", [a, tb, other, *rows])
        first = rows[0] if rows else self.b.constant(0, _INDEX)
        count = rows[1] if rows else dims[0]
        body = Block([Value(_INDEX, "i"), Value(_INDEX, "j")])
        with self.b.at(body):
            i = self.op("add", first, body.args[0])
            total = self.op("add", self.b.create("array_load", [tc, i, body.args[1]]).result,
                            self.b.create("array_load", [other, i, body.args[1]]).result)
            self.b.create("array_store", [tc, i, body.args[1], total])
            self.b.create("yield", [])
        self.b.create("parallel_for", [count, dims[1]], {"ndim": 2, "reductions": ()}, [body], [])

    def _store(self, op: Operation, new: Operation) -> None:
        tangent_array = self.tangent_arrays.get(op.operands[0])
        if tangent_array is None:
            return
        value = op.operands[-1]
        indices = new.operands[1:-1]
        if op.name == "array_store":
            self.b.create("array_store", [tangent_array, *indices, self.tangent_or_zero(value)])
            return
        if op.attrs["kind"] not in ("add", "sub"):
            if value in self.varied or op.operands[0] in self.varied_arrays:
                raise located_error(
                    f"an atomic {op.attrs['kind']} cannot be differentiated", op.location)
            return
        tangent = self.tangents.get(value)
        if tangent is not None:
            self.b.create("atomic_rmw", [tangent_array, *indices, tangent], dict(op.attrs))

    # --- structured ops -----------------------------------------------------------------

    def _region(self, block: Block, m: dict[Value, Value], carried: Sequence[Value],
                yielded: list[int]) -> Block:
        """A copy of ``block`` whose arguments are followed by the tangents of
        ``carried`` (arguments of ``block``), and whose terminator is followed by the
        tangents of the operands at ``yielded``."""
        new = Block([Value(a.type, a.name_hint) for a in block.args]
                    + [Value(a.type, tangent_name(a.name_hint or "value")) for a in carried])
        m.update(zip(block.args, new.args))
        for a, t in zip(carried, new.args[len(block.args):]):
            self.tangents[a] = t
        with self.b.at(new):
            self.emit_block(block.ops, m)
            end = block.ops[-1]
            operands = [m.get(v, v) for v in end.operands]
            tangents = [self.tangent_or_zero(end.operands[k]) for k in yielded]
            self.b.create(end.name, [*operands, *tangents], dict(end.attrs))
        return new

    def _finish(self, op: Operation, new: Operation, m: dict[Value, Value],
                carried: list[int]) -> None:
        self.b.block.append(new)
        count = len(op.results)
        for old, fresh in zip(op.results, new.results):
            fresh.name_hint = old.name_hint
            m[old] = fresh
        for slot, k in enumerate(carried):
            self.tangents[op.results[k]] = new.results[count + slot]

    def _for(self, op: Operation, m: dict[Value, Value]) -> None:
        body = op.regions[0]
        inits = op.operands[3:]
        carried = [k for k, a in enumerate(body.args[1:])
                   if self.carries(a) or self.carries(op.results[k])]
        tangent_inits = [self.tangent_or_zero(inits[k]) for k in carried]
        region = self._region(body, m, [body.args[1 + k] for k in carried], carried)
        new = Operation("for", [*(m.get(v, v) for v in op.operands), *tangent_inits],
                        [r.type for r in op.results] + [t.type for t in tangent_inits],
                        dict(op.attrs), [region], op.location)
        self._finish(op, new, m, carried)

    def _while(self, op: Operation, m: dict[Value, Value]) -> None:
        before, body = op.regions
        if len(before.ops[-1].operands) != 1:
            raise located_error("this form of while loop cannot be differentiated", op.location)
        carried = [k for k in range(len(op.operands))
                   if self.carries(before.args[k]) or self.carries(body.args[k])
                   or self.carries(op.results[k])]
        tangent_inits = [self.tangent_or_zero(op.operands[k]) for k in carried]
        new_before = self._region(before, m, [before.args[k] for k in carried], [])
        new_body = self._region(body, m, [body.args[k] for k in carried], carried)
        new = Operation("while", [*(m.get(v, v) for v in op.operands), *tangent_inits],
                        [r.type for r in op.results] + [t.type for t in tangent_inits],
                        dict(op.attrs), [new_before, new_body], op.location)
        self._finish(op, new, m, carried)

    def _if(self, op: Operation, m: dict[Value, Value]) -> None:
        carried = [k for k, r in enumerate(op.results) if self.carries(r)]
        regions = [self._region(region, m, [], carried) for region in op.regions]
        types = [r.type for r in op.results] + [op.results[k].type for k in carried]
        attrs: dict[str, Any] = {**op.attrs, "types": types}
        new = Operation("if", [m.get(op.operands[0], op.operands[0])], types, attrs, regions,
                        op.location)
        self._finish(op, new, m, carried)

    def _parallel_for(self, op: Operation, m: dict[Value, Value]) -> None:
        """Sums carry their tangents in sums of their own; the tangent of a min or max
        is that of the winning iteration's value (found after the loop)."""
        ndim = op.attrs["ndim"]
        kinds = op.attrs["reductions"]
        body = op.regions[0]
        inits = op.operands[ndim:]
        active = [k for k, a in enumerate(body.args[ndim:])
                  if self.carries(a) or self.carries(op.results[k])]
        for k in active:
            if kinds[k] not in ("add", "min", "max"):
                raise located_error(
                    f"a '{kinds[k]}' reduction cannot be differentiated",
                    reduction_location(op, k))
        carried = [k for k in active if kinds[k] == "add"]
        tangent_inits = [self.tangent_or_zero(inits[k]) for k in carried]
        region = self._region(body, m, [body.args[ndim + k] for k in carried], carried)
        attrs = {**op.attrs, "reductions": tuple(kinds) + tuple("add" for _ in carried)}
        new = Operation("parallel_for", [*(m.get(v, v) for v in op.operands), *tangent_inits],
                        [r.type for r in op.results] + [t.type for t in tangent_inits],
                        attrs, [region], op.location)
        self._finish(op, new, m, carried)
        for k in active:
            if kinds[k] != "add":
                self.tangents[op.results[k]] = self._winner_tangent(op, m, k)

    def _winner_tangent(self, op: Operation, m: dict[Value, Value], k: int) -> Value:
        """The tangent of the ``k``-th (min or max) reduction of a parallel loop: that of
        the first iteration whose value is the result, or of the initial value when it
        is the result (the iteration found again, its effects left out)."""
        ndim = op.attrs["ndim"]
        kinds = op.attrs["reductions"]
        body = op.regions[0]
        extents = [m.get(v, v) for v in op.operands[:ndim]]
        result = m[op.results[k]]
        none = self.b.constant(2**62, _INDEX)
        search_body = Block([Value(_INDEX, a.name_hint) for a in body.args[:ndim]]
                            + [Value(_INDEX, "winner")])
        inner = dict(m)
        inner.update(zip(body.args[:ndim], search_body.args[:ndim]))
        with self.b.at(search_body):
            for j, arg in enumerate(body.args[ndim:]):
                inner[arg] = self.reduction_identity(kinds[j], arg.type)
            for inner_op in body.ops[:-1]:
                if not self.skipped_when_recomputing(inner_op):
                    self.clone(inner_op, inner, True)
            value = body.ops[-1].operands[k]
            won = self.op("eq", inner.get(value, value), result)
            linear = self.linear_index(search_body.args[:ndim], extents)
            candidate = self.op("select", won, linear, none)
            self.b.create("yield", [self.op("min", search_body.args[ndim], candidate)])
        search = self.b.create("parallel_for", [*extents, none],
                               {"ndim": ndim, "reductions": ("min",)}, [search_body], [_INDEX])
        winner = search.results[0]
        init = op.operands[ndim + k]
        initial = self.op("bit_or", self.op("eq", m.get(init, init), result),
                          self.op("eq", winner, none))
        from_init, from_winner = Block(), Block()
        with self.b.at(from_init):
            self.b.create("yield", [self.tangent_or_zero(init)])
        with self.b.at(from_winner):
            effects, saved = self._effects, dict(self.tangents)
            self._effects = False
            try:
                self._replay_at(op, m, winner, extents)
                tangent = self.tangent_or_zero(body.ops[-1].operands[k])
            finally:
                self._effects, self.tangents = effects, saved
            self.b.create("yield", [tangent])
        branch = self.b.create("if", [initial], {"types": [result.type]},
                               [from_init, from_winner], [result.type])
        return branch.results[0]

    def _replay_at(self, op: Operation, m: dict[Value, Value], linear: Value,
                   extents: list[Value]) -> None:
        """Emits the body of a parallel loop (with tangents) for the iteration at the
        linear index ``linear``; its reductions start from their identities."""
        ndim = op.attrs["ndim"]
        body = op.regions[0]
        inner = dict(m)
        remaining = linear
        ivs: list[Value] = []
        for axis in reversed(range(ndim)):
            if axis == 0:
                ivs.append(remaining)
            else:
                ivs.append(self.op("mod", remaining, extents[axis]))
                remaining = self.op("floordiv", remaining, extents[axis])
        inner.update(zip(body.args[:ndim], reversed(ivs)))
        for j, arg in enumerate(body.args[ndim:]):
            inner[arg] = self.reduction_identity(op.attrs["reductions"][j], arg.type)
            self.tangents.pop(arg, None)
        self.emit_block(body.ops, inner)

def _varied(body: Block, roots: list[Value]) -> tuple[set[Value], set[Value]]:
    """``varied_values``, with the products of lowered matmuls (``gemm``) of arrays that
    vary varying too."""
    products = [op for op in body.walk() if op.name == "gemm"]
    bases = array_bases(body)
    while True:
        varied, varied_arrays = varied_values(body, roots)
        more = [v for op in products if op.operands[2] not in varied_arrays
                and (op.operands[0] in varied_arrays or op.operands[1] in varied_arrays)
                for v in (op.operands[2], bases.get(op.operands[2], op.operands[2]))]
        if not more:
            return varied, varied_arrays
        roots = roots + more


def jacobian_vector_product(module: Module, argnums: tuple[int, ...]) -> None:
    """Replaces ``module.kernel`` by its Jacobian-vector product with respect to the
    arguments at ``argnums``."""
    fn = module.kernel
    ret = fn.body.ops[-1]
    if len(ret.operands) != 1 or fn.attrs.get("returns_tuple") or not (
            isinstance(ret.operands[0].type, T.ScalarType) and is_float(ret.operands[0].type)):
        raise located_error(
            f"kd.jvp needs a kernel that returns one floating-point scalar; {fn.name} returns "
            + (", ".join(str(v.type) for v in ret.operands) or "nothing"), fn.location)
    roots = [fn.args[k] for k in argnums]
    varied, varied_arrays = _varied(fn.body, roots)
    check_bits_round_trips(fn.body, varied)
    check_no_early_exits(fn.body)
    for op in fn.body.walk():
        check_array_results(op, varied | varied_arrays)
    tangent_args = [Value(a.type.of_any_padding() if isinstance(a.type, T.ArrayType) else a.type,
                          tangent_name(fn.arg_names[k])) for k, a in zip(argnums, roots)]
    body = Block(list(fn.args) + tangent_args)
    builder = IRBuilder(body)
    sweep = TangentSweep(builder, varied, varied_arrays)
    for a, t in zip(roots, tangent_args):
        if isinstance(a.type, T.ArrayType):
            sweep.tangent_arrays[a] = t
        else:
            sweep.tangents[a] = t
    for a in fn.args:  # arrays the kernel makes vary without being differentiated
        if a in varied_arrays and a not in sweep.tangent_arrays:
            sweep.tangent_arrays[a] = zeros_like_array(sweep, a)
    m: dict[Value, Value] = {a: a for a in fn.args}
    sweep.emit_block(fn.body.ops, m)
    result = ret.operands[0]
    builder.location = ret.location
    value = m.get(result, result)
    builder.create("return", [value, sweep.tangent_or_zero(result)])
    names = list(fn.arg_names) + [tangent_name(fn.arg_names[k]) for k in argnums]
    module.kernel = Function(fn.name, body, [value.type, value.type], True, fn.location, names,
                             {**fn.attrs, "returns_tuple": True})

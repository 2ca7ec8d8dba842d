"""Adjoints of whole-array (tensor) ops, as whole-array ops.

The reverse sweep gives each tensor op an adjoint made of tensor ops, before the tensor
lowering, so that the existing lowering and fusion compile the way back as they compile
the way forward:

- an elementwise op (``tensor_map``) gets the elementwise adjoint of its scalar rule
  (rules.py), applied to arrays (tensor_map_rules.py); an operand that was broadcast
  receives the sum of its adjoint over the broadcast axes (a ``tensor_reduce``);
- ``a @ b`` gets matmuls: ``da = g @ b.T``, ``db = a.T @ g`` (for a matrix times a
  vector, ``da`` is the outer product ``g[:, None] * b[None, :]``);
- ``kd.sum``/``kd.mean`` spread their adjoint back over the reduced axes (broadcast);
  ``kd.max``/``kd.min`` route it to the elements equal to the result, shared equally
  among ties (as ``torch.amax`` and JAX do);
- views (slices, new axes, transposes) differentiate as views: the adjoint of a view of
  an array is added into the same view of the array's adjoint;
- ``dest[...] = expr`` passes the adjoint of the destination's elements to ``expr`` and
  clears it (the old values were overwritten: an argument's adjoint, that of its value
  before the call, is zero there); ``dest[...] += expr`` passes it unchanged.

Adjoint of an array value: an expression (array or scalar) that broadcasts to the value's
shape, in NumPy's sense. Whether an axis has size 1 must be known when compiling (a new
axis, ``keepdims``, a scalar): an operand whose axis has size 1 only at run time while
the result's does not is a run-time error under a gradient (the summation over that axis
would have to be chosen at run time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kdsl import types as T
from kdsl.errors import CompileError
from kdsl.ir.analysis import definitions, users
from kdsl.ir.autodiff.tensor_activity import (
    TENSOR_OPS,
    VIEW_OPS,
    is_array,
    is_float_array,
    needs_adjoint_storage,
    root_array,
    touched_arrays,
    written_arrays,
)
from kdsl.ir.autodiff.tensor_map_rules import map_adjoint
from kdsl.ir.autodiff.tensor_shapes import (
    FULL_SLICE,
    Pattern,
    TensorBuilder,
    element_type,
)
from kdsl.ir.core import Block, Operation, Value

if TYPE_CHECKING:
    from kdsl.ir.autodiff.reverse import ReverseSweep


_ROUTING_FNS = frozenset({"select", "min", "max", "minimum", "maximum", "fmin", "fmax", "abs",
                          "clamp", "copysign"})
_TOUCHES_ADJOINTS = ("array_load", "array_store", "atomic_rmw", "call")


# --- the reverse sweep of tensor ops -------------------------------------------------------


class TensorAdjoints(TensorBuilder):
    """The adjoints of a function's array values, kept by a reverse sweep."""

    def __init__(self, sweep: ReverseSweep, root: Block) -> None:
        self.sweep = sweep
        self.b = sweep.b
        self.defs = definitions(root)
        self.users = users(root)
        self.patterns: dict[Value, Pattern] = {}
        self.lazy: dict[Value, Value] = {}  # adjoint expressions of array values
        self.memory: dict[Value, Value] = {}  # adjoint storage of viewed array values
        self.pending: dict[Value, Value] = {}  # adjoint storage -> what to add into it
        self.recomputed: dict[tuple[Value, int], Value] = {}
        self.dims: dict[tuple[Value, int, int], Value] = {}
        self.m: dict[Value, Value] = {}
        self.written = {v for op in root.walk() for v in written_arrays(op, self.defs)}
        self.routed = self._routed(root)
        self.order = {op: k for k, op in enumerate(root.walk())}

    @staticmethod
    def of(sweep: ReverseSweep, op: Operation) -> TensorAdjoints:
        found: TensorAdjoints | None = getattr(sweep, "tensor_adjoints", None)
        if found is None:
            block = op.parent
            while block is not None and block.parent is not None:
                assert block.parent.parent is not None
                block = block.parent.parent
            assert block is not None
            found = TensorAdjoints(sweep, block)
            sweep.tensor_adjoints = found  # type: ignore[attr-defined]
        return found

    # --- values ---------------------------------------------------------------------

    def is_varied(self, v: Value) -> bool:
        if is_array(v):
            return v in self.sweep.varied_arrays and is_float_array(v)
        return v in self.sweep.varied

    def primal(self, v: Value) -> Value:
        """The forward value of ``v``: an elementwise expression the forward computed
        inside its consumer's loop is computed again here (so that it stays fused),
        unless it reads an array some statement writes."""
        if self._recomputable(v):
            key = (v, id(self.b.block))
            found = self.recomputed.get(key)
            if found is None:
                op = self.defs[v]
                operands = [self.primal(o) for o in op.operands]
                found = self.b.value("tensor_map", *operands, **op.attrs)
                self.recomputed[key] = found
                self.patterns[found] = self.pattern(v)
            return found
        mapped = self.m.get(v, v)
        if is_array(v):
            self.patterns.setdefault(mapped, self.pattern(v))
        return mapped

    def _recomputable(self, v: Value) -> bool:
        op = self.defs.get(v)
        if op is None or op.name != "tensor_map":
            return False
        consumers = self.users.get(v, [])
        if len(consumers) != 1 or consumers[0].name not in ("tensor_map", "tensor_reduce",
                                                             "tensor_assign"):
            return False
        return not any(root_array(leaf, self.defs) in self.written for leaf in self._leaves(v))

    def _leaves(self, v: Value) -> list[Value]:
        op = self.defs.get(v)
        if op is not None and op.name == "tensor_map":
            return [leaf for o in op.operands if is_array(o) for leaf in self._leaves(o)]
        return [v]

    def sink(self, v: Value) -> Value | None:
        """Storage that holds the adjoint of array ``v`` (an argument's or temporary's
        adjoint array, or a view of it), if it has one."""
        found = self.sweep.adjoint_arrays.get(v)
        if found is None:
            found = self.memory.get(v)
        if found is not None:
            self.patterns.setdefault(found, self.pattern(v))
        return found

    def take(self, v: Value) -> Value | None:
        """The whole adjoint of array value ``v`` (whose op is being reversed)."""
        storage = self.memory.pop(v, None)
        if storage is None and self.defs.get(v) is not None:
            storage = self.sweep.adjoint_arrays.get(v)  # see prepare_tensor_storage
        if storage is not None:
            self.flush()
        parts = [p for p in (self.lazy.pop(v, None), storage) if p is not None]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return self.map("add", parts, operand_type=v.type.dtype)

    def add_adjoint(self, v: Value, contribution: Value) -> None:
        """Adds ``contribution`` (which broadcasts to ``v``'s shape) to ``v``'s adjoint."""
        if not self.is_varied(v):
            return
        if not is_array(v):
            if is_array(contribution):
                contribution = self.reduce_sum(contribution, None, False)
            self.sweep.accumulate(v, self.b.cast(contribution, v.type))
            return
        sink = self.sink(v)
        if sink is not None:  # summed, and added when something reads the adjoint
            previous = self.pending.get(sink)
            self.pending[sink] = contribution if previous is None else self.map(
                "add", [previous, contribution], operand_type=v.type.dtype)
            return
        previous = self.lazy.get(v)
        self.lazy[v] = contribution if previous is None else self.map(
            "add", [previous, contribution], operand_type=v.type.dtype)

    def flush(self) -> None:
        """Adds the pending contributions into the adjoint storage."""
        for storage, contribution in self.pending.items():
            self.b.create("tensor_assign", [storage, contribution], {"accumulate": "add"})
        self.pending.clear()

    def reduce_to(self, c: Value, target: Value, result: Pattern,
                  size: Callable[[int], Value]) -> Value:
        """The adjoint ``c`` of a result of pattern ``result`` (``size(k)`` gives its
        axes' sizes) summed over the axes along which ``target`` was broadcast."""
        n = len(result)
        t = self.pattern(target)
        lead = n - len(t)

        def has(v: Value, k: int) -> bool:
            p = self.pat(v)
            j = k - (n - len(p))
            return j >= 0 and p[j] == "?"

        if not t and is_array(c) and "?" in self.pat(c):
            uniform = [size(k) for k in range(n) if not has(c, k) and result[k] == "?"]
            return self._times(self.reduce_sum(c, None, False), uniform)
        factors: list[Value] = []
        for k in range(lead, n):
            if t[k - lead] == "?":
                continue
            if has(c, k):
                c = self.reduce_sum(c, k - (n - c.type.ndim), True)
            elif result[k] == "?":
                factors.append(size(k))
        for k in range(lead):
            if has(c, k):
                assert k - (n - c.type.ndim) == 0
                c = self.reduce_sum(c, 0, False)
            elif result[k] == "?":
                factors.append(size(k))
        return self._times(c, factors)

    def _times(self, c: Value, factors: list[Value]) -> Value:
        if not factors:
            return c
        count = factors[0]
        for f in factors[1:]:
            count = self.b.value("mul", count, f)
        scalar = T.element_scalar(element_type(c))
        return self.map("mul", [c, self.b.cast(count, scalar)])

    def _routed(self, root: Block) -> set[Value]:
        routed: set[Value] = set()
        scalar_routed = self.sweep.routed
        changed = True
        while changed:
            changed = False
            for op in root.walk():
                if op.name not in TENSOR_OPS + VIEW_OPS or not op.results:
                    continue
                sources: list[Value] = []
                if op.name == "tensor_map" and op.attrs["fn"] in _ROUTING_FNS:
                    sources = list(op.operands)
                elif op.name == "tensor_reduce" and op.attrs["kind"] in ("min", "max"):
                    sources = list(op.operands)
                if (op.result in routed or scalar_routed is None
                        or (not is_array(op.result) and op.result in scalar_routed)):
                    sources = list(op.operands)
                for v in sources:
                    if v not in routed:
                        routed.add(v)
                        changed = True
        return routed

    # --- the reverse of each op ---------------------------------------------------------

    def reverse(self, op: Operation, m: dict[Value, Value]) -> None:
        self.m = m
        self.b.location = op.location
        if op.name == "tensor_assign":
            self._assign(op)
            return
        result = op.result
        if is_array(result):
            if result not in self.sweep.varied_arrays:
                return
            if op.name in VIEW_OPS and result in self.sweep.adjoint_arrays:
                return  # its adjoint went into the viewed array's adjoint (a view of it)
            # else: summed in ``lazy``, or in storage of its own that a view of this
            # view made (``_view``: ``y.T[1:]``), which ``take`` collects
            g = self.take(result)
        else:
            g = self.sweep.adj.get(result)
        if g is None:
            return
        if op.name == "tensor_map":
            map_adjoint(self, op, g)
        elif op.name == "tensor_reduce":
            self._reduce(op, g)
        elif op.name == "tensor_matmul":
            self._matmul(op, g)
        elif op.name == "array_transpose":
            if is_array(g):
                g = self.transpose(self._expand(g, result.type.ndim))
            self.add_adjoint(op.operands[0], g)
        elif op.name == "array_view":
            self._view(op, g)

    def _expand(self, g: Value, ndim: int) -> Value:
        """``g`` with new leading axes, to ``ndim`` axes."""
        if g.type.ndim == ndim:
            return g
        return self.view(g, [("newaxis",)] * (ndim - g.type.ndim) + [FULL_SLICE] * g.type.ndim)

    def _view(self, op: Operation, g: Value) -> None:
        base = op.operands[0]
        if not self.is_varied(base):
            return
        storage = self.sink(base)
        if storage is None:
            dims = [self.dim(base, k) for k in range(base.type.ndim)]
            storage = self.new_array(base.type.dtype, dims, "zeros")
            self.memory[base] = storage
        operands = [storage, *(self.m.get(v, v) for v in op.operands[1:])]
        target = self.b.value("array_view", *operands, **op.attrs)
        self.b.create("tensor_assign", [target, g], {"accumulate": "add"})


    def _reduce(self, op: Operation, g: Value) -> None:
        source = op.operands[0]
        if not self.is_varied(source):
            return
        kind, axis, keepdims = op.attrs["kind"], op.attrs["axis"], op.attrs["keepdims"]
        ndim = source.type.ndim
        reduced = range(ndim) if axis is None else (axis,)
        if axis is not None and not keepdims:
            g = self.insert_axis(g, axis, ndim)
        if kind == "mean":
            count = self.dim(source, reduced[0])
            for k in reduced[1:]:
                count = self.b.value("mul", count, self.dim(source, k))
            g = self.map("div", [g, self.b.cast(count, T.element_scalar(element_type(g)))])
        elif kind in ("min", "max"):
            value = self.primal(source)
            best = self.m.get(op.result, op.result)
            if axis is not None and not keepdims:
                self.patterns.setdefault(best, self.pattern(op.result))
                best = self.insert_axis(best, axis, ndim)
            winner = self.map("eq", [value, best])
            ones = self.map("select", [winner, self.b.constant(1.0, T.element_scalar(element_type(g))),
                                       self.b.constant(0.0, T.element_scalar(element_type(g)))])
            ties = self.reduce_sum(ones, axis, axis is not None)
            share = self.map("div", [g, ties])
            g = self.map("select", [winner, share, self.b.constant(0.0, T.element_scalar(element_type(g)))])
        elif kind != "sum":
            raise CompileError(f"kd.{kind} of an array cannot be differentiated", op.location)
        self.add_adjoint(source, g)

    def _matmul(self, op: Operation, g: Value) -> None:
        a, b = op.operands
        g = self.full(g, op.result)
        if b.type.ndim == 2:
            if self.is_varied(a):
                self.add_adjoint(a, self.matmul(g, self.transpose(self.primal(b))))
            if self.is_varied(b):
                self.add_adjoint(b, self.matmul(self.transpose(self.primal(a)), g))
            return
        if self.is_varied(a):
            column = self.view(g, [FULL_SLICE, ("newaxis",)])
            row = self.view(self.primal(b), [("newaxis",), FULL_SLICE])
            self.add_adjoint(a, self.map("mul", [column, row]))
        if self.is_varied(b):
            self.add_adjoint(b, self.matmul(self.transpose(self.primal(a)), g))

    def _assign(self, op: Operation) -> None:
        dest, source = op.operands
        storage = self.sink(dest)
        if storage is None:
            return
        accumulate = op.attrs.get("accumulate")
        skipped: Operation | None = None
        update = self.defs.get(source)
        if (accumulate is None and update is not None and update.name == "tensor_map"
                and update.attrs["fn"] in ("add", "sub") and update.operands[0] is dest
                and len(self.users.get(source, [])) == 1):
            # dest = dest + e, as NumPy's dest += e: dest's adjoint stays, e receives it
            accumulate, source, skipped = update.attrs["fn"], update.operands[1], update
        self.flush()
        g = storage
        # when the adjoint of an earlier use of the array will be added into its adjoint,
        # read the adjoint now and, for an assignment, clear what it overwrote; so too
        # for an argument, whose adjoint is that of its value before the call (to which
        # the elements overwritten contribute nothing)
        touched = self._touched_before(op, dest, skipped)
        clear = accumulate is None and (touched or self.defs.get(root_array(dest, self.defs)) is None)
        if touched or clear:
            dims = [self.b.value("array_dim", storage, axis=k) for k in range(dest.type.ndim)]
            g = self.new_array(dest.type.dtype, dims, "empty")
            self.b.create("tensor_assign", [g, storage])
            if clear:
                self.b.create("tensor_assign", [storage, self.b.constant(
                    0.0, T.element_scalar(dest.type.dtype))])
        if not self.is_varied(source):
            return
        if accumulate == "sub":
            g = self.map("neg", [g])
        result = self.pattern(dest)
        self.add_adjoint(source, self.reduce_to(g, source, result,
                                                lambda k: self.dim(dest, k)))

    def _touched_before(self, op: Operation, dest: Value, skipped: Operation | None) -> bool:
        root = root_array(dest, self.defs)
        position = self.order.get(op, 0)
        return any(self.order.get(other, 0) < position and other is not skipped
                   and root in touched_arrays(other, self.defs)
                   for other in self.order if not other.regions)


def prepare_tensor_storage(sweep: ReverseSweep, op: Operation, m: dict[Value, Value]) -> None:
    """On the way forward: an array value whose single elements are read, or that
    is used inside a loop or branch, gets an adjoint array (zeros) where it is made."""
    from kdsl.ir.autodiff.memory import zeros_like_array

    tensors = TensorAdjoints.of(sweep, op)
    if needs_adjoint_storage(op, tensors.users):
        sweep.adjoint_arrays[op.result] = zeros_like_array(sweep, m[op.result])


def flush_tensor_adjoints(sweep: ReverseSweep, before: Operation | None = None) -> None:
    """Adds the adjoints of arrays summed so far into their adjoint arrays (before an op
    whose adjoint may read or write them, or at the end of a block)."""
    found: TensorAdjoints | None = getattr(sweep, "tensor_adjoints", None)
    if found is None or not found.pending:
        return
    if before is None or before.regions or before.name in _TOUCHES_ADJOINTS:
        found.flush()

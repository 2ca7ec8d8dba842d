"""An interpreter for the IR: the reference that passes and code generation are tested
against. It runs a function on NumPy values (scalars, small vectors, arrays) serially;
a parallel loop runs its iterations in order, reductions starting from their initial
values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kdsl import types as T
from kdsl.ir.core import Block, Function, Module, Operation, Value
from kdsl.ir.interpreter_tensors import InterpreterError, TensorOps
from kdsl.ir.math_builtins import MATH_FUNCTIONS
from kdsl.ir.structured import ForOp, IfOp, ParallelForOp, WhileOp


def _scalar(t: T.ScalarType, value: Any) -> Any:
    return t.numpy_dtype.type(value)


def _elementwise(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(result_type: Any, *args: Any) -> Any:
        with np.errstate(all="ignore"):
            out = fn(*args)
        dtype = T.element_scalar(result_type).numpy_dtype
        if isinstance(result_type, T.ScalarType):
            return dtype.type(out)
        return np.asarray(out, dtype=dtype).reshape(T.element_shape(result_type))

    return run


def _floordiv(a: Any, b: Any) -> Any:
    if np.issubdtype(np.asarray(b).dtype, np.integer):
        return np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b)))
    return np.floor_divide(a, b)


def _mod(a: Any, b: Any) -> Any:
    if np.issubdtype(np.asarray(b).dtype, np.integer):
        return np.where(b == 0, 0, np.mod(a, np.where(b == 0, 1, b)))
    return np.mod(a, b)


def _min(a: Any, b: Any) -> Any:
    return np.where(b < a, b, a)


def _max(a: Any, b: Any) -> Any:
    return np.where(a < b, b, a)


def _int_power(a: Any, b: Any) -> Any:
    if np.issubdtype(np.asarray(a).dtype, np.integer):
        return np.where(np.asarray(b) < 0, 0, np.power(a, np.maximum(b, 0)))
    return np.power(a, b)


def range_length(start: int, stop: int, step: int) -> int:
    """``len(range(start, stop, step))``, saturated at 2**63 - 1 (0 for a zero step, which
    the program reported before)."""
    if step == 0:
        return 0
    length = (stop - start + step - (1 if step > 0 else -1)) // step
    return min(max(length, 0), 2**63 - 1)


_ELEMENTWISE: dict[str, Callable[..., Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": _floordiv, "mod": _mod, "pow": _int_power, "min": _min, "max": _max,
    "bit_and": np.bitwise_and, "bit_or": np.bitwise_or,
    "bit_xor": np.bitwise_xor, "shl": np.left_shift, "shr": np.right_shift,
    "neg": np.negative, "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "logical_not": np.logical_not, "bit_not": np.invert,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    "select": lambda c, a, b: a if c else b,
    "wrap_index": lambda index, size: index + size if index < 0 else index,
    "range_length": lambda start, stop, step: range_length(int(start), int(stop), int(step)),
    # tensor_map functions only (NumPy's NaN rules of min and max)
    "minimum": np.minimum, "maximum": np.maximum, "fmin": np.fmin, "fmax": np.fmax,
    **{fn.name: fn.reference for fn in MATH_FUNCTIONS.values()},
}


class Interpreter(TensorOps):
    """Runs IR functions; ``run(fn, args)`` returns the values of its ``return``."""

    elementwise = _ELEMENTWISE

    def __init__(self, module: Module) -> None:
        self.funcs = {f.name: f for f in module.funcs.values()}
        self.module = module

    def run(self, fn: Function, args: Sequence[Any]) -> list[Any]:
        env: dict[Value, Any] = dict(zip(fn.args, args))
        return self.block(fn.body, env)

    def block(self, block: Block, env: dict[Value, Any]) -> list[Any]:
        for op in block.ops:
            if op.name in ("yield", "condition", "return"):
                return [env[v] for v in op.operands]
            results = self.op(op, env)
            for r, value in zip(op.results, results):
                env[r] = value
        return []

    def op(self, op: Operation, env: dict[Value, Any]) -> list[Any]:
        args = [env[v] for v in op.operands]
        method = getattr(self, f"op_{op.name}", None)
        if method is not None:
            return method(op, args, env)
        fn = _ELEMENTWISE.get(op.name)
        if fn is None:
            raise NotImplementedError(f"the interpreter has no rule for '{op.name}'")
        return [_elementwise(fn)(op.result.type, *args)]

    # --- values -------------------------------------------------------------------------

    def op_constant(self, op: Operation, args: list, env: dict) -> list:
        return [_scalar(op.attrs["type"], op.attrs["value"])]

    def op_cast(self, op: Operation, args: list, env: dict) -> list:
        t = op.result.type
        if isinstance(t, T.ArrayType):  # the same memory, or its elements converted as read
            same = t.dtype == op.operands[0].type.dtype
            return [args[0] if same else np.asarray(args[0]).astype(T.element_scalar(t.dtype).numpy_dtype)]
        dtype = T.element_scalar(t).numpy_dtype
        with np.errstate(all="ignore"):
            source = np.asarray(args[0])
            if np.issubdtype(source.dtype, np.floating) and np.issubdtype(dtype, np.integer):
                info = np.iinfo(dtype)
                source = np.nan_to_num(np.clip(np.trunc(source), info.min, info.max), nan=0)
            value = source.astype(dtype)
        return [value[()] if isinstance(t, T.ScalarType) else value]

    def op_bitcast(self, op: Operation, args: list, env: dict) -> list:
        return [np.asarray(args[0]).view(op.result.type.numpy_dtype)[()]]

    def op_splat(self, op: Operation, args: list, env: dict) -> list:
        t = op.result.type
        return [np.full(t.shape, args[0], dtype=t.element.numpy_dtype)]

    def op_make_vector(self, op: Operation, args: list, env: dict) -> list:
        t = op.result.type
        return [np.array(args, dtype=t.element.numpy_dtype).reshape(t.shape)]

    def op_extract(self, op: Operation, args: list, env: dict) -> list:
        return [np.asarray(args[0]).reshape(-1)[op.attrs["index"]]]

    def op_insert(self, op: Operation, args: list, env: dict) -> list:
        value = np.array(args[0], copy=True)
        value.reshape(-1)[op.attrs["index"]] = args[1]
        return [value]

    def op_dot(self, op: Operation, args: list, env: dict) -> list:
        return [op.result.type.numpy_dtype.type(np.dot(args[0], args[1]))]

    def op_cross(self, op: Operation, args: list, env: dict) -> list:
        return [np.cross(args[0], args[1]).astype(args[0].dtype)]

    def op_matmul(self, op: Operation, args: list, env: dict) -> list:
        return [np.asarray(args[0] @ args[1], dtype=args[0].dtype)]

    def op_transpose(self, op: Operation, args: list, env: dict) -> list:
        return [np.ascontiguousarray(np.transpose(args[0]))]

    def op_outer(self, op: Operation, args: list, env: dict) -> list:
        return [np.outer(args[0], args[1]).astype(args[0].dtype)]

    # --- arrays ---------------------------------------------------------------------

    def op_array_new(self, op: Operation, args: list, env: dict) -> list:
        t = op.result.type
        shape = tuple(int(a) for a in args[:t.ndim]) + T.element_shape(t.dtype)
        dtype = T.element_scalar(t.dtype).numpy_dtype
        fill = {"empty": 0, "zeros": 0, "ones": 1}.get(op.attrs["fill"])
        value = args[t.ndim] if fill is None else fill
        return [np.full(shape, value, dtype=dtype)]

    def op_array_free(self, op: Operation, args: list, env: dict) -> list:
        return []

    def op_raise_shape_error(self, op: Operation, args: list, env: dict) -> list:
        if not args[0]:
            raise InterpreterError(f"{op.attrs.get('what', '')}: sizes {args[1]} and {args[2]}")
        return []

    def op_raise_value_error(self, op: Operation, args: list, env: dict) -> list:
        if not args[0]:
            raise InterpreterError(op.attrs.get("what", ""))
        return []

    def op_array_dim(self, op: Operation, args: list, env: dict) -> list:
        return [np.int64(args[0].shape[op.attrs["axis"]])]

    @staticmethod
    def _index(array: np.ndarray, t: T.ArrayType, indices: list) -> tuple:
        index = tuple(int(i) for i in indices)
        for axis, i in enumerate(index):
            if not 0 <= i < array.shape[axis]:
                raise InterpreterError(f"index {i} out of bounds for axis {axis}")
        return index

    def op_array_load(self, op: Operation, args: list, env: dict) -> list:
        array, *indices = args
        value = array[self._index(array, op.operands[0].type, indices)]
        return [np.array(value, copy=True) if isinstance(value, np.ndarray) else value]

    def op_array_store(self, op: Operation, args: list, env: dict) -> list:
        array, *indices, value = args
        array[self._index(array, op.operands[0].type, indices)] = value
        return []

    def op_atomic_rmw(self, op: Operation, args: list, env: dict) -> list:
        array, *indices, value = args
        index = self._index(array, op.operands[0].type, indices)
        old = np.array(array[index], copy=True)
        updates: dict[str, Callable[..., Any]] = {
            "add": np.add, "sub": np.subtract, "min": _min, "max": _max}
        fn = updates[op.attrs["kind"]]
        with np.errstate(all="ignore"):
            array[index] = fn(array[index], value)
        return [old[()] if old.ndim == 0 else old]

    # --- control flow -----------------------------------------------------------------

    def op_if(self, op: Operation, args: list, env: dict) -> list:
        branch = IfOp(op)
        return self.block(branch.then_block if env[branch.condition] else branch.else_block, env)

    def op_for(self, op: Operation, args: list, env: dict) -> list:
        loop = ForOp(op)
        carried = [env[v] for v in loop.inits]
        iv, stop, step = int(env[loop.start]), int(env[loop.stop]), int(env[loop.step])
        while iv < stop:
            env[loop.iv] = np.int64(iv)
            env.update(zip(loop.carried, carried))
            carried = self.block(loop.body, env)
            iv += step
        return carried

    def op_parallel_for(self, op: Operation, args: list, env: dict) -> list:
        loop = ParallelForOp(op)
        carried = [env[v] for v in loop.inits]
        for ivs in np.ndindex(*[int(env[e]) for e in loop.extents]):
            env.update(zip(loop.ivs, [np.int64(i) for i in ivs]))
            env.update(zip(loop.partials, carried))
            carried = self.block(loop.body, env)
        return list(carried)

    def op_while(self, op: Operation, args: list, env: dict) -> list:
        loop = WhileOp(op)
        carried = [env[v] for v in loop.inits]
        while True:
            env.update(zip(loop.before.args, carried))
            (cond,) = self.block(loop.before, env)
            if not cond:
                return carried
            env.update(zip(loop.body.args, carried))
            carried = self.block(loop.body, env)

    def op_call(self, op: Operation, args: list, env: dict) -> list:
        return self.run(self.funcs[op.attrs["callee"]], args)

    # --- effects ----------------------------------------------------------------------

    def op_print(self, op: Operation, args: list, env: dict) -> list:
        values = iter(args)
        texts = [str(p if p is not None else next(values)) for p in op.attrs["parts"]]
        separators = op.attrs.get("separators") or [" " if k else "" for k in range(len(texts))]
        print("".join(s + t for s, t in zip(separators, texts)))
        return []

    def op_assert(self, op: Operation, args: list, env: dict) -> list:
        if not args[0]:
            raise InterpreterError(op.attrs.get("message") or "assertion failed")
        return []

    def op_raise_index_error(self, op: Operation, args: list, env: dict) -> list:
        index, size, ok = args
        if not ok:
            raise InterpreterError(f"index {index} out of bounds for size {size}")
        return []


def interpret(module: Module, args: Sequence[Any]) -> list[Any]:
    """Runs the module's kernel on ``args`` (arrays are updated in place)."""
    return Interpreter(module).run(module.kernel, args)

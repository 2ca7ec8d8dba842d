"""Typed views of the structured ops name their parts: loop variables, initial values,
carried values, bodies, branches."""

from __future__ import annotations

import numpy as np

import kdsl as kd
from kdsl.ir.core import Module, Operation
from kdsl.ir.interpreter import interpret
from kdsl.ir.structured import ForOp, IfOp, ParallelForOp, WhileOp, loop_inits
from kdsl.runtime.compiler import lower_and_optimize


@kd.kernel
def loops(x: kd.Array[kd.f32], out: kd.Array[kd.f32]) -> kd.f32:
    total = 0.0
    for i, j in kd.ndrange(x.shape[0], 2):
        total += x[i] * j
    s = 0.0
    for k in range(1, x.shape[0], 2):
        s += x[k]
    n = 0
    while n < 3:
        n += 1
    if s > 0.0:
        out[0] = s
    else:
        out[0] = -s
    return total + s + n


def _module() -> Module:
    x = np.arange(6, dtype=np.float32)
    params = loops.parameters((x, np.zeros(1, np.float32)))
    module, _ = lower_and_optimize(loops.py_function, params, loops.options, "frontend")
    return module


def _first(module: Module, name: str) -> Operation:
    return next(op for op in module.kernel.walk() if op.name == name)


def test_parallel_for_view() -> None:
    nest = ParallelForOp(_first(_module(), "parallel_for"))
    assert nest.ndim == 2 and len(nest.extents) == 2 and len(nest.ivs) == 2
    assert len(nest.inits) == len(nest.partials) == len(nest.results) == 1
    assert nest.ivs + nest.partials == nest.body.args
    assert loop_inits(nest.op) == nest.inits


def test_for_view() -> None:
    loop = ForOp(_first(_module(), "for"))
    assert loop.op.operands == [loop.start, loop.stop, loop.step, *loop.inits]
    assert loop.body.args == [loop.iv, *loop.carried]
    assert len(loop.inits) == len(loop.carried) == len(loop.results) >= 1


def test_while_and_if_views() -> None:
    module = _module()
    cycle = WhileOp(_first(module, "while"))
    assert cycle.before.ops[-1].name == "condition" and cycle.body.ops[-1].name == "yield"
    assert loop_inits(cycle.op) == cycle.inits == cycle.op.operands
    branch = IfOp(_first(module, "if"))
    assert branch.condition.type == kd.bool_
    assert branch.then_block.ops[-1].name == branch.else_block.ops[-1].name == "yield"
    assert loop_inits(branch.op) is None


def test_interpreter_reads_loops_through_the_views() -> None:
    x = np.linspace(-1, 2, 6).astype(np.float32)
    out, expected_out = np.zeros(1, np.float32), np.zeros(1, np.float32)
    (result,) = interpret(_module(), [x, out])
    assert np.isclose(result, loops.python(x, expected_out))
    assert out == expected_out

"""The parallel primitives in kernels (``kd.cumsum``, ``kd.sort``, ``kd.argsort``,
``kd.sort_by_key``, ``kd.searchsorted``, ``kd.segment_sum``): each call lowers to a
generated func (kdsl/primitives/), inlined like the user's funcs, so it runs in parallel
where it is called outside a parallel loop, and serially inside one."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from kdsl import types as T
from kdsl.frontend.calls import builtin
from kdsl.ir.core import Value
from kdsl.primitives.bits import bits

if TYPE_CHECKING:
    from kdsl.frontend.function import FunctionLowering


@builtin(bits)
def _bits(lo: FunctionLowering, node: ast.Call, args: list) -> Value:
    v = lo.value_of(args[0], node)
    if not isinstance(v.type, T.ScalarType) or v.type.bits not in (32, 64):
        lo.error(f"bits() takes a 4- or 8-byte scalar, got {v.type}", node)
    return lo.strong(lo.op("bitcast", v, type=T.u64 if v.type.bits == 64 else T.u32, node=node))

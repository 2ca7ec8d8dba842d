"""Floats rebuilt from the bits of a differentiated value (as ``kd.sort`` does: it sorts
floats by their bits) carry none of its derivative: differentiating through them would
silently give zero, so it is an error."""

from __future__ import annotations

from kdsl.ir.autodiff.activity import VIEW_OPS, Mark, _grow_until_stable, _loop_links, is_float
from kdsl.ir.autodiff.emitter import located_error
from kdsl.ir.autodiff.memory import array_bases
from kdsl.ir.core import Block, Value


def _bits_of_varied(body: Block, varied: set[Value]) -> set[Value]:
    """The values (and arrays) made from the bits of a varied float: the integers a
    ``bitcast`` of one gives, and everything computed from, or stored with, those."""
    bases = array_bases(body)
    tainted: set[Value] = set()

    def step(mark: Mark) -> None:
        for op in body.walk():
            if op.regions:
                for sources, targets in _loop_links(op):
                    if any(s in tainted for s in sources):
                        mark(targets, tainted)
            elif op.name == "bitcast":
                if op.operands[0] in varied or op.operands[0] in tainted:
                    mark(op.results, tainted)
            elif op.name == "array_load" or op.name in VIEW_OPS:
                if op.operands[0] in tainted:
                    mark(op.results, tainted)
            elif op.name in ("array_store", "atomic_rmw"):
                if op.operands[-1] in tainted:
                    target = op.operands[0]
                    mark([bases.get(target, target), target], tainted)
            elif any(v in tainted for v in op.operands):
                mark([r for r in op.results if not is_float(r.type)], tainted)

    _grow_until_stable(step)
    return tainted


def check_bits_round_trips(body: Block, varied: set[Value]) -> None:
    """A located error where a float is made from the bits of a differentiated value."""
    if not any(op.name == "bitcast" for op in body.walk()):
        return
    tainted = _bits_of_varied(body, varied)
    for op in body.walk():
        if op.name == "bitcast" and is_float(op.result.type) and op.operands[0] in tainted:
            raise located_error(
                "kd.sort of a differentiated array cannot be differentiated (it sorts the "
                "floats' bits); sort with kd.argsort and index the array instead",
                op.location)

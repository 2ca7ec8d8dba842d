"""A compile-time estimate of the cost of one iteration of a parallel loop's body, in
units of about one IR operation, so that compiled code can run a loop whose total work
(iterations times this cost) cannot pay for a team of threads on the calling thread."""

from __future__ import annotations

from kdsl.ir.core import Block

LOOPS = ("for", "while", "parallel_for")
# An inner loop's trip count is usually unknown when compiling: assume a long one, since
# running a loop serially that would have paid for threads costs more than the reverse.
ASSUMED_INNER_TRIPS = 64
FREE = ("constant", "yield", "condition", "array_dim")
CALL_COST = 64  # a call left after inlining: a func of unknown size
MAX_COST = 1 << 30


def body_cost(body: Block) -> int:
    """The estimated work of one run of ``body``: one per operation, an inner loop's body
    ASSUMED_INNER_TRIPS times, an ``if`` as its costlier branch, a call CALL_COST."""
    total = 0
    for op in body.ops:
        if op.name in FREE:
            continue
        regions = [body_cost(r) for r in op.regions]
        if op.name == "call":
            total += CALL_COST
        elif op.name in LOOPS:
            total += 1 + ASSUMED_INNER_TRIPS * sum(regions)
        elif regions:
            total += 1 + max(regions)
        else:
            total += 1
    return max(1, min(total, MAX_COST))


def has_inner_loop(body: Block) -> bool:
    return any(op.name in LOOPS for op in body.walk())

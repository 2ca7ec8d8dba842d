"""A kernel's LLVM module cut into parts that LLVM optimises and compiles on threads of
their own (it spends most of a compile in code generation for the parallel regions, one
function each), then linked into one shared library.

Part 0 holds the entry point and its init function; each part holds some of the regions.
A region another part calls is declared there, with hidden visibility (a symbol of the
library, not exported from it). Everything else (the runtime's helpers, the hook
globals, constants) is copied into each part, private to it: each part has an init
function of its own that fills in its copy of the hooks, which part 0's init calls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import overload

from llvmlite import ir

from kdsl.codegen.abi import HOOK_ORDER
from kdsl.codegen.runtime_hooks import RuntimeHooks

REGION_NAME = re.compile(r".+\.parallel\.\d+")  # codegen.parallel's region functions
# LLVM's time per instruction of a region (loops it vectorises and interleaves) against
# that of the straight-line code around them, and of a function it does not optimise
REGION_COST = 4.0
UNOPTIMISED_COST = 0.2
# a module that costs less compiles about as fast on one thread (the parts' fixed costs:
# a context and a target machine each, the runtime's helpers copied into each)
MIN_COST = 600
# the cheapest part's least share of the cost: the entry, its init and the team runtime
# alone (about a fifth of an n-body kernel's LLVM time, measured) are worth a thread
MIN_SHARE = 0.1


def instruction_count(fn: ir.Function) -> int:
    return sum(len(block.instructions) for block in fn.blocks)


def _successors(block: ir.Block) -> list[ir.Block]:
    term = block.terminator
    if term is None:
        return []
    targets = [op for op in term.operands if isinstance(op, ir.Block)]
    targets += [target for _, target in getattr(term, "cases", [])]  # a switch
    targets += list(getattr(term, "destinations", []))  # an indirect branch
    default = getattr(term, "default", None)
    if isinstance(default, ir.Block):
        targets.append(default)
    return targets


def has_loop(fn: ir.Function) -> bool:
    """Whether a function's control flow has a cycle (a branch back to a block on the path
    from the entry to it)."""
    if not fn.blocks:
        return False
    on_path: set[int] = set()
    done: set[int] = set()
    stack: list[tuple[ir.Block, list[ir.Block]]] = [(fn.blocks[0], _successors(fn.blocks[0]))]
    on_path.add(id(fn.blocks[0]))
    while stack:
        block, pending = stack[-1]
        if not pending:
            stack.pop()
            on_path.discard(id(block))
            done.add(id(block))
            continue
        target = pending.pop()
        if id(target) in on_path:
            return True
        if id(target) not in done:
            on_path.add(id(target))
            stack.append((target, _successors(target)))
    return False


def compile_cost(fn: ir.Function) -> float:
    """An estimate of LLVM's time for a function, in units of straight-line instructions."""
    if REGION_NAME.fullmatch(fn.name):
        return REGION_COST * instruction_count(fn)
    if "optnone" in fn.attributes:
        return UNOPTIMISED_COST * instruction_count(fn)
    return float(instruction_count(fn))


def plan_parts(module: ir.Module, parts: int) -> list[list[ir.Function]] | None:
    """The regions of each part (part 0 also holds everything else), or None where
    splitting would not pay.

    Where everything else has no loop, LLVM compiles part 0 in a fraction of a region's
    time (see ``light_parts``): the regions are then spread over parts of their own, one
    for each core where each has its share, and part 0, which holds none, is compiled
    alongside them."""
    defined = [f for f in module.functions if f.blocks]
    regions = [f for f in defined if REGION_NAME.fullmatch(f.name) and f.linkage == "internal"]
    total = sum(compile_cost(f) for f in defined)
    if parts < 2 or not regions or total < MIN_COST:
        return None
    rest = [f for f in defined if f not in regions and "optnone" not in f.attributes]
    if not any(has_loop(f) for f in rest):
        for workers in range(min(parts, len(regions)), 1, -1):
            spread, costs = _spread(regions, [0.0] * workers)
            if min(costs) >= MIN_SHARE * total:
                return [[], *spread]
        return [[], regions]
    plan, costs = _spread(regions, [total - sum(compile_cost(f) for f in regions)]
                          + [0.0] * (parts - 1))
    if min(costs) < MIN_SHARE * total:
        return None
    return plan


def _spread(regions: list[ir.Function],
            costs: list[float]) -> tuple[list[list[ir.Function]], list[float]]:
    """The regions given to parts that cost ``costs`` so far, the costliest first, each to
    the cheapest part then; and what the parts cost with them."""
    costs = list(costs)
    plan: list[list[ir.Function]] = [[] for _ in costs]
    for region in sorted(regions, key=compile_cost, reverse=True):
        cheapest = costs.index(min(costs))
        plan[cheapest].append(region)
        costs[cheapest] += compile_cost(region)
    return plan, costs


class PartTexts(Sequence[str]):
    """The LLVM IR text of each part, rendered when first read (the parts' threads start
    one by one as their texts are ready: the cost of rendering the others is off their
    path). Renders from the module as it is then: nothing may change it meanwhile."""

    def __init__(self, module: ir.Module, owner: dict[int, int], size: int,
                 light: frozenset[int] = frozenset()) -> None:
        self.module = module
        self.owner = owner  # id of a function -> the part that defines it; others: every part
        self.size = size
        self.light = light  # the parts with no loop (see cpu.compile_parts)
        self.texts: dict[int, str] = {}

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, k: int) -> str: ...

    @overload
    def __getitem__(self, k: slice) -> list[str]: ...

    def __getitem__(self, k: int | slice) -> str | list[str]:
        if isinstance(k, slice):
            return [self[j] for j in range(self.size)[k]]
        if not -self.size <= k < self.size:
            raise IndexError(k)
        k %= self.size
        if k not in self.texts:
            self.texts[k] = self._render(k)
        return self.texts[k]

    def _render(self, k: int) -> str:
        elsewhere = [f for f in self.module.functions if self.owner.get(id(f), k) != k]
        saved = [(f, f.blocks) for f in elsewhere]
        for f in elsewhere:
            f.blocks = []  # declared, not defined
        try:
            return str(self.module)
        finally:
            for f, blocks in saved:
                f.blocks = blocks


def render_parts(module: ir.Module, entry: str, init: str,
                 plan: list[list[ir.Function]]) -> PartTexts:
    """The LLVM IR text of each part of ``plan`` (see plan_parts)."""
    hooks = RuntimeHooks(module, {name: module.get_global(f"kdsl.hook.{name}")
                                  for name in HOOK_ORDER})
    part_inits = []
    for k in range(1, len(plan)):
        hooks.emit_init(f"{init}.{k}")
        part_inits.append(module.get_global(f"{init}.{k}"))
    main_init = module.get_global(init)
    builder = ir.IRBuilder(main_init.blocks[-1])
    builder.position_before(main_init.blocks[-1].terminator)
    for part_init in part_inits:
        part_init.linkage = "hidden"
        builder.call(part_init, [main_init.args[0]])
    regions = [f for part in plan for f in part]
    for f in regions:  # one part defines it, the others call it
        f.linkage = "hidden"
    owned = {id(f): 0 for f in (module.get_global(entry), main_init)}
    owned.update({id(f): k for k, part in enumerate(plan) for f in part})
    owned.update({id(f): k + 1 for k, f in enumerate(part_inits)})
    return PartTexts(module, owned, len(plan), light_parts(module, plan, owned))


def light_parts(module: ir.Module, plan: list[list[ir.Function]],
                owned: dict[int, int]) -> frozenset[int]:
    """The parts that hold no parallel region and whose functions have no loop (besides
    those LLVM leaves unoptimised): code that runs once per call, the entry's argument
    checks and its calls of the regions, which LLVM need not optimise fully."""
    light = set()
    for k, regions in enumerate(plan):
        defined = [f for f in module.functions
                   if f.blocks and owned.get(id(f), k) == k and "optnone" not in f.attributes]
        if not regions and not any(has_loop(f) for f in defined):
            light.add(k)
    return frozenset(light)

"""The optimisation pipeline: an explicit, named list of passes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kdsl.ir.core import Module
from kdsl.ir.passes import (
    bounds_checks,
    cse,
    dead_code,
    demote_atomics,
    differentiate,
    drop_index_wraps,
    free_temporaries,
    fuse_parallel_loops,
    inline_funcs,
    lower_tensors,
    share_reciprocals,
    simplify,
    speculate_loads,
    split_excluded_index,
)


@dataclass(frozen=True)
class PassOptions:
    debug: bool = False
    fastmath: bool = True
    gradient: tuple[int, ...] | None = None  # differentiate w.r.t. these arguments
    vjp: bool = False  # as a vector-Jacobian product (kdsl/ir/autodiff/vjp.py)
    tangent: tuple[int, ...] | None = None  # forward mode (kdsl/ir/autodiff/forward.py)
    target: str = "cpu"  # "cpu" or "cuda": the code the IR becomes


def always(options: PassOptions) -> bool:
    return True


def in_debug(options: PassOptions) -> bool:
    return options.debug


@dataclass(frozen=True)
class Pass:
    """A named transformation of a module, in place, run when ``when`` holds for the
    options."""

    name: str
    run: Callable[[Module, PassOptions], None]
    when: Callable[[PassOptions], bool] = always


PIPELINE: tuple[Pass, ...] = (
    Pass("inline", inline_funcs.run),
    Pass("drop-index-wraps", drop_index_wraps.run),
    Pass("autodiff", differentiate.run),
    Pass("lower-tensors", lower_tensors.run),
    # before anything can delete an access whose value is unused: its check stays
    Pass("bounds-checks", bounds_checks.run, when=in_debug),
    Pass("simplify", simplify.run),
    Pass("share-reciprocals", share_reciprocals.run),
    Pass("cse", cse.run),
    Pass("dce", dead_code.run),
    Pass("fuse-loops", fuse_parallel_loops.run),
    Pass("demote-atomics", demote_atomics.run),
    Pass("speculate-loads", speculate_loads.run),
    Pass("split-excluded-index", split_excluded_index.run),
    Pass("cse-late", cse.run),
    Pass("simplify-late", simplify.run),
    Pass("dce-late", dead_code.run),
    Pass("free-temporaries", free_temporaries.run),
)

STAGES = ("frontend",) + tuple(p.name for p in PIPELINE) + ("optimized",)


def run_pipeline(
    module: Module,
    options: PassOptions,
    stop_after: str | None = None,
    verify: bool = False,
) -> Module:
    """Runs the passes in order; ``stop_after`` names the last stage to run."""
    from kdsl.ir.verifier import verify_module

    if stop_after == "frontend":
        return module
    for p in PIPELINE:
        if not p.when(options):
            continue
        p.run(module, options)
        if verify:
            verify_module(module, context=f"after {p.name}")
        if stop_after == p.name:
            break
    return module

"""The optimisation pipeline: an explicit, named list of passes."""

from __future__ import annotations

from collections.abc import Callable

from kdsl.ir.autodiff.tensor_activity import TENSOR_OPS, is_stop_gradient
from kdsl.ir.core import Function, Module
from kdsl.ir.passes import (
    cse,
    dead_code,
    demote_atomics,
    drop_index_wraps,
    free_temporaries,
    fuse_parallel_loops,
    inline_funcs,
    share_reciprocals,
    simplify,
    speculate_loads,
    split_excluded_index,
)
from kdsl.records import dataclass


@dataclass(frozen=True)
class PassOptions:
    debug: bool = False
    fastmath: bool = True
    gradient: tuple[int, ...] | None = None  # differentiate w.r.t. these arguments
    vjp: bool = False  # as a vector-Jacobian product (kdsl/ir/autodiff/vjp.py)
    tangent: tuple[int, ...] | None = None  # forward mode (kdsl/ir/autodiff/forward.py)
    unit_axes: tuple[tuple[int, tuple[int, ...]], ...] = ()  # BuildOptions.unit_axes
    gradient_of_loops: bool = False  # BuildOptions.gradient_of_loops
    target: str = "cpu"  # "cpu" or "cuda": the code the IR becomes


def always(options: PassOptions) -> bool:
    return True


def in_debug(options: PassOptions) -> bool:
    return options.debug


def forward_mode(options: PassOptions) -> bool:
    return options.tangent is not None


@dataclass(frozen=True)
class ModulePass:
    """A named transformation of a whole module, in place (inlining and differentiation
    change which functions there are), run when ``when`` holds for the options."""

    name: str
    run: Callable[[Module, PassOptions], None]
    when: Callable[[PassOptions], bool] = always

    def apply(self, module: Module, options: PassOptions) -> None:
        self.run(module, options)


@dataclass(frozen=True)
class FunctionPass:
    """A named transformation of one function, in place, run over every function of the
    module (the kernel and the funcs still called) when ``when`` holds for the options."""

    name: str
    run: Callable[[Function, PassOptions], None]
    when: Callable[[PassOptions], bool] = always

    def apply(self, module: Module, options: PassOptions) -> None:
        for function in module.functions:
            self.run(function, options)


Pass = ModulePass | FunctionPass


# The passes most kernels do not need (differentiation, the lowering of whole-array
# statements, debug-mode checks) are imported where a kernel needs them: a first compile
# of a kernel of loops loads none of them.

def differentiate(module: Module, options: PassOptions) -> None:
    if options.gradient is None and not any(
            is_stop_gradient(op) for op in module.kernel.body.walk()):
        return  # nothing to differentiate, no kd.stop_gradient to remove
    from kdsl.ir.passes import differentiate as differentiation

    differentiation.run(module, options)


def differentiate_forward(module: Module, options: PassOptions) -> None:
    from kdsl.ir.passes import differentiate as differentiation

    differentiation.run_forward(module, options)


def lower_tensors(function: Function, options: PassOptions) -> None:
    if any(op.name in TENSOR_OPS for op in function.walk()):
        from kdsl.ir.passes import lower_tensors as lowering

        lowering.run(function, options)


def bounds_checks(function: Function, options: PassOptions) -> None:
    from kdsl.ir.passes import bounds_checks as checks

    checks.run(function, options)


PIPELINE: tuple[Pass, ...] = (
    ModulePass("inline", inline_funcs.run),
    FunctionPass("drop-index-wraps", drop_index_wraps.run),
    ModulePass("autodiff", differentiate),
    FunctionPass("lower-tensors", lower_tensors),
    ModulePass("forward-mode", differentiate_forward, when=forward_mode),
    # before anything can delete an access whose value is unused: its check stays
    FunctionPass("bounds-checks", bounds_checks, when=in_debug),
    FunctionPass("simplify", simplify.run),
    FunctionPass("share-reciprocals", share_reciprocals.run),
    FunctionPass("cse", cse.run),
    FunctionPass("dce", dead_code.run),
    FunctionPass("fuse-loops", fuse_parallel_loops.run),
    FunctionPass("demote-atomics", demote_atomics.run),
    FunctionPass("speculate-loads", speculate_loads.run),
    FunctionPass("split-excluded-index", split_excluded_index.run),
    FunctionPass("cse-late", cse.run),
    FunctionPass("simplify-late", simplify.run),
    FunctionPass("dce-late", dead_code.run),
    FunctionPass("free-temporaries", free_temporaries.run),
)

STAGES = ("frontend",) + tuple(p.name for p in PIPELINE) + ("optimized",)


def run_pipeline(
    module: Module,
    options: PassOptions,
    stop_after: str | None = None,
    verify: bool = False,
) -> Module:
    """Runs the passes in order; ``stop_after`` names the last stage to run."""
    if stop_after == "frontend":
        return module
    for p in PIPELINE:
        if not p.when(options):
            continue
        p.apply(module, options)
        if verify:
            from kdsl.ir.verifier import verify_module

            verify_module(module, context=f"after {p.name}")
        if stop_after == p.name:
            break
    return module


def run_passes(module: Module, names: list[str], options: PassOptions | None = None) -> Module:
    """Runs the named passes of the pipeline, in the order given (for tests that start from
    IR text, and for inspecting one pass at a time)."""
    by_name = {p.name: p for p in PIPELINE}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown pass(es) {unknown}; the pipeline has {sorted(by_name)}")
    for name in names:
        by_name[name].apply(module, options or PassOptions())
    return module


"""Loops and integer arithmetic for the matrix-product routines, emitted as LLVM IR."""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from kdsl.codegen.llvm_types import i64


def const(v: int) -> ir.Constant:
    return ir.Constant(i64, v)


def loop(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: ir.Value | int,
          body: Callable[[ir.Value], None], name: str = "loop") -> None:
    """``for iv in range(start, stop, step): body(iv)`` (positive step)."""
    if isinstance(step, int):
        step = const(step)
    fn = b.function
    pre = b.block
    header = fn.append_basic_block(f"{name}.header")
    body_bb = fn.append_basic_block(f"{name}.body")
    exit_bb = fn.append_basic_block(f"{name}.end")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(i64)
    iv.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", iv, stop), body_bb, exit_bb)
    b.position_at_end(body_bb)
    body(iv)
    iv.add_incoming(b.add(iv, step, flags=["nsw"]), b.block)
    b.branch(header)
    b.position_at_end(exit_bb)


def smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def smax(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def ceil_div(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.sdiv(b.add(x, b.sub(y, const(1))), y)


def round_up(b: ir.IRBuilder, x: ir.Value, multiple: int) -> ir.Value:
    return b.mul(ceil_div(b, x, const(multiple)), const(multiple))

"""Random differentiable whole-array programs (elementwise math, broadcasting of a row, a
column and a scalar, reductions with axis and keepdims, views, views of views of results,
matrix products, ``kd.where``, temporaries written by slice and augmented assignment,
elements of results and of their views read in a loop) against float64 central differences of the compiled kernel itself, and forward
mode against reverse mode.

``HYPOTHESIS_PROFILE=explore KDSL_FUZZ_EXAMPLES=300`` draws that many new programs."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kdsl_cpu_util import kernel_from_source

import kdsl as kd

# every expression is a (3, 4) array; a is (3, 4), b a row (4,), c a column (3, 1),
# m (4, 4), w a scalar; the gradient is taken with respect to all of them
LEAVES = ["a", "a", "b * a", "(c - a)", "a[::-1, :]", "a[:, ::-1] * w", "(a.T).T",
          "(b[None, :] + c)", "(w + 0.0 * a)"]
UNARY = ["kd.tanh({x})", "kd.sin({x})", "({x}) / (1.0 + ({x}) * ({x}))",
         "kd.sqrt(({x}) * ({x}) + 0.5)", "kd.exp(-({x}) * ({x}))", "kd.abs({x})",
         "kd.max({x}, 0.2)", "({x}) ** 2", "kd.log(1.5 + kd.cos({x}))", "-({x})",
         "(({x}).T[::-1, :]).T"]
BINARY = ["({l} + {r})", "({l} - {r})", "({l} * {r})", "({l} / (1.5 + kd.sin({r})))",
          "kd.where({l} > {r}, {l}, 0.5 * {r})", "kd.min({l}, {r})", "kd.hypot({l}, {r})"]
REDUCED = ["kd.sum({x}, axis=0, keepdims=True) * {y}", "kd.mean({x}, axis=1, keepdims=True) + {y}",
           "kd.max({x}, axis=0)[None, :] * {y}", "kd.min({x}, axis=1)[:, None] - {y}",
           "({x}) @ m * 0.25", "(({x}) @ ({y}).T) @ ({x}) * 0.1", "kd.sum({x}) * 0.1 + {y}",
           "kd.sum(({x})[1:, :], axis=0, keepdims=True) - {y}", "({x}) * m[1:, :][:3, :]"]


@st.composite
def expressions(draw: Any, names: list[str], depth: int) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(LEAVES + names))
    form = draw(st.sampled_from(["unary", "binary", "reduced"]))
    x = draw(expressions(names, depth - 1))
    if form == "unary":
        return draw(st.sampled_from(UNARY)).format(x=x)
    y = draw(expressions(names, depth - 1))
    table = BINARY if form == "binary" else REDUCED
    # y in parentheses: "p * {y}" of y = "q @ r" is not (p * q) @ r
    return draw(st.sampled_from(table)).format(l=x, r=y, x=x, y=f"({y})")


@st.composite
def statements(draw: Any) -> list[str]:
    lines: list[str] = []
    names: list[str] = []
    for k in range(draw(st.integers(1, 3))):
        name = f"t{k}"
        kind = draw(st.sampled_from(["assign", "temporary", "augmented", "elements",
                                     "view elements"]))
        value = draw(expressions(names, 2))
        if kind == "assign":
            lines.append(f"    {name} = {value}")
        elif kind == "temporary":
            lines += [f"    {name} = kd.zeros_like(a)",
                      f"    {name}[1:, :] = ({value})[1:, :]",
                      f"    {name}[0] = kd.sin(a[0]) * b"]
        elif kind == "augmented":
            lines += [f"    {name} = kd.zeros_like(a)",
                      f"    {name}[...] = {draw(expressions(names, 1))}",
                      f"    {name} += {value}",
                      f"    {name} *= 0.5"]
        elif kind == "view elements":
            lines += [f"    {name} = {value}",
                      f"    u = {name}.T[::-1, :]",
                      "    s = 0.0",
                      "    for i in range(3):",
                      "        s += u[(i + 1) % 4, i] * u[0, i]",
                      f"    {name} = {name} + s"]
        else:
            lines += [f"    {name} = {value}",
                      "    s = 0.0",
                      "    for i in range(3):",
                      f"        s += {name}[i, (i + 1) % 4] * {name}[i, 0]",
                      f"    {name} = {name} + s"]
        names.append(name)
    last = names[-1]
    loss = draw(st.sampled_from([f"kd.sum({last} * {last})", f"kd.mean(kd.sin({last}))",
                                 f"kd.max(kd.sum({last}, axis=1))", f"kd.sum({last} * a) * w"]))
    return [*lines, f"    return {loss}"]


@st.composite
def programs(draw: Any) -> str:
    return "\n".join([
        "@kd.kernel",
        "def k(a: kd.Array[kd.f64, 2], b: kd.Array[kd.f64], c: kd.Array[kd.f64, 2],",
        "      m: kd.Array[kd.f64, 2], w: kd.f64) -> kd.f64:",
        *draw(statements()),
    ]) + "\n"


def central_differences(kernel: Any, varied: list[Any], args: list[Any],
                        positions: tuple[int, ...], eps: float = 1e-6) -> list[Any]:
    out: list[Any] = []
    for k, arg in zip(positions, varied):
        if isinstance(arg, float):
            hi, lo = list(args), list(args)
            hi[k], lo[k] = arg + eps, arg - eps
            out.append((kernel(*hi) - kernel(*lo)) / (2 * eps))
            continue
        numeric = np.zeros_like(arg)
        for index in range(arg.size):
            hi, lo = list(args), list(args)
            hi[k], lo[k] = arg.copy(), arg.copy()
            hi[k].reshape(-1)[index] += eps
            lo[k].reshape(-1)[index] -= eps
            numeric.reshape(-1)[index] = (kernel(*hi) - kernel(*lo)) / (2 * eps)
        out.append(numeric)
    return out


@settings(max_examples=int(os.environ.get("KDSL_FUZZ_EXAMPLES", "3")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_tensor_programs_against_central_differences(src: str, seed: int) -> None:
    kernel = kernel_from_source(src, prefix="tensor_grad_program")
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-1.0, 1.0, (3, 4)), rng.uniform(-1.0, 1.0, 4),
            rng.uniform(-1.0, 1.0, (3, 1)), rng.uniform(-1.0, 1.0, (4, 4)),
            float(rng.uniform(0.2, 1.2))]
    value = kernel(*args)
    assert np.isclose(value, kernel.python(*args), rtol=1e-9, atol=1e-12), src
    varied = (0, 1, 2, 3, 4)  # the column c's size-1 axis is known only at run time
    analytic = kd.grad(kernel, varied)(*args)
    numeric = central_differences(kernel, [args[k] for k in varied], args, varied)
    for position, (computed, expected) in zip(varied, zip(analytic, numeric)):
        computed, expected = np.asarray(computed), np.asarray(expected)
        assert computed.shape == expected.shape, src
        bad = np.abs(computed - expected) > 1e-5 + 1e-4 * np.abs(expected)
        jumps = np.abs(expected) > 1e3  # a difference across a kink or a branch
        assert not np.any(bad & ~jumps), (
            f"{src}\nargument {position}\nanalytic {computed}\nnumeric {expected}")
    directions = [(rng.standard_normal(np.shape(x)) if isinstance(x, np.ndarray) else 1.0)
                  if k in varied else None for k, x in enumerate(args)]
    _, tangent = kd.jvp(kernel, args, directions)
    along = sum(float(np.sum(g * directions[k])) for g, k in zip(analytic, varied))
    assert np.isclose(tangent, along, rtol=1e-8, atol=1e-10), src

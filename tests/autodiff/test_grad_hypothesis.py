"""Random differentiable kernels (serial loops with carried values, branches, while
loops with break, parallel sum/min/max reductions, vectors, an array updated in place)
against float64 central differences of the compiled kernel itself."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kdsl_cpu_util import kernel_from_source

import kdsl as kd

SQUASH = ["kd.tanh({})", "kd.sin({})", "({0}) / (1.0 + ({0}) * ({0}))", "kd.sqrt(({0}) * ({0}) + 0.5)"]


@st.composite
def expressions(draw: Any, names: list[str], depth: int = 2) -> str:
    leaves = [*names, "w", "x[(j * 3 + 1) % n]", "x[j % n]", "0.75"]
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(leaves))
    a = draw(expressions(names, depth - 1))
    b = draw(expressions(names, depth - 1))
    form = draw(st.sampled_from(["({} + {})", "({} - {})", "({} * {})", "SQUASH", "MINMAX"]))
    if form == "SQUASH":
        return draw(st.sampled_from(SQUASH)).format(a)
    if form == "MINMAX":
        return f"{draw(st.sampled_from(['min', 'max']))}({a}, {b} + 0.3)"
    return form.format(a, b)


@st.composite
def statements(draw: Any, names: list[str], indent: str, depth: int) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["assign", "assign", "for", "if", "while", "prange", "vector",
                                     "in_place"] if depth > 0 else ["assign", "in_place"]))
        target = draw(st.sampled_from(names))
        squash = draw(st.sampled_from(SQUASH))
        if kind == "assign":
            lines.append(f"{indent}{target} = " + squash.format(draw(expressions(names))))
        elif kind == "for":
            lines.append(f"{indent}for j in range(j, j + {draw(st.integers(0, 4))}):")
            lines += draw(statements(names, indent + "    ", depth - 1))
        elif kind == "if":
            lines.append(f"{indent}if {draw(expressions(names, 1))} > 0.1:")
            lines += draw(statements(names, indent + "    ", depth - 1))
            lines.append(f"{indent}else:")
            lines += draw(statements(names, indent + "    ", depth - 1))
        elif kind == "while":
            lines.append(f"{indent}count = 0")
            lines.append(f"{indent}while {target} < 0.9 and count < {draw(st.integers(1, 6))}:")
            lines.append(f"{indent}    count += 1")
            lines += draw(statements(names, indent + "    ", depth - 1))
            lines.append(f"{indent}    {target} = {target} + 0.25")
            lines.append(f"{indent}    if {draw(expressions(names, 1))} > 0.8:")
            lines.append(f"{indent}        break")
        elif kind == "prange":
            reduce = draw(st.sampled_from(["sum", "min", "max"]))
            element = squash.format(draw(expressions(["x[i]", *names], 1)).replace("[j", "[i"))
            lines.append(f"{indent}r = {'0.0' if reduce == 'sum' else '2.0' if reduce == 'min' else '-2.0'}")
            lines.append(f"{indent}for i in kd.prange(n):")
            if reduce == "sum":
                lines.append(f"{indent}    r += {element}")
            else:
                lines.append(f"{indent}    r = {reduce}(r, {element})")
            lines.append(f"{indent}{target} = kd.tanh({target} + r)")
        elif kind == "in_place":  # the array t is updated in place and read back
            update = squash.format(f"t[i] * {draw(expressions(names, 1))} + x[i]")
            lines.append(f"{indent}for i in kd.prange(n):")
            lines.append(f"{indent}    t[i] = {update}")
            lines.append(f"{indent}{target} = kd.tanh({target} + t[j % n] * t[(j + 2) % n])")
        else:
            a, b, c = (draw(expressions(names, 1)) for _ in range(3))
            lines.append(f"{indent}v = kd.vec3d({a}, {b}, {c})")
            lines.append(f"{indent}u = kd.cross(v, kd.vec3d(w, 0.5, {target}))")
            lines.append(f"{indent}{target} = kd.tanh(kd.dot(u, v) + kd.length(u) * v.y)")
    return lines


@st.composite
def programs(draw: Any) -> str:
    names = ["a", "b"]
    body = draw(statements(names, "    ", 2))
    return "\n".join([
        "@kd.kernel",
        "def k(x: kd.Array[kd.f64], w: kd.f64) -> kd.f64:",
        "    n = x.shape[0]",
        "    j = 0",
        "    a = x[0] * w",
        "    b = x[1] + 0.5",
        "    t = kd.zeros(n, dtype=kd.f64)",
        "    for i in range(n):",
        "        t[i] = x[i] * 0.5",
        *body,
        "    return a * 1.5 + b * b",
    ]) + "\n"


def central_differences(kernel: Any, x: np.ndarray, w: float, eps: float = 1e-6) -> np.ndarray:
    out = np.zeros(x.size + 1)
    for k in range(x.size + 1):
        hi_x, lo_x, hi_w, lo_w = x.copy(), x.copy(), w, w
        if k < x.size:
            hi_x[k] += eps
            lo_x[k] -= eps
        else:
            hi_w, lo_w = w + eps, w - eps
        out[k] = (kernel(hi_x, hi_w) - kernel(lo_x, lo_w)) / (2 * eps)
    return out


@settings(max_examples=int(os.environ.get("KDSL_FUZZ_EXAMPLES", "8")), deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_kernels_against_central_differences(src: str, seed: int) -> None:
    kernel = kernel_from_source(src, prefix="grad_program")
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=5)
    w = float(rng.uniform(0.2, 1.2))
    gx, gw = kd.grad(kernel, (0, 1))(x, w)
    numeric = central_differences(kernel, x, w)
    analytic = np.append(gx, gw)
    bad = np.abs(analytic - numeric) > 1e-4 + 1e-4 * np.abs(numeric)
    # a finite difference that straddles a branch or a loop exit is not a derivative
    jumps = np.abs(numeric) > 1e3
    assert not np.any(bad & ~jumps), f"{src}\nanalytic {analytic}\nnumeric {numeric}"

"""Random sequences of recorded kernel calls under ``kd.Tape``: whole-array and
hand-written in-place updates, a (1, m) row broadcast, scalars a call returned passed to
later calls, arrays a call returned, arrays overwritten before they are read, the same
array as input and output of a whole-array assignment, each call
repeated up to four times in a row (recorded as the one before it), with and without
checkpoints; the gradients of the initial values against float64 central differences of
the same calls run outside the tape.

``HYPOTHESIS_PROFILE=explore KDSL_FUZZ_EXAMPLES=300`` draws that many new sequences."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kdsl as kd

Array2 = kd.Array[kd.f64, 2]


@kd.kernel
def whole_array_drift(x: Array2, y: Array2, dt: kd.f64):
    x += dt * kd.sin(y) * x


@kd.kernel
def leapfrog(x: Array2, v: Array2, dt: kd.f64):
    for i, j in kd.ndrange(x.shape[0], x.shape[1]):
        v[i, j] += dt * kd.cos(x[i, j])
        x[i, j] += dt * v[i, j]


@kd.kernel
def biased(y: Array2, r: Array2, out: Array2):
    out[:] = kd.tanh(y + r)  # r: (1, m)


@kd.kernel
def feedback(x: Array2, out: Array2, dt: kd.f64):
    x += dt * kd.sin(out)


@kd.kernel
def energy(y: Array2) -> kd.f64:
    return kd.sum(y * y) * 0.1


@kd.kernel
def scale(x: Array2, e: kd.f64, dt: kd.f64):
    for i, j in kd.ndrange(x.shape[0], x.shape[1]):
        x[i, j] *= 1.0 + dt * kd.sin(e)


@kd.kernel
def made(x: Array2, r: Array2):
    return kd.tanh(x * r)  # a new array


@kd.kernel
def absorb(y: Array2, t: Array2, dt: kd.f64):
    y += dt * t * t


@kd.kernel
def overwrite(out: Array2, x: Array2):
    for i, j in kd.ndrange(out.shape[0], out.shape[1]):
        out[i, j] = x[i, j] * x[i, j]


@kd.kernel
def consume(y: Array2, out: Array2, dt: kd.f64):
    for i, j in kd.ndrange(y.shape[0], y.shape[1]):
        y[i, j] += dt * kd.sin(out[i, j])


@kd.kernel
def mixed_into(src: Array2, y: Array2, out: Array2, dt: kd.f64):
    out[:] = src + dt * kd.tanh(src * y)  # called with out the same array as src


@kd.kernel
def total(x: Array2, y: Array2, out: Array2) -> kd.f64:
    return kd.sum(x * x) + kd.sum(kd.sin(y)) + kd.mean(out * x)


@kd.kernel
def total_into(x: Array2, y: Array2, loss: kd.Array[kd.f64]):
    s = 0.0
    for i, j in kd.ndrange(x.shape[0], x.shape[1]):
        s += x[i, j] * y[i, j] + kd.cos(x[i, j])
    loss[0] = s


def step(name: str, state: dict[str, Any], dt: float) -> None:
    """One call (two for the pairs) of the sequence, on the arrays of ``state``."""
    x, y, r, v, out = (state[k] for k in ("x", "y", "r", "v", "out"))
    if name == "drift":
        whole_array_drift(x, y, dt)
    elif name == "leapfrog":
        leapfrog(x, v, dt)
    elif name == "biased":
        biased(y, r, out)
        feedback(x, out, dt)
    elif name == "scalar":
        scale(x, energy(y), dt)  # a TapeScalar under the tape
    elif name == "returned":
        absorb(y, made(x, r), dt)
    elif name == "overwritten":
        overwrite(out, x)
        consume(y, out, dt)
    elif name == "aliased":
        mixed_into(x, y, x, dt)


STEPS = ["drift", "leapfrog", "biased", "scalar", "returned", "overwritten", "aliased"]


def run(steps: list[tuple[str, int, float]], state: dict[str, Any], into: bool) -> Any:
    for name, times, dt in steps:
        for _ in range(times):
            step(name, state, dt)
    if into:
        total_into(state["x"], state["y"], state["loss"])
        return state["loss"]
    return total(state["x"], state["y"], state["out"])


def fresh_state(x: np.ndarray, y: np.ndarray, r: np.ndarray,
                wrap: Callable[[np.ndarray], Any]) -> dict[str, Any]:
    return {"x": x, "y": y, "r": r, "v": wrap(np.full((3, 4), 0.1)),
            "out": wrap(np.zeros((3, 4))), "loss": wrap(np.zeros(1))}


def plain_loss(steps: list[tuple[str, int, float]], into: bool,
               x: np.ndarray, y: np.ndarray, r: np.ndarray) -> float:
    state = fresh_state(x.copy(), y.copy(), r.copy(), np.array)
    result = run(steps, state, into)
    return float(result[0]) if into else float(result)


def central_differences(loss: Callable[..., float], args: list[np.ndarray], k: int,
                        eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(args[k])
    for index in np.ndindex(args[k].shape):
        hi, lo = [a.copy() for a in args], [a.copy() for a in args]
        hi[k][index] += eps
        lo[k][index] -= eps
        grad[index] = (loss(*hi) - loss(*lo)) / (2 * eps)
    return grad


sequences = st.lists(st.tuples(st.sampled_from(STEPS), st.integers(1, 4),
                               st.floats(0.05, 0.3)), min_size=1, max_size=5)


@settings(max_examples=int(os.environ.get("KDSL_FUZZ_EXAMPLES", "3")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(sequences, st.booleans(), st.sampled_from([None, 1, 3]),
       st.sampled_from(["numpy", "kdsl"]), st.integers(0, 2**32 - 1))
def test_random_call_sequences_against_central_differences(
        steps: list[tuple[str, int, float]], into: bool, checkpoint_every: int | None,
        plain_arrays: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x0, y0 = rng.uniform(-1.0, 1.0, (3, 4)), rng.uniform(-1.0, 1.0, (3, 4))
    r0 = rng.uniform(-1.0, 1.0, (1, 4))
    leaves = [kd.array(a, requires_grad=True) for a in (x0, y0, r0)]
    wrap = np.array if plain_arrays == "numpy" else kd.array
    state = fresh_state(*leaves, wrap)
    with kd.Tape(checkpoint_every=checkpoint_every) as tape:
        loss = run(steps, state, into)
    final = [a.numpy().copy() for a in leaves]
    tape.backward(loss)
    for a, kept in zip(leaves, final):  # the way back runs on copies
        np.testing.assert_array_equal(a.numpy(), kept)
    value = float(np.asarray(getattr(loss, "numpy", lambda: loss)()).reshape(-1)[0])
    assert np.isclose(value, plain_loss(steps, into, x0, y0, r0), rtol=1e-12)
    for k, (name, leaf) in enumerate(zip("xyr", leaves)):
        expected = central_differences(lambda *a: plain_loss(steps, into, *a), [x0, y0, r0], k)
        got = np.zeros_like(expected) if leaf.grad is None else leaf.grad.numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7,
                                   err_msg=f"d loss / d {name} of {steps}, into={into}, "
                                           f"checkpoint_every={checkpoint_every}")

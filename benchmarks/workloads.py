"""One function per benchmark: build inputs, run every side once (the warm-up, which also
compiles), check kdsl against NumPy and Numba, then time each side. Each returns rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property, partial
from pathlib import Path

import kernels_kdsl as kdk
import kernels_numba as nbk
import kernels_numpy as npk
import numpy as np
from data import LJ_CUTOFF, lattice_positions, normal, rng, uniform
from harness import Config, Row, Timed, agree, best_of

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class CopyBandwidth:
    """Bytes/s of a large copy (read + write counted) at the stream size."""

    numpy: float  # np.copyto, one thread
    numba: float  # a prange copy loop, all threads

    @property
    def best(self) -> float:
        return max(self.numpy, self.numba)


class Context:
    """The configuration plus machine facts measured once per run, when first needed."""

    def __init__(self, config: Config) -> None:
        self.config = config

    @cached_property
    def copy_bandwidth(self) -> CopyBandwidth:
        n = self.config.stream_n
        src = uniform(n, rng())
        dst = np.empty_like(src)
        np.copyto(dst, src)
        nbk.copy(src, dst)
        times = best_of(
            {
                "numpy": Timed(lambda: np.copyto(dst, src)),
                "numba": Timed(lambda: nbk.copy(src, dst)),
            },
            self.config,
        )
        moved = 2 * 4 * n
        return CopyBandwidth(numpy=moved / times["numpy"], numba=moved / times["numba"])

    def copy_bandwidth_if_measured(self) -> CopyBandwidth | None:
        measured: CopyBandwidth | None = vars(self).get("copy_bandwidth")
        return measured


def _bandwidth_note(ctx: Context, row: Row, moved: int) -> None:
    copy_bw = ctx.copy_bandwidth.best
    if row.kdsl is None:
        return
    fraction = {side: moved / t / copy_bw for side, t in _times(row).items()}
    row.notes.append(
        f"kdsl {moved / row.kdsl / 1e9:.1f} GB/s = {fraction['kdsl']:.2f} of copy BW "
        f"(numba {fraction['numba']:.2f}, numpy {fraction['numpy']:.2f})"
    )


def _time_row(row: Row, sides: dict[str, Timed], cfg: Config) -> dict[str, float]:
    """Times every side; the numpy, numba and kdsl ones go into the row."""
    times = best_of(sides, cfg)
    for side in ("numpy", "numba", "kdsl"):
        if side in times:
            setattr(row, side, times[side])
    return times


def _times(row: Row) -> dict[str, float]:
    sides = {"numpy": row.numpy, "numba": row.numba, "kdsl": row.kdsl}
    return {k: v for k, v in sides.items() if v is not None}


def _rate_note(row: Row, work: float, unit: str, scale: float) -> None:
    rates = {side: work / t / scale for side, t in _times(row).items()}
    row.notes.append(
        f"kdsl {rates['kdsl']:.2f} {unit} (numba {rates['numba']:.2f}, numpy {rates['numpy']:.2f})"
    )


# --- 1. saxpy -------------------------------------------------------------------------


def saxpy(ctx: Context) -> list[Row]:
    cfg = ctx.config
    n = cfg.stream_n
    gen = rng()
    a = np.float32(2.5)
    x, y = uniform(n, gen), uniform(n, gen)
    out = {side: np.empty_like(x) for side in ("numpy", "numba", "kdsl")}
    npk.saxpy(a, x, y, out["numpy"])
    nbk.saxpy(a, x, y, out["numba"])
    kdk.saxpy(a, x, y, out["kdsl"])
    row = Row("saxpy", f"n=2^{n.bit_length() - 1} f32")
    row.ok = agree("saxpy: kdsl vs numpy", out["kdsl"], out["numpy"], rtol=1e-6, atol=1e-6)
    row.ok &= agree("saxpy: numba vs numpy", out["numba"], out["numpy"], rtol=1e-6, atol=1e-6)
    _time_row(
        row,
        {
            "numpy": Timed(lambda: npk.saxpy(a, x, y, out["numpy"])),
            "numba": Timed(lambda: nbk.saxpy(a, x, y, out["numba"])),
            "kdsl": Timed(lambda: kdk.saxpy(a, x, y, out["kdsl"])),
        },
        cfg,
    )
    _bandwidth_note(ctx, row, moved=3 * 4 * n)
    return [row]


# --- 2. sum reduction -----------------------------------------------------------------


def reduction(ctx: Context) -> list[Row]:
    cfg = ctx.config
    n = cfg.stream_n
    x = uniform(n, rng())
    exact = float(np.sum(x, dtype=np.float64))
    row = Row("sum reduction", f"n=2^{n.bit_length() - 1} f32")
    row.ok = agree("sum: kdsl vs float64 sum", kdk.total(x), exact, rtol=1e-4)
    row.ok &= agree("sum: numba vs float64 sum", nbk.total(x), exact, rtol=1e-4)
    row.ok &= agree("sum: numpy vs float64 sum", npk.total(x), exact, rtol=1e-4)
    _time_row(
        row,
        {
            "numpy": Timed(lambda: npk.total(x)),
            "numba": Timed(lambda: nbk.total(x)),
            "kdsl": Timed(lambda: kdk.total(x)),
        },
        cfg,
    )
    _bandwidth_note(ctx, row, moved=4 * n)
    return [row]


# --- 3. all-pairs n-body --------------------------------------------------------------


def nbody(ctx: Context) -> list[Row]:
    cfg = ctx.config
    n = cfg.nbody_n
    pos = lattice_positions(n)
    cutoff = np.float32(LJ_CUTOFF)
    acc = {side: np.zeros_like(pos) for side in ("numba", "kdsl")}
    want = npk.forces(pos, cutoff)
    nbk.forces(pos, acc["numba"], cutoff)
    kdk.forces(pos, acc["kdsl"], cutoff)
    atol = 1e-4 * float(np.abs(want).max())
    row = Row("n-body (LJ, cutoff)", f"N={n} vec3")
    row.ok = agree("n-body: kdsl vs numpy", acc["kdsl"], want, rtol=1e-3, atol=atol)
    row.ok &= agree("n-body: kdsl vs numba", acc["kdsl"], acc["numba"], rtol=1e-3, atol=atol)
    _time_row(
        row,
        {
            "numpy": Timed(lambda: npk.forces(pos, cutoff)),
            "numba": Timed(lambda: nbk.forces(pos, acc["numba"], cutoff)),
            "kdsl": Timed(lambda: kdk.forces(pos, acc["kdsl"], cutoff)),
        },
        cfg,
    )
    _rate_note(row, float(n) * n, "Gpair/s", 1e9)
    return [row, _nbody_scalar(ctx, pos, cutoff, want)]


def _nbody_scalar(ctx: Context, pos: np.ndarray, cutoff: np.float32, want: np.ndarray) -> Row:
    """The n-body kernel on the (N, 3) array read as pos[j, 0], pos[j, 1], pos[j, 2]; the
    notes give its time over the vec3 kernel's, timed again in the same interleaved runs
    (target <= 1.25)."""
    cfg = ctx.config
    n = pos.shape[0]
    acc = {side: np.zeros_like(pos) for side in ("numba", "kdsl", "kdsl vec3")}
    nbk.forces(pos, acc["numba"], cutoff)
    kdk.forces_scalar(pos, acc["kdsl"], cutoff)
    atol = 1e-4 * float(np.abs(want).max())
    row = Row("n-body, scalar-indexed", f"N={n} (N, 3)")
    row.ok = agree("n-body scalar: kdsl vs numpy", acc["kdsl"], want, rtol=1e-3, atol=atol)
    times = _time_row(
        row,
        {
            "numba": Timed(lambda: nbk.forces(pos, acc["numba"], cutoff)),
            "kdsl": Timed(lambda: kdk.forces_scalar(pos, acc["kdsl"], cutoff)),
            "kdsl vec3": Timed(lambda: kdk.forces(pos, acc["kdsl vec3"], cutoff)),
        },
        cfg,
    )
    ratio = times["kdsl"] / times["kdsl vec3"]
    verdict = "ok" if ratio <= 1.25 else "MISSED"
    pairs = float(n) * n / 1e9
    row.notes.append(
        f"kdsl {pairs / times['kdsl']:.2f} Gpair/s (numba {pairs / times['numba']:.2f}); "
        f"scalar/vec3 {ratio:.2f} ({verdict}, target <= 1.25)"
    )
    return row


# --- 4. 2-D Jacobi, whole time loop in one call ---------------------------------------


def jacobi(ctx: Context) -> list[Row]:
    cfg = ctx.config
    n, iters = cfg.jacobi_n, cfg.jacobi_iters
    assert iters % 2 == 0, "with an even number of sweeps the result ends in the first array"
    start = uniform(n * n, rng()).reshape(n, n)
    pairs = {side: (start.copy(), start.copy()) for side in ("numpy", "numba", "kdsl")}
    funcs = {"numpy": npk.jacobi, "numba": nbk.jacobi, "kdsl": kdk.jacobi}

    def reset(side: str) -> None:
        for arr in pairs[side]:
            np.copyto(arr, start)

    for side, fn in funcs.items():
        reset(side)
        fn(*pairs[side], iters)
    row = Row("jacobi 2-D (1 call)", f"{n}x{n}, {iters} it")
    want = pairs["numpy"][0]
    row.ok = agree("jacobi: kdsl vs numpy", pairs["kdsl"][0], want, rtol=1e-5, atol=1e-6)
    row.ok &= agree("jacobi: numba vs numpy", pairs["numba"][0], want, rtol=1e-5, atol=1e-6)
    _time_row(
        row,
        {
            side: Timed(partial(fn, *pairs[side], iters), partial(reset, side))
            for side, fn in funcs.items()
        },
        cfg,
    )
    _rate_note(row, float(n - 2) ** 2 * iters, "Gcell/s", 1e9)
    return [row]


# --- 5. particle-to-grid scatter ------------------------------------------------------


def scatter(ctx: Context) -> list[Row]:
    cfg = ctx.config
    n, g = cfg.particles, cfg.grid_n
    gen = rng()
    px, py, w = uniform(n, gen), uniform(n, gen), uniform(n, gen)
    funcs = {
        "numpy": npk.scatter,
        "numba": nbk.scatter,
        "numba serial": nbk.scatter_serial,
        "kdsl": kdk.scatter,
    }
    grids = {side: np.zeros((g, g), np.float32) for side in funcs}
    for side, fn in funcs.items():
        fn(px, py, w, grids[side])
    row = Row("p2g scatter (atomic +=)", f"{n:.0e} -> {g}x{g}".replace("e+0", "e"))
    want = grids["numpy"]
    atol = 1e-5 * float(want.max())
    for side in ("kdsl", "numba", "numba serial"):
        row.ok &= agree(f"scatter: {side} vs numpy", grids[side], want, rtol=1e-5, atol=atol)
    times = _time_row(
        row,
        {
            side: Timed(partial(fn, px, py, w, grids[side]), partial(grids[side].fill, 0.0))
            for side, fn in funcs.items()
        },
        cfg,
    )
    row.notes.append(
        f"numba = per-thread grids; numba serial {times['numba serial'] * 1e3:.2f} ms "
        f"(ratio {times['numba serial'] / times['kdsl']:.2f}x); numpy = np.add.at"
    )
    return [row]


# --- 6. call overhead -----------------------------------------------------------------


def _call_repeatedly(
    fn: Callable[..., object], a: np.ndarray, b: np.ndarray, c: np.ndarray, calls: int
) -> None:
    for _ in range(calls):
        fn(a, b, c)


def call_overhead(ctx: Context) -> list[Row]:
    cfg = ctx.config
    a, b = np.ones(16, np.float32), np.full(16, 2.0, np.float32)
    rows = []
    cases = [
        ("call overhead (serial)", npk.trivial, nbk.trivial, kdk.trivial, "numba = njit"),
        (
            "call overhead (prange)",
            npk.trivial,
            nbk.trivial_parallel,
            kdk.trivial_parallel,
            "prange over 16 elems; numba = njit(parallel=True)",
        ),
    ]
    for name, np_fn, nb_fn, kd_fn, note in cases:
        c = {side: np.zeros(16, np.float32) for side in ("numpy", "numba", "kdsl")}
        np_fn(a, b, c["numpy"])
        nb_fn(a, b, c["numba"])
        kd_fn(a, b, c["kdsl"])
        row = Row(name, "3 arrays x 16 f32")
        row.ok = agree(f"{name}: kdsl", c["kdsl"][0], c["numpy"][0], rtol=0.0)
        sides = {
            side: Timed(partial(_call_repeatedly, fn, a, b, c[side], cfg.calls))
            for side, fn in (("numpy", np_fn), ("numba", nb_fn), ("kdsl", kd_fn))
        }
        for side, t in best_of(sides, cfg).items():
            setattr(row, side, t / cfg.calls)
        row.notes.append(f"per call; numpy = np.add(a, b, out=c); {note}")
        rows.append(row)
    rows.append(_call_with_scalars(cfg, a, b))
    return rows


def _call_with_scalars(cfg: Config, a: np.ndarray, b: np.ndarray) -> Row:
    """``c[k] = s * a[k] + b[k]`` with a float ``s`` and an int ``k`` from Python."""
    c = {side: np.zeros(16, np.float32) for side in ("numpy", "numba", "kdsl")}
    funcs = {"numpy": npk.trivial_scalar, "numba": nbk.trivial_scalar,
             "kdsl": kdk.trivial_scalar}
    for side, fn in funcs.items():
        fn(a, b, c[side], 1.5, 3)
    row = Row("call overhead (scalars)", "3 arrays, float, int")
    row.ok = agree("call overhead (scalars): kdsl", c["kdsl"], c["numpy"], rtol=0.0)

    def repeatedly(fn: Callable[..., object], out: np.ndarray) -> None:
        for _ in range(cfg.calls):
            fn(a, b, out, 1.5, 3)

    sides = {side: Timed(partial(repeatedly, fn, c[side])) for side, fn in funcs.items()}
    for side, t in best_of(sides, cfg).items():
        setattr(row, side, t / cfg.calls)
    row.notes.append("per call; numpy = the same indexing in Python; numba = njit")
    return row


# --- 7. tensor expressions (API.md section 7) -----------------------------------------
# Each kdsl kernel written with whole-array expressions; where the brief asks for it, the
# same computation hand-written with kd.prange is timed in the same run (side "kdsl hand")
# and the notes give tensor time / hand-written time.

HAND_TARGET = 1.10  # a tensor statement should cost at most 10 % more than the loop


def _hand_note(times: dict[str, float]) -> str:
    ratio = times["kdsl"] / times["kdsl hand"]
    verdict = "ok" if ratio <= HAND_TARGET else "MISSED"
    return (
        f"tensor/hand-written {ratio:.2f} ({verdict}, target <= {HAND_TARGET:.2f}; "
        f"hand-written prange {_ms(times['kdsl hand'])})"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def chain(ctx: Context) -> list[Row]:
    cfg = ctx.config
    n = cfg.stream_n
    gen = rng()
    a, b, c = uniform(n, gen), uniform(n, gen), uniform(n, gen)
    funcs = {
        "numpy": npk.chain,
        "numba": nbk.chain,
        "kdsl": kdk.chain_tensor,
        "kdsl hand": kdk.chain_loop,
    }
    out = {side: np.empty_like(a) for side in funcs}
    for side, fn in funcs.items():
        fn(a, b, c, out[side])
    row = Row("chain: 1 tensor stmt", f"n=2^{n.bit_length() - 1} f32, 5 ops")
    want = out["numpy"]
    for side in ("kdsl", "kdsl hand", "numba"):
        row.ok &= agree(f"chain: {side} vs numpy", out[side], want, rtol=1e-5, atol=1e-6)
    times = _time_row(
        row, {side: Timed(partial(fn, a, b, c, out[side])) for side, fn in funcs.items()}, cfg
    )
    row.notes.append(_hand_note(times))
    _bandwidth_note(ctx, row, moved=4 * 4 * n)
    row.notes.append("numpy = 5 in-place passes")
    return [row]


def jacobi_slices(ctx: Context) -> list[Row]:
    cfg = ctx.config
    n, iters = cfg.jacobi_n, cfg.jacobi_iters
    assert iters % 2 == 0, "with an even number of sweeps the result ends in the first array"
    start = uniform(n * n, rng()).reshape(n, n)
    funcs = {
        "numpy": npk.jacobi,
        "numba": nbk.jacobi,
        "kdsl": kdk.jacobi_slices,
        "kdsl hand": kdk.jacobi,
    }
    pairs = {side: (start.copy(), start.copy()) for side in funcs}

    def reset(side: str) -> None:
        for arr in pairs[side]:
            np.copyto(arr, start)

    for side, fn in funcs.items():
        reset(side)
        fn(*pairs[side], iters)
    row = Row("jacobi 2-D, slices (1 call)", f"{n}x{n}, {iters} it")
    want = pairs["numpy"][0]
    for side in ("kdsl", "kdsl hand", "numba"):
        row.ok &= agree(f"jacobi slices: {side} vs numpy", pairs[side][0], want, 1e-5, 1e-6)
    times = _time_row(
        row,
        {
            side: Timed(partial(fn, *pairs[side], iters), partial(reset, side))
            for side, fn in funcs.items()
        },
        cfg,
    )
    row.notes.append(_hand_note(times))
    _rate_note(row, float(n - 2) ** 2 * iters, "Gcell/s", 1e9)
    return [row]


def softmax(ctx: Context) -> list[Row]:
    cfg = ctx.config
    rows, cols = cfg.softmax_rows, cfg.softmax_cols
    x = normal((rows, cols), rng(), scale=3.0)
    funcs = {
        "numpy": npk.softmax,
        "numba": nbk.softmax,
        "kdsl": kdk.softmax_tensor,
        "kdsl hand": kdk.softmax_loop,
    }
    out = {side: np.empty_like(x) for side in funcs}
    for side, fn in funcs.items():
        fn(x, out[side])
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    atol = 1e-6 * float(want.max())
    row = Row("softmax rows (tensor)", f"{rows}x{cols} f32")
    for side in ("numpy", "kdsl", "kdsl hand", "numba"):
        row.ok &= agree(f"softmax: {side} vs float64", out[side], want, rtol=1e-4, atol=atol)
    times = _time_row(
        row, {side: Timed(partial(fn, x, out[side])) for side, fn in funcs.items()}, cfg
    )
    row.notes.append(_hand_note(times))
    return [row]


def _torch_side(fn_name: str, *arrays: np.ndarray) -> tuple[Timed | None, np.ndarray | None, str]:
    """A PyTorch (CPU) side running the same expression, or None with the reason."""
    try:
        import torch
    except ImportError:
        return None, None, "torch not installed"
    import kdsl as kd

    torch.set_num_threads(kd.get_num_threads())
    tensors = [torch.from_numpy(a) for a in arrays]

    def run() -> torch.Tensor:
        with torch.no_grad():
            if fn_name == "mlp":
                x, w1, b1, w2 = tensors
                return torch.tanh(x @ w1 + b1) @ w2
            a, b = tensors
            return a @ b

    result: np.ndarray = run().numpy()
    return Timed(run), result, f"torch {torch.__version__}"


def mlp(ctx: Context) -> list[Row]:
    from peak import set_blas_threads

    import kdsl as kd

    set_blas_threads(kd.get_num_threads())  # NumPy's BLAS on kdsl's threads
    cfg = ctx.config
    batch, width = cfg.mlp_batch, cfg.mlp_width
    gen = rng()
    x = normal((batch, width), gen)
    w1 = normal((width, width), gen, scale=width**-0.5)
    b1 = normal((width,), gen, scale=0.1)
    w2 = normal((width, width), gen, scale=width**-0.5)
    f64 = [v.astype(np.float64) for v in (x, w1, b1, w2)]
    want = np.tanh(f64[0] @ f64[1] + f64[2]) @ f64[3]
    atol = 1e-4 * float(np.abs(want).max())
    row = Row("MLP tanh(x@w1+b1)@w2", f"{batch}x{width}, w {width}x{width}")
    results = {"numpy": npk.mlp(x, w1, b1, w2), "kdsl": kdk.mlp(x, w1, b1, w2)}
    sides = {
        "numpy": Timed(partial(npk.mlp, x, w1, b1, w2)),
        "kdsl": Timed(partial(kdk.mlp, x, w1, b1, w2)),
    }
    torch_side, torch_result, torch_note = _torch_side("mlp", x, w1, b1, w2)
    if torch_side is not None and torch_result is not None:
        sides["torch"] = torch_side
        results["torch"] = torch_result
    for side, got in results.items():
        row.ok &= agree(f"mlp: {side} vs float64", got, want, rtol=1e-4, atol=atol)
    times = _time_row(row, sides, cfg)
    flops = 2.0 * 2.0 * batch * width * width
    row.notes.append(
        f"kdsl {flops / times['kdsl'] / 1e9:.1f} GFLOP/s, numpy (BLAS) "
        f"{flops / times['numpy'] / 1e9:.1f}"
    )
    if "torch" in times:
        row.notes.append(
            f"{torch_note} {_ms(times['torch'])} (torch/kdsl {times['torch'] / times['kdsl']:.2f}x)"
        )
    else:
        row.notes.append(f"{torch_note}: skipped")
    return [row]


def _torch_matmul(a: np.ndarray, b: np.ndarray) -> Timed | None:
    try:
        import torch
    except ImportError:
        return None
    import kdsl as kd

    torch.set_num_threads(kd.get_num_threads())
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return Timed(lambda: ta @ tb)


def matmul(ctx: Context) -> list[Row]:
    """``a @ b`` at several sizes, f32 and f64: kdsl, NumPy's BLAS on kdsl's threads,
    PyTorch (CPU, same threads) in the notes; Numba's naive loops at the small sizes."""
    from peak import peak, set_blas_threads

    import kdsl as kd

    cfg = ctx.config
    threads = kd.get_num_threads()
    blas = set_blas_threads(threads)
    machine = peak()
    timing = replace(cfg, budget_s=min(cfg.budget_s, 0.6))  # a short row, even at 2048
    rows = []
    for dtype in (np.float32, np.float64):
        for n in cfg.matmul_sizes:
            gen = rng()
            a = uniform(n * n, gen).reshape(n, n).astype(dtype)
            b = uniform(n * n, gen).reshape(n, n).astype(dtype)
            want = a.astype(np.float64) @ b.astype(np.float64)
            name = np.dtype(dtype).name
            row = Row("matmul a @ b", f"{n}^3 {'f32' if dtype == np.float32 else 'f64'}")
            tol = 1e-5 if dtype == np.float32 else 1e-12
            sides = {"numpy": Timed(partial(npk.matmul, a, b)),
                     "kdsl": Timed(partial(kdk.matmul_any, a, b))}
            results = {"kdsl": kdk.matmul_any(a, b), "numpy": npk.matmul(a, b)}
            if n <= 256:
                c_numba = np.empty_like(a)
                nbk.matmul_naive(a, b, c_numba)
                results["numba naive"] = c_numba
                sides["numba"] = Timed(partial(nbk.matmul_naive, a, b, c_numba))
            torch_side = _torch_matmul(a, b)
            if torch_side is not None:
                sides["torch"] = torch_side
            for side, got in results.items():
                row.ok &= agree(f"matmul {name} {n}: {side} vs float64", got, want, rtol=tol,
                                atol=tol * float(want.max()))
            times = _time_row(row, sides, timing)
            flops = 2.0 * n**3
            top = machine.gflops(threads, np.dtype(dtype).itemsize)
            rate = {side: flops / t / 1e9 for side, t in times.items()}
            note = (f"kdsl {rate['kdsl']:.1f} GFLOP/s = {rate['kdsl'] / top:.0%} of peak "
                    f"{top:.0f}; numpy {rate['numpy']:.1f}")
            if "torch" in rate:
                note += f", torch {rate['torch']:.1f} (torch/kdsl {times['torch'] / times['kdsl']:.2f}x)"
            row.notes.append(note)
            rows.append(row)
    rows[-1].notes.append(machine.describe(threads) + ("" if blas else "; BLAS threads not set"))
    rows.extend(_batched_matmul(timing))
    return rows


BATCHES = ((4096, 16, np.float32), (1024, 32, np.float64))  # (batch, n, dtype)


def _batched_matmul(timing: Config) -> list[Row]:
    """A batch of small products in a ``prange`` against ``np.matmul`` of the stacks (and
    ``torch.bmm``)."""
    rows = []
    for batch, n, dtype in BATCHES:
        gen = rng()
        a = uniform(batch * n * n, gen).reshape(batch, n, n).astype(dtype)
        b = uniform(batch * n * n, gen).reshape(batch, n, n).astype(dtype)
        want = a.astype(np.float64) @ b.astype(np.float64)
        outs = {side: np.empty_like(a) for side in ("numpy", "kdsl")}
        sides = {"numpy": Timed(partial(np.matmul, a, b, out=outs["numpy"])),
                 "kdsl": Timed(partial(kdk.matmul_batched, a, b, outs["kdsl"]))}
        row = Row("matmul batched in prange", f"{batch} x {n}^3 {np.dtype(dtype).name[0]}"
                  f"{8 * np.dtype(dtype).itemsize}")
        tol = 1e-5 if dtype == np.float32 else 1e-12
        for side, fn in sides.items():
            fn.run()
            row.ok &= agree(f"batched matmul {n}: {side} vs float64", outs[side], want,
                            rtol=tol, atol=tol * float(want.max()))
        try:
            import torch

            import kdsl as kd

            torch.set_num_threads(kd.get_num_threads())
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            sides["torch"] = Timed(lambda ta=ta, tb=tb: torch.bmm(ta, tb))
        except ImportError:
            pass
        times = _time_row(row, sides, timing)
        note = f"numpy = np.matmul of the stacks; kdsl {batch * 2.0 * n**3 / times['kdsl'] / 1e9:.1f} GFLOP/s"
        if "torch" in times:
            note += f"; torch.bmm {_ms(times['torch'])} (torch/kdsl {times['torch'] / times['kdsl']:.2f}x)"
        row.notes.append(note)
        rows.append(row)
    return rows


# --- 8. compile time and import time, each in a fresh process -------------------------


def _probe(library: str, n: int | str, cache_dir: str) -> dict[str, float]:
    env = dict(os.environ, KDSL_CACHE_DIR=cache_dir, NUMBA_CACHE_DIR=cache_dir)
    env.pop("KDSL_CACHE", None)
    proc = subprocess.run(
        [sys.executable, str(HERE / "compile_probe.py"), library, str(n)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{library} compile probe failed:\n{proc.stderr[-2000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _cold_and_warm(library: str, n: int | str) -> tuple[dict[str, float], dict[str, float]]:
    """Two fresh processes sharing a new, empty cache directory."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{library}-cache-") as cache_dir:
        cold = _probe(library, n, cache_dir)
        warm = _probe(library, n, cache_dir)
    cold["compile"] = cold["first_call"] - cold["run"]
    warm["load"] = warm["first_call"] - warm["run"]
    return cold, warm


def _best(probes: list[dict[str, float]], key: str) -> float:
    return min(p[key] for p in probes)


def compile_time(ctx: Context) -> list[Row]:
    n = ctx.config.nbody_n
    repeats = ctx.config.probes
    numpy_imports = [_probe("numpy", n, tempfile.gettempdir()) for _ in range(repeats)]
    cold: dict[str, list[dict[str, float]]] = {"numba": [], "kdsl": []}
    warm: dict[str, list[dict[str, float]]] = {"numba": [], "kdsl": []}
    for _ in range(repeats):
        for library in ("numba", "kdsl"):
            c, w = _cold_and_warm(library, n)
            cold[library].append(c)
            warm[library].append(w)

    imports = Row("import (fresh process)", "", notes=["numba and kdsl include numpy"])
    imports.numpy = _best(numpy_imports, "import")
    imports.numba = _best(cold["numba"] + warm["numba"], "import")
    imports.kdsl = _best(cold["kdsl"] + warm["kdsl"], "import")

    compile_row = Row("n-body compile, cold cache", f"N={n}")
    compile_row.numba = _best(cold["numba"], "compile")
    compile_row.kdsl = _best(cold["kdsl"], "compile")
    compile_row.notes.append(
        f"first call minus run; kdsl first call {_best(cold['kdsl'], 'first_call') * 1e3:.1f} ms"
        f", run {_best(cold['kdsl'], 'run') * 1e3:.1f} ms; first call CPU "
        f"{_best(cold['kdsl'], 'first_call_cpu') * 1e3:.1f} ms (all threads), "
        f"{_best(cold['kdsl'], 'first_call_main_cpu') * 1e3:.1f} ms (calling thread)"
    )

    warm_row = Row("n-body 1st call, warm cache", f"N={n}")
    warm_row.numba = _best(warm["numba"], "first_call")
    warm_row.kdsl = _best(warm["kdsl"], "first_call")
    warm_row.notes.append(
        f"whole first call; minus run: kdsl {_best(warm['kdsl'], 'load') * 1e3:.1f} ms, "
        f"numba {_best(warm['numba'], 'load') * 1e3:.1f} ms"
    )

    for label, probes in (("cold", cold["kdsl"]), ("warm", warm["kdsl"])):
        if any(p["max_abs_diff"] > 1e-3 * p["max_abs"] for p in probes):
            print(f"FAIL compile probe ({label} cache): kdsl n-body forces differ from numpy")
            compile_row.ok = warm_row.ok = False
    return [imports, compile_row, warm_row, _tensor_compile(repeats)]


def _tensor_compile(repeats: int) -> Row:
    """Cold compile of ``fluid_step`` (ten tensor statements), kdsl against Numba's njit
    of the same NumPy code (kernels_numpy.fluid_step)."""
    cold: dict[str, list[dict[str, float]]] = {"numba": [], "kdsl": []}
    for _ in range(repeats):
        for library in ("numba", "kdsl"):
            cold[library].append(_cold_and_warm(library, "tensor")[0])
    row = Row("tensor kernel compile, cold", "10 stmts, 64x64")
    row.numba = _best(cold["numba"], "compile")
    row.kdsl = _best(cold["kdsl"], "compile")
    row.notes.append("fluid_step: divergence, 20 Jacobi sweeps with slices, updates, 2 "
                     "reductions; numba = njit of the NumPy code; target kdsl <= 400 ms")
    if any(p["max_abs_diff"] > 1e-4 * p["max_abs"] for p in cold["kdsl"]):
        print("FAIL tensor compile probe: kdsl fluid_step differs from numpy")
        row.ok = False
    return row

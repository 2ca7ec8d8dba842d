"""Arrays of structures read with scalar indices against the same kernels on arrays of
kdsl vectors, in one run: ``python benchmarks/aos.py`` (``--quick``: smaller sizes).

Each row times a kernel that reads an ``(N, D)`` array as ``p[j, 0]``, ``p[j, 1]``, ...
and the same kernel on a ``kd.Array[vecD]`` of the same memory, interleaved run by run;
``scalar / vector`` is the ratio of their times (target <= 1.25). A C-contiguous array
with a short last axis is specialised on its size, so both forms compile to wide loads of
whole rows split into components. The last rows pass other layouts to the scalar
kernel, timed against the vector kernel on the dense array: a padded view (three columns
of an (N, 4) array, specialised on its row pitch), a column-major array and the transpose
of a (3, N) array (both specialised on their first axis stepping one element); and the
rotation writing into a padded view. Every result is checked against the vector kernel's
before timing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernels_kdsl as kdk  # noqa: E402
from data import lattice_positions  # noqa: E402
from grad import interleaved_best  # type: ignore[import-not-found]  # noqa: E402

import kdsl as kd  # noqa: E402

SOFTENING = 0.01


@kd.kernel
def gravity3_scalar(p, acc):
    """Softened gravity on an (N, 3) array of positions."""
    n = p.shape[0]
    for i in kd.prange(n):
        ax = p[i, 0] * 0.0
        ay = ax
        az = ax
        for j in range(n):
            dx = p[j, 0] - p[i, 0]
            dy = p[j, 1] - p[i, 1]
            dz = p[j, 2] - p[i, 2]
            inv = 1.0 / kd.sqrt(dx * dx + dy * dy + dz * dz + SOFTENING)
            f = inv * inv * inv
            ax += f * dx
            ay += f * dy
            az += f * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@kd.kernel
def gravity3_vector(p: kd.Array[kd.vec3], acc: kd.Array[kd.vec3]):
    """The same on an array of vec3."""
    n = p.shape[0]
    for i in kd.prange(n):
        a = kd.vec3(0.0)
        for j in range(n):
            d = p[j] - p[i]
            inv = 1.0 / kd.sqrt(kd.dot(d, d) + SOFTENING)
            a += inv * inv * inv * d
        acc[i] = a


@kd.kernel
def gravity3d_vector(p: kd.Array[kd.vec3d], acc: kd.Array[kd.vec3d]):
    """The same on an array of vec3d."""
    n = p.shape[0]
    for i in kd.prange(n):
        a = kd.vec3d(0.0)
        for j in range(n):
            d = p[j] - p[i]
            inv = 1.0 / kd.sqrt(kd.dot(d, d) + SOFTENING)
            a += inv * inv * inv * d
        acc[i] = a


@kd.kernel
def gravity2_scalar(p, acc):
    """Softened gravity in the plane, on an (N, 2) array."""
    n = p.shape[0]
    for i in kd.prange(n):
        ax = p[i, 0] * 0.0
        ay = ax
        for j in range(n):
            dx = p[j, 0] - p[i, 0]
            dy = p[j, 1] - p[i, 1]
            inv = 1.0 / kd.sqrt(dx * dx + dy * dy + SOFTENING)
            f = inv * inv * inv
            ax += f * dx
            ay += f * dy
        acc[i, 0] = ax
        acc[i, 1] = ay


@kd.kernel
def gravity2_vector(p: kd.Array[kd.vec2], acc: kd.Array[kd.vec2]):
    n = p.shape[0]
    for i in kd.prange(n):
        a = kd.vec2(0.0)
        for j in range(n):
            d = p[j] - p[i]
            inv = 1.0 / kd.sqrt(kd.dot(d, d) + SOFTENING)
            a += inv * inv * inv * d
        acc[i] = a


@kd.kernel
def gravity_mass_scalar(p, acc):
    """An (N, 4) array of x, y, z and mass."""
    n = p.shape[0]
    for i in kd.prange(n):
        ax = p[i, 0] * 0.0
        ay = ax
        az = ax
        for j in range(n):
            dx = p[j, 0] - p[i, 0]
            dy = p[j, 1] - p[i, 1]
            dz = p[j, 2] - p[i, 2]
            inv = 1.0 / kd.sqrt(dx * dx + dy * dy + dz * dz + SOFTENING)
            f = p[j, 3] * inv * inv * inv
            ax += f * dx
            ay += f * dy
            az += f * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@kd.kernel
def gravity_mass_vector(p: kd.Array[kd.vec4], acc: kd.Array[kd.f32, 2]):
    n = p.shape[0]
    for i in kd.prange(n):
        q = p[i]
        ax = 0.0
        ay = 0.0
        az = 0.0
        for j in range(n):
            r = p[j]
            dx = r[0] - q[0]
            dy = r[1] - q[1]
            dz = r[2] - q[2]
            inv = 1.0 / kd.sqrt(dx * dx + dy * dy + dz * dz + SOFTENING)
            f = r[3] * inv * inv * inv
            ax += f * dx
            ay += f * dy
            az += f * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@kd.kernel
def rotate_scalar(p, out, c: kd.f32, s: kd.f32):
    """A streaming update that writes every component: a rotation about z."""
    for i in kd.prange(p.shape[0]):
        x = p[i, 0]
        y = p[i, 1]
        out[i, 0] = c * x - s * y
        out[i, 1] = s * x + c * y
        out[i, 2] = p[i, 2] + 1.0


@kd.kernel
def rotate_vector(p: kd.Array[kd.vec3], out: kd.Array[kd.vec3], c: kd.f32, s: kd.f32):
    for i in kd.prange(p.shape[0]):
        v = p[i]
        out[i] = kd.vec3(c * v[0] - s * v[1], s * v[0] + c * v[1], v[2] + 1.0)


@kd.kernel
def deform_scalar(f, c, v, out, g, dt: kd.f32):
    """An MPM-style update of (N, 3, 3) deformation gradients, G = F + dt C F, and the
    product F v, with scalar indices."""
    for p in kd.prange(f.shape[0]):
        for r in range(3):
            a0 = dt * c[p, r, 0]
            a1 = dt * c[p, r, 1]
            a2 = dt * c[p, r, 2]
            out[p, r] = f[p, r, 0] * v[p, 0] + f[p, r, 1] * v[p, 1] + f[p, r, 2] * v[p, 2]
            for k in range(3):
                g[p, r, k] = f[p, r, k] + a0 * f[p, 0, k] + a1 * f[p, 1, k] + a2 * f[p, 2, k]


@kd.kernel
def deform_vector(f: kd.Array[kd.mat33], c: kd.Array[kd.mat33], v: kd.Array[kd.vec3],
                  out: kd.Array[kd.vec3], g: kd.Array[kd.mat33], dt: kd.f32):
    for p in kd.prange(f.shape[0]):
        m = f[p]
        out[p] = m @ v[p]
        g[p] = m + dt * (c[p] @ m)


@kd.kernel
def deform_vector_f64(f: kd.Array[kd.mat33d], c: kd.Array[kd.mat33d], v: kd.Array[kd.vec3d],
                      out: kd.Array[kd.vec3d], g: kd.Array[kd.mat33d], dt: kd.f64):
    for p in kd.prange(f.shape[0]):
        m = f[p]
        out[p] = m @ v[p]
        g[p] = m + dt * (c[p] @ m)


@kd.kernel
def small_update(p: kd.Array[kd.vec3], m: kd.Array[kd.mat33], out: kd.Array[kd.vec3]):
    """A kernel on a few elements, where the call itself is most of the time."""
    for i in range(p.shape[0]):
        out[i] = m[i] @ p[i]


def call_rows(rounds: int) -> list[tuple[str, float, float]]:
    """Microseconds per call of ``small_update`` on 16 elements, with the vectors and
    matrices in other layouts against C-contiguous ones, interleaved. Each call takes the
    compiled call path (checked in machine code) wherever the layout is one a
    specialisation fixes."""
    rng = np.random.default_rng(1)
    p = rng.random((16, 3)).astype(np.float32)
    m = rng.random((16, 3, 3)).astype(np.float32)
    wide_p = np.zeros((16, 4), np.float32)
    wide_p[:, :3] = p
    wide_m = np.zeros((16, 3, 4), np.float32)
    wide_m[..., :3] = m
    layouts = {
        "column-major": (np.asfortranarray(p), np.asfortranarray(m)),
        "padded rows": (wide_p[:, :3], wide_m[..., :3]),
    }
    out = np.zeros_like(p)
    calls = 2000

    def timed(a: np.ndarray, b: np.ndarray) -> Any:
        def run() -> None:
            for _ in range(calls):
                small_update(a, b, out)
        return run

    rows = []
    for name, (a, b) in layouts.items():
        small_update(a, b, out)
        expected = np.einsum("nij,nj->ni", m, p)
        ok = bool(np.allclose(out, expected, rtol=1e-5))
        t_other, t_dense = interleaved_best([timed(a, b), timed(p, m)], rounds=rounds)
        rows.append((name + ("" if ok else "  FAIL (results differ)"),
                     t_other / calls * 1e6, t_dense / calls * 1e6))
    return rows


def _row(name: str, size: str, scalar: Any, vector: Any, check: Any,
         rounds: int) -> tuple[str, str, float, float, bool]:
    ok = check()
    t_scalar, t_vector = interleaved_best([scalar, vector], rounds=rounds)
    return name, size, t_scalar, t_vector, ok


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    scale = float(np.abs(b).max())
    return bool(np.allclose(a, b, rtol=1e-3, atol=1e-4 * scale))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few rounds")
    args = parser.parse_args()
    n = 1024 if args.quick else 4096
    stream = 1 << (18 if args.quick else 22)
    rounds = 3 if args.quick else 20
    rng = np.random.default_rng(0)
    rows = []

    pos = lattice_positions(n)
    cutoff = np.float32(2.5)
    outs = [np.zeros_like(pos) for _ in range(2)]
    rows.append(_row(
        "n-body LJ (run.py row)", f"N={n} f32",
        lambda: kdk.forces_scalar(pos, outs[0], cutoff), lambda: kdk.forces(pos, outs[1], cutoff),
        lambda: (kdk.forces_scalar(pos, outs[0], cutoff), kdk.forces(pos, outs[1], cutoff),
                 _close(outs[0], outs[1]))[-1], rounds))

    for dtype, scalar_kernel, vector_kernel, dims, label in (
        (np.float32, gravity3_scalar, gravity3_vector, 3, "gravity (N, 3)"),
        (np.float64, gravity3_scalar, gravity3d_vector, 3, "gravity (N, 3)"),
        (np.float32, gravity2_scalar, gravity2_vector, 2, "gravity (N, 2)"),
    ):
        p = rng.random((n, dims)).astype(dtype) * 10
        a_s, a_v = np.zeros_like(p), np.zeros_like(p)
        rows.append(_row(
            label, f"N={n} {'f32' if dtype == np.float32 else 'f64'}",
            lambda s=scalar_kernel, p=p, a=a_s: s(p, a),
            lambda v=vector_kernel, p=p, a=a_v: v(p, a),
            lambda s=scalar_kernel, v=vector_kernel, p=p, a=a_s, b=a_v: (s(p, a), v(p, b),
                                                                         _close(a, b))[-1],
            rounds))

    pm = rng.random((n, 4)).astype(np.float32) * 10
    am_s, am_v = np.zeros((n, 3), np.float32), np.zeros((n, 3), np.float32)
    rows.append(_row(
        "gravity with mass (N, 4)", f"N={n} f32",
        lambda: gravity_mass_scalar(pm, am_s), lambda: gravity_mass_vector(pm, am_v),
        lambda: (gravity_mass_scalar(pm, am_s), gravity_mass_vector(pm, am_v),
                 _close(am_s, am_v))[-1], rounds))

    pr = rng.random((stream, 3)).astype(np.float32)
    or_s, or_v = np.zeros_like(pr), np.zeros_like(pr)
    c, s = np.float32(0.6), np.float32(0.8)
    rows.append(_row(
        "rotate, writes (N, 3)", f"N=2^{stream.bit_length() - 1} f32",
        lambda: rotate_scalar(pr, or_s, c, s), lambda: rotate_vector(pr, or_v, c, s),
        lambda: (rotate_scalar(pr, or_s, c, s), rotate_vector(pr, or_v, c, s),
                 _close(or_s, or_v))[-1], rounds))

    padded_out = np.zeros((stream, 4), np.float32)[:, :3]
    rows.append(_row(
        "rotate, writes padded view", f"N=2^{stream.bit_length() - 1} f32",
        lambda: rotate_scalar(pr, padded_out, c, s), lambda: rotate_vector(pr, or_v, c, s),
        lambda: (rotate_scalar(pr, padded_out, c, s), rotate_vector(pr, or_v, c, s),
                 _close(padded_out, or_v))[-1], rounds))

    for dtype, vector_kernel in ((np.float32, deform_vector), (np.float64, deform_vector_f64)):
        fm = rng.random((stream, 3, 3)).astype(dtype)
        cm = rng.random((stream, 3, 3)).astype(dtype)
        vm = rng.random((stream, 3)).astype(dtype)
        gs, gv = np.zeros_like(fm), np.zeros_like(fm)
        os_, ov = np.zeros_like(vm), np.zeros_like(vm)
        dt = dtype(0.01)
        args_s, args_v = (fm, cm, vm, os_, gs, dt), (fm, cm, vm, ov, gv, dt)
        rows.append(_row(
            "3x3 matrices, F v, F + dt C F",
            f"N=2^{stream.bit_length() - 1} {'f32' if dtype == np.float32 else 'f64'}",
            lambda a=args_s: deform_scalar(*a), lambda k=vector_kernel, a=args_v: k(*a),
            lambda k=vector_kernel, a=args_s, b=args_v: (
                deform_scalar(*a), k(*b), _close(a[3], b[3]) and _close(a[4], b[4]))[-1],
            rounds))

    wide = np.zeros((n, 4), np.float32)
    wide[:, :3] = pos
    view = wide[:, :3]
    av = np.zeros_like(pos)
    rows.append(_row(
        "n-body LJ, padded view", f"N={n} f32",
        lambda: kdk.forces_scalar(view, av, cutoff), lambda: kdk.forces(pos, outs[1], cutoff),
        lambda: (kdk.forces_scalar(view, av, cutoff), _close(av, outs[1]))[-1], rounds))
    columns = np.asfortranarray(pos)
    rows.append(_row(
        "n-body LJ, column-major", f"N={n} f32",
        lambda: kdk.forces_scalar(columns, av, cutoff), lambda: kdk.forces(pos, outs[1], cutoff),
        lambda: (kdk.forces_scalar(columns, av, cutoff), _close(av, outs[1]))[-1], rounds))
    transposed = np.ascontiguousarray(pos.T).T
    rows.append(_row(
        "n-body LJ, (3, N).T", f"N={n} f32",
        lambda: kdk.forces_scalar(transposed, av, cutoff), lambda: kdk.forces(pos, outs[1], cutoff),
        lambda: (kdk.forces_scalar(transposed, av, cutoff), _close(av, outs[1]))[-1], rounds))

    print(f"load average {os.getloadavg()[0]:.2f} | threads {kd.get_num_threads()}")
    print(f"{'kernel':<26} {'size':<12} {'scalar':>10} {'vector':>10} {'scalar/vector':>14}")
    failed = False
    for name, size, t_s, t_v, ok in rows:
        verdict = "" if ok else "  FAIL (results differ)"
        failed |= not ok
        print(f"{name:<26} {size:<12} {t_s * 1e3:>8.2f}ms {t_v * 1e3:>8.2f}ms {t_s / t_v:>14.2f}{verdict}")
    print(f"\n{'calls (vec3 + mat33, 16 rows)':<30} {'layout':>10} {'dense':>10} {'ratio':>8}")
    for name, t_other, t_dense in call_rows(rounds):
        failed |= "FAIL" in name
        print(f"{name:<30} {t_other:>8.2f}us {t_dense:>8.2f}us {t_other / t_dense:>8.2f}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

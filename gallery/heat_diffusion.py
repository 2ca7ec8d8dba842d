"""Steady-state heat flow through a plate with pipes and insulating slots, with kdsl.

The temperature ``u`` on a 2-D plate satisfies Laplace's equation. The plate's left
edge is held hot and its right edge cold, a few circular pipes hold their own fixed
temperatures, and insulating slots (like the plate's top and bottom edges) let no heat
through. The solver is red-black successive over-relaxation: every sweep updates the
cells of one colour of the checkerboard in parallel (``kd.ndrange``), and the whole
iteration runs inside one kernel call, as a ``while`` loop that stops once the largest
update (a ``max`` reduction) falls below a tolerance.

The picture is made by a kernel too: a blue-white-red heat map normalised by ``min`` and
``max`` reductions, with isotherms and the insulators drawn grey.

    python gallery/heat_diffusion.py                  # 512 x 512
    python gallery/heat_diffusion.py --small          # a few seconds
    python gallery/heat_diffusion.py --size 1024 --output heat.png
    mpiexec -n 4 python gallery/heat_diffusion.py --distributed   # over 4 MPI ranks
"""

import argparse
import math
import sys
import time

import numpy as np
from PIL import Image

import kdsl as kd

#: Cell kinds.
FREE = 0
FIXED = 1
INSULATOR = 2

#: Spacing of the isotherms drawn on the heat map, in temperature units.
ISOTHERM_STEP = 0.05


# --- the scene ------------------------------------------------------------------------


@kd.func
def in_slot(p: kd.vec2, slot: kd.vec4) -> kd.bool_:
    """Whether ``p`` lies in the axis-aligned rectangle ``(x0, y0, x1, y1)``."""
    return slot.x <= p.x and p.x <= slot.z and slot.y <= p.y and p.y <= slot.w


@kd.func
def classify(p: kd.vec2, h: kd.f32, pipes: kd.Array[kd.vec4],
             slots: kd.Array[kd.vec4]) -> tuple[kd.i32, kd.f32]:
    """Kind and initial temperature of the cell at ``p`` (cell size ``h``) on the unit plate.

    ``pipes[k]`` is ``(x, y, radius, temperature)``; ``slots[k]`` a rectangle.
    """
    if p.x < h:
        return FIXED, 1.0                    # hot left edge
    if p.x > 1.0 - h:
        return FIXED, 0.0                    # cold right edge
    for k in range(pipes.shape[0]):
        pipe = pipes[k]
        d = p - kd.vec2(pipe.x, pipe.y)
        if kd.dot(d, d) <= pipe.z * pipe.z:
            return FIXED, pipe.w
    for k in range(slots.shape[0]):
        if in_slot(p, slots[k]):
            return INSULATOR, 0.5
    return FREE, 1.0 - p.x                   # a linear first guess


@kd.kernel
def build_scene(kind: kd.Array[kd.u8, 2], u: kd.Array[kd.f32, 2],
                pipes: kd.Array[kd.vec4], slots: kd.Array[kd.vec4]):
    """Fill the cell kinds and the starting temperatures of an ``(ny, nx)`` grid."""
    ny = u.shape[0]
    nx = u.shape[1]
    h = 1.0 / nx
    for i, j in kd.ndrange(ny, nx):
        p = kd.vec2((j + 0.5) * h, (i + 0.5) / ny)
        k, t = classify(p, h, pipes, slots)
        kind[i, j] = k
        u[i, j] = t


# --- the solver -----------------------------------------------------------------------


@kd.func
def neighbour(u: kd.Array[kd.f32, 2], kind: kd.Array[kd.u8, 2], i: kd.i64, j: kd.i64,
              centre: kd.f32) -> kd.f32:
    """Temperature seen across a face: an insulator or the plate's edge mirrors ``centre``."""
    inside = i >= 0 and i < u.shape[0] and j >= 0 and j < u.shape[1]
    if not inside:
        return centre
    return kd.where(kind[i, j] == INSULATOR, centre, u[i, j])


@kd.func
def sor_sweep(u: kd.Array[kd.f32, 2], kind: kd.Array[kd.u8, 2], colour: kd.i64,
              omega: kd.f32) -> kd.f32:
    """Over-relax the free cells with ``(i + j) % 2 == colour``; returns the largest change."""
    ny = u.shape[0]
    nx = u.shape[1]
    change = kd.f32(0.0)     # an f32 accumulator, stated explicitly
    for i, jj in kd.ndrange(ny, (nx + 1) // 2):
        j = 2 * jj + (i + colour) % 2
        if j < nx and kind[i, j] == FREE:
            c = u[i, j]
            average = 0.25 * (neighbour(u, kind, i - 1, j, c) + neighbour(u, kind, i + 1, j, c)
                              + neighbour(u, kind, i, j - 1, c) + neighbour(u, kind, i, j + 1, c))
            delta = omega * (average - c)
            u[i, j] = c + delta
            change = max(change, abs(delta))     # max reduction
    return change


@kd.kernel
def solve(u: kd.Array[kd.f32, 2], kind: kd.Array[kd.u8, 2], omega: kd.f32, tolerance: kd.f32,
          max_iterations: kd.i32) -> tuple[kd.i32, kd.f32]:
    """Red-black SOR until the largest update is below ``tolerance``.

    Returns the number of iterations and the last largest update.
    """
    iterations = 0
    change = tolerance + 1.0
    while change > tolerance and iterations < max_iterations:
        red = sor_sweep(u, kind, 0, omega)
        black = sor_sweep(u, kind, 1, omega)
        change = max(red, black)
        iterations += 1
    return iterations, change


# --- the picture ----------------------------------------------------------------------


@kd.func
def heat_color(t: kd.f32) -> kd.vec3:
    """Blue (0) through white (0.5) to red (1)."""
    cold = kd.vec3(0.23, 0.30, 0.75)
    white = kd.vec3(0.87, 0.87, 0.87)
    hot = kd.vec3(0.71, 0.02, 0.15)
    s = kd.clamp(t, 0.0, 1.0)
    if s < 0.5:
        return cold + (white - cold) * (2.0 * s)
    return white + (hot - white) * (2.0 * s - 1.0)


@kd.kernel
def render(u: kd.Array[kd.f32, 2], kind: kd.Array[kd.u8, 2], image: kd.Array[kd.u8, 3]):
    """Heat map of ``u`` into the ``(ny, nx, 3)`` RGB ``image``, with isotherms."""
    ny = u.shape[0]
    nx = u.shape[1]
    lo = kd.f32(1e30)        # f32 accumulators, stated explicitly
    hi = kd.f32(-1e30)
    for i, j in kd.ndrange(ny, nx):
        if kind[i, j] != INSULATOR:
            lo = min(lo, u[i, j])
            hi = max(hi, u[i, j])
    scale = 1.0 / max(hi - lo, 1e-6)
    for i, j in kd.ndrange(ny, nx):
        t = u[i, j]
        color = heat_color((t - lo) * scale)
        # distance to the nearest isotherm, in pixels (from the local gradient)
        level = t / ISOTHERM_STEP
        frac = abs(level - kd.floor(level + 0.5))
        gx = u[i, min(j + 1, nx - 1)] - u[i, max(j - 1, 0)]
        gy = u[min(i + 1, ny - 1), j] - u[max(i - 1, 0), j]
        slope = 0.5 * kd.sqrt(gx * gx + gy * gy) / ISOTHERM_STEP
        line = kd.clamp(1.2 - frac / max(slope, 1e-6), 0.0, 1.0)
        color = color * (1.0 - 0.45 * line)
        color = kd.where(kind[i, j] == FIXED, 0.7 * heat_color((t - lo) * scale), color)
        color = kd.where(kind[i, j] == INSULATOR, kd.vec3(0.35), color)
        for c in range(3):
            image[i, j, c] = kd.u8(255.0 * kd.clamp(color[c], 0.0, 1.0) + 0.5)


# --- Python side ----------------------------------------------------------------------


def default_scene() -> tuple[np.ndarray, np.ndarray]:
    """Pipes ``(x, y, radius, temperature)`` and insulating slots ``(x0, y0, x1, y1)``."""
    pipes = np.array([
        [0.30, 0.30, 0.06, 1.00],
        [0.55, 0.72, 0.08, 0.00],
        [0.78, 0.30, 0.05, 0.90],
        [0.30, 0.78, 0.04, 0.20],
    ], np.float32)
    slots = np.array([
        [0.42, 0.05, 0.46, 0.55],
        [0.62, 0.45, 0.90, 0.49],
        [0.12, 0.52, 0.36, 0.56],
    ], np.float32)
    return pipes, slots


def optimal_omega(n: int) -> float:
    """The over-relaxation factor that is optimal for Laplace's equation on an n x n grid."""
    return 2.0 / (1.0 + math.sin(math.pi / n))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=512, help="grid cells (and pixels) per side")
    parser.add_argument("--tolerance", type=float, default=1e-5,
                        help="stop when no cell changes by more than this")
    parser.add_argument("--max-iterations", type=int, default=20000)
    parser.add_argument("--output", default="heat_diffusion.png", help="PNG to write")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where the arrays live and the kernels run")
    parser.add_argument("--small", action="store_true", help="a quick run on a 128 x 128 grid")
    parser.add_argument("--distributed", action="store_true",
                        help="split the plate over MPI ranks (run under mpiexec; needs mpi4py)")
    args = parser.parse_args(argv)
    if args.small:
        args.size = 128
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.distributed:
        from mpi_runs.heat_diffusion import run_distributed

        return run_distributed(args)
    n = args.size
    kind = np.zeros((n, n), np.uint8)
    u = np.zeros((n, n), np.float32)
    pipes, slots = default_scene()
    build_scene(kind, u, pipes, slots)
    print(f"grid: {n} x {n}  free cells: {int(np.sum(kind == FREE))}  "
          f"device: {args.device}  threads: {kd.get_num_threads()}")
    u_on, kind_on = kd.array(u, device=args.device), kd.array(kind, device=args.device)

    start = time.perf_counter()
    solve(u_on, kind_on, optimal_omega(n), args.tolerance, 0)      # compiles
    print(f"compile: {time.perf_counter() - start:.2f} s")

    start = time.perf_counter()
    iterations, change = solve(u_on, kind_on, optimal_omega(n), args.tolerance,
                               args.max_iterations)
    elapsed = time.perf_counter() - start
    u = u_on.numpy() if args.device == "cuda" else u_on
    updates = float(iterations) * np.sum(kind == FREE)
    print(f"solve: {int(iterations)} iterations in {elapsed:.2f} s "
          f"({updates / max(elapsed, 1e-9) / 1e6:.0f} M cell updates/s), "
          f"last update {float(change):.2e}")
    free = kind == FREE
    print(f"temperature of free cells: min {u[free].min():.3f}  max {u[free].max():.3f}  "
          f"mean {u[free].mean():.3f}")

    image = np.zeros((n, n, 3), np.uint8)
    render(u, kind, image)
    Image.fromarray(image, "RGB").save(args.output)
    print(f"wrote {args.output}")
    if not float(change) <= args.tolerance:
        print(f"error: no convergence after {int(iterations)} iterations", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

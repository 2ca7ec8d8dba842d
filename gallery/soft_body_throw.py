"""A soft body learns how to throw itself: differentiable simulation with kd.Tape.

A square of jelly (a grid of unit masses tied to their neighbours by damped springs)
starts on the ground. Its parameters are the initial velocity of every mass (a first
guess: all the same, a throw that falls short). The
simulation runs forward (semi-implicit Euler, gravity, a stiff ground), one kernel call
per time step from a Python loop, recorded by a ``kd.Tape``; the loss is the squared
distance, after the last step, of every mass from where it should be: the same square,
turned a third of a turn, high up on the right. ``tape.backward(loss)`` gives the gradient
with respect to every initial velocity through the whole run, and Adam (a kernel too)
updates them. The picture shows the learnt throw (the body every few steps, the target
pose in green, the first attempt in grey) and the loss curve.

    python gallery/soft_body_throw.py                 # 12 x 12 masses, 300 steps
    python gallery/soft_body_throw.py --small         # a few seconds
    python gallery/soft_body_throw.py --device cuda --output throw.png
"""

import argparse
import math
import sys
import time
from collections.abc import Callable

import numpy as np
from PIL import Image, ImageDraw, ImageFont

import kdsl as kd

GRAVITY = -9.81
GROUND_STIFFNESS = 2000.0
STIFFNESS = 3000.0
DAMPING = 5.0
BODY_SIZE = 0.5  # metres, side to side
FLIGHT_SECONDS = 1.0
FIRST_GUESS = (1.5, 5.0)  # the initial velocity of every mass before any learning
TARGET_CENTRE = np.array([2.6, 1.6])
TARGET_TURN = 2 * math.pi / 3  # counterclockwise


# --- the simulation --------------------------------------------------------------------


@kd.kernel
def step(x: kd.Array[kd.vec2d], v: kd.Array[kd.vec2d], f: kd.Array[kd.vec2d],
         neighbours: kd.Array[kd.i32, 2], rest: kd.Array[kd.f64, 2],
         stiffness: kd.f64, damping: kd.f64, dt: kd.f64):
    """One time step: spring, damping, gravity and ground forces, then the update."""
    n = x.shape[0]
    for i in kd.prange(n):
        force = kd.vec2d(0.0, GRAVITY)
        for k in kd.static(range(8)):  # unrolled: the 8 neighbours (-1: none)
            j = neighbours[i, k]
            if j >= 0:
                d = x[j] - x[i]
                length = kd.sqrt(kd.dot(d, d) + 1e-12)
                direction = d / length
                stretch = stiffness * (length - rest[i, k])
                closing = damping * kd.dot(v[j] - v[i], direction)
                force += (stretch + closing) * direction
        if x[i].y < 0.0:
            force += kd.vec2d(0.0, -GROUND_STIFFNESS * x[i].y) - 4.0 * v[i]
        f[i] = force
    for i in kd.prange(n):
        v[i] += dt * f[i]
        x[i] += dt * v[i]


@kd.kernel
def set_velocity(v: kd.Array[kd.vec2d], v0: kd.Array[kd.vec2d]):
    for i in kd.prange(v.shape[0]):
        v[i] = v0[i]


@kd.kernel
def pose_error(x: kd.Array[kd.vec2d], target: kd.Array[kd.vec2d]) -> kd.f64:
    total = 0.0
    for i in kd.prange(x.shape[0]):
        d = x[i] - target[i]
        total += kd.dot(d, d)
    return total / x.shape[0]


@kd.kernel
def adam(p: kd.Array[kd.f64], g: kd.Array[kd.f64], m: kd.Array[kd.f64],
         s: kd.Array[kd.f64], rate: kd.f64, t: kd.i32):
    """One Adam step on flat arrays (first moment ``m``, second moment ``s``)."""
    b1 = 0.9
    b2 = 0.999
    c1 = 1.0 - b1 ** t
    c2 = 1.0 - b2 ** t
    for i in kd.prange(p.shape[0]):
        m[i] = b1 * m[i] + (1.0 - b1) * g[i]
        s[i] = b2 * s[i] + (1.0 - b2) * g[i] * g[i]
        p[i] -= rate * (m[i] / c1) / (kd.sqrt(s[i] / c2) + 1e-8)


# --- the body and its target -----------------------------------------------------------


def make_body(side: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masses on a grid resting on the ground; the 8 neighbours of each (-1: none) and
    the springs' rest lengths."""
    ij = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1)
    ij = ij.reshape(-1, 2)
    spacing = BODY_SIZE / (side - 1)
    x = (ij * spacing + np.array([0.4, 0.0])).astype(np.float64)
    offsets = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1)]
    neighbours = np.full((len(ij), len(offsets)), -1, dtype=np.int32)
    rest = np.zeros((len(ij), len(offsets)))
    for k, (di, dj) in enumerate(offsets):
        a, b = ij[:, 0] + di, ij[:, 1] + dj
        inside = (a >= 0) & (a < side) & (b >= 0) & (b < side)
        neighbours[inside, k] = (a * side + b)[inside]
        rest[inside, k] = spacing * math.hypot(di, dj)
    return x, neighbours, rest


def make_target(x: np.ndarray) -> np.ndarray:
    """The body turned a third of a turn about its centre, up on the right."""
    c, s = math.cos(TARGET_TURN), math.sin(TARGET_TURN)
    return TARGET_CENTRE + (x - x.mean(axis=0)) @ np.array([[c, s], [-s, c]])


class Scene:
    """The arrays of one run, on one device."""

    def __init__(self, side: int, device: str) -> None:
        x0, neighbours, rest = make_body(side)
        self.x0 = x0
        self.target_host = make_target(x0)
        self.device = device
        self.x = kd.array(x0, device=device)
        self.v = kd.zeros_like(self.x)
        self.f = kd.zeros_like(self.x)
        self.neighbours = kd.array(neighbours, device=device)
        self.rest = kd.array(rest, device=device)
        self.target = kd.array(self.target_host, device=device)
        guess = np.tile(np.array(FIRST_GUESS), (len(x0), 1))
        self.v0 = kd.array(guess, device=device, requires_grad=True)

    def reset(self) -> None:
        self.x = kd.array(self.x0, device=self.device)

    def run(self, steps: int, dt: float, keep_every: int = 0) -> tuple[float, list[np.ndarray]]:
        """The whole flight from the current initial velocities; returns the loss and
        the positions every ``keep_every`` steps."""
        self.reset()
        frames = []
        set_velocity(self.v, self.v0)
        for k in range(steps):
            step(self.x, self.v, self.f, self.neighbours, self.rest, STIFFNESS, DAMPING, dt)
            if keep_every and k % keep_every == 0:
                frames.append(self.x.numpy().copy())
        if keep_every:
            frames.append(self.x.numpy().copy())
        loss = pose_error(self.x, self.target)
        return loss, frames


def train(scene: Scene, steps: int, dt: float, iterations: int,
          rate: float) -> tuple[list[float], float, float, int]:
    """Adam on the initial velocities; returns the loss curve, the seconds spent in
    forward runs (recorded by the tape) and in backward passes after the first
    iteration, and the bytes the last tape kept."""
    flat = scene.v0.size
    m = kd.zeros(flat, kd.f64, device=scene.device)
    s = kd.zeros(flat, kd.f64, device=scene.device)
    losses = []
    forward_seconds = backward_seconds = 0.0
    memory = 0
    for t in range(1, iterations + 1):
        started = time.perf_counter()
        with kd.Tape() as tape:
            loss, _ = scene.run(steps, dt)
        kd.synchronize()
        recorded = time.perf_counter()
        tape.backward(loss)
        kd.synchronize()
        if t > 1:  # the first iteration compiles the gradient kernels
            forward_seconds += recorded - started
            backward_seconds += time.perf_counter() - recorded
        memory = tape.memory_bytes
        losses.append(float(loss))
        adam(flat_view(scene.v0), flat_view(scene.v0.grad), m, s, rate, t)
        tape.zero()
        tape.reset()  # the next tape reuses the memory of this one's copies
    return losses, forward_seconds, backward_seconds, memory


def flat_view(a: kd.DeviceArray) -> kd.DeviceArray:
    """The elements of a C-contiguous array as one axis (the same memory)."""
    if a.device == "cuda":
        return kd.CudaArray.from_pointer(a.ptr, (a.size,), None, a.dtype, owner=a)
    return kd.DeviceArray(a.numpy().reshape(-1))


# --- the picture -----------------------------------------------------------------------


def draw_body(draw: ImageDraw.ImageDraw, x: np.ndarray, side: int, to_pixel: Callable,
              colour: tuple[int, int, int], width: int = 1) -> None:
    """The springs along the grid's rows and columns; the row that starts on the ground
    thicker, in orange (so that the turn shows)."""
    grid = x.reshape(side, side, 2)
    for a in (grid, grid.transpose(1, 0, 2)):
        for row in a:
            draw.line([to_pixel(p) for p in row], fill=colour, width=width)
    draw.line([to_pixel(p) for p in grid[:, 0]], fill=(240, 140, 20), width=width + 2)


def render(path: str, scene: Scene, side: int, first: list[np.ndarray],
           learnt: list[np.ndarray], losses: list[float]) -> None:
    width, height = 960, 480
    image = Image.new("RGB", (width, height), (250, 250, 246))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    # the flight, in metres: x in [0, 4], y in [-0.2, 2.8]
    scale = 460 / 4.2

    def to_pixel(p: np.ndarray) -> tuple[float, float]:
        return (10 + (p[0] + 0.1) * scale, height - 40 - (p[1] + 0.1) * scale)

    draw.rectangle([0, height - 40 - 0.1 * scale, 480, height], fill=(214, 205, 185))
    for frame in first:
        draw_body(draw, frame, side, to_pixel, (200, 200, 200))
    count = len(learnt)
    for k, frame in enumerate(learnt):
        shade = k / max(count - 1, 1)
        colour = (int(60 + 170 * shade), int(90 + 40 * (1 - shade)), int(200 - 150 * shade))
        draw_body(draw, frame, side, to_pixel, colour)
    draw_body(draw, scene.target_host, side, to_pixel, (30, 160, 60), width=2)
    draw.text((16, 12), "the learnt throw (grey: the first try, green: the target; "
              "orange: the side that starts on the ground)",
              fill=(40, 40, 40), font=font)
    plot_loss(draw, font, losses, (520, 40, width - 30, height - 60))
    image.save(path)


def plot_loss(draw: ImageDraw.ImageDraw, font: ImageFont.ImageFont, losses: list[float],
              box: tuple[int, int, int, int]) -> None:
    """The loss curve on a log scale, with axes and labels."""
    left, top, right, bottom = box
    draw.rectangle(box, outline=(60, 60, 60))
    logs = np.log10(np.maximum(np.array(losses), 1e-12))
    low, high = math.floor(logs.min()), math.ceil(logs.max())
    if high == low:
        high = low + 1
    for decade in range(low, high + 1):
        y = bottom - (decade - low) / (high - low) * (bottom - top)
        draw.line([(left, y), (right, y)], fill=(225, 225, 225))
        draw.text((left - 40, y - 6), f"1e{decade}", fill=(60, 60, 60), font=font)
    points = [(left + k / max(len(logs) - 1, 1) * (right - left),
               bottom - (value - low) / (high - low) * (bottom - top))
              for k, value in enumerate(logs)]
    draw.line(points, fill=(200, 60, 40), width=2)
    draw.text((left, top - 16), "loss (mean squared distance to the target, m^2)",
              fill=(40, 40, 40), font=font)
    draw.text((left, bottom + 6), f"0{' ' * 8}optimisation step{' ' * 8}{len(losses)}",
              fill=(40, 40, 40), font=font)


# --- the script ------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=12, help="masses along a side")
    parser.add_argument("--steps", type=int, default=300, help="time steps of a flight")
    parser.add_argument("--iterations", type=int, default=150, help="optimisation steps")
    parser.add_argument("--rate", type=float, default=0.3, help="Adam's learning rate")
    parser.add_argument("--small", action="store_true", help="a run of a few seconds")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--output", default="soft_body_throw.png")
    args = parser.parse_args(argv)
    if args.small:
        args.side, args.steps, args.iterations, args.rate = 6, 100, 40, 0.2
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    dt = FLIGHT_SECONDS / args.steps
    scene = Scene(args.side, args.device)
    started = time.perf_counter()
    _, first = scene.run(args.steps, dt, keep_every=max(args.steps // 10, 1))
    losses, forward, backward, memory = train(scene, args.steps, dt, args.iterations, args.rate)
    final_loss, learnt = scene.run(args.steps, dt, keep_every=max(args.steps // 10, 1))
    losses.append(float(final_loss))
    elapsed = time.perf_counter() - started
    render(args.output, scene, args.side, first, learnt, losses)
    print(f"device: {args.device}")
    print(f"{args.side * args.side} masses, {args.steps} steps a flight, {args.iterations} "
          f"optimisation steps in {elapsed:.2f} s")
    print(f"loss {losses[0]:.4g} -> {losses[-1]:.4g}; gradient / forward time "
          f"{backward / forward:.2f}; the tape kept {memory / 1e6:.2f} MB")
    print(f"wrote {args.output}")
    if not losses[-1] < 0.2 * losses[0]:
        print("the loss did not fall", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

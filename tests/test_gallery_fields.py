"""The gallery's grid and body simulations (heat diffusion, stable fluids, soft-body throw):
their kernels agree with NumPy references, with physics (linearity, divergence) and
with their own plain-Python reference (``kernel.python``); the throw's gradient through
the whole flight agrees with finite differences."""

from types import ModuleType

import numpy as np
import pytest
from kdsl_gallery_util import load_gallery_module

pytest.importorskip("PIL.Image")  # the scripts draw their pictures with Pillow

# --- heat diffusion -------------------------------------------------------------------


@pytest.fixture(scope="module")
def heat() -> ModuleType:
    return load_gallery_module("heat_diffusion")


def test_heat_plain_plate_is_linear(heat: ModuleType) -> None:
    """Hot left edge, cold right edge, insulated top and bottom: u falls linearly in x."""
    ny, nx = 24, 40
    kind = np.zeros((ny, nx), np.uint8)
    u = np.zeros((ny, nx), np.float32)
    no_shapes = np.zeros((0, 4), np.float32)
    heat.build_scene(kind, u, no_shapes, no_shapes)
    assert np.all(kind[:, 0] == heat.FIXED) and np.all(kind[:, -1] == heat.FIXED)
    assert np.all(kind[:, 1:-1] == heat.FREE)

    u[kind == heat.FREE] = 0.0                   # start far from the solution
    iterations, change = heat.solve(u, kind, heat.optimal_omega(nx), 1e-6, 20000)
    assert float(change) <= 1e-6 and 10 < int(iterations) < 20000
    expected = np.broadcast_to(1.0 - np.arange(nx) / (nx - 1), (ny, nx))
    np.testing.assert_allclose(u, expected, atol=1e-4)


def test_heat_scene_and_solution(heat: ModuleType) -> None:
    n = 64
    kind = np.zeros((n, n), np.uint8)
    u = np.zeros((n, n), np.float32)
    pipes, slots = heat.default_scene()
    heat.build_scene(kind, u, pipes, slots)
    assert {0, 1, 2} <= set(np.unique(kind).tolist())
    fixed_before = u[kind == heat.FIXED].copy()

    iterations, change = heat.solve(u, kind, heat.optimal_omega(n), 1e-6, 20000)
    assert float(change) <= 1e-6
    np.testing.assert_array_equal(u[kind == heat.FIXED], fixed_before)
    # maximum principle: free cells lie between the coldest and hottest fixed values
    free = u[kind == heat.FREE]
    assert free.min() >= fixed_before.min() - 1e-5 and free.max() <= fixed_before.max() + 1e-5
    # the discrete Laplace equation holds at free cells whose neighbours are all free
    is_free = kind == heat.FREE
    interior = (is_free[1:-1, 1:-1] & is_free[:-2, 1:-1] & is_free[2:, 1:-1]
                & is_free[1:-1, :-2] & is_free[1:-1, 2:])
    average = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    assert interior.sum() > n * n // 2
    assert np.abs(u[1:-1, 1:-1] - average)[interior].max() < 1e-4

    image = np.zeros((n, n, 3), np.uint8)
    heat.render(u, kind, image)
    assert np.all(image[kind == heat.INSULATOR] == image[kind == heat.INSULATOR][0])
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 50


def test_heat_kernels_match_their_python_reference(heat: ModuleType) -> None:
    n = 20
    pipes, slots = heat.default_scene()
    grids = []
    for run in (lambda k, *a: k(*a), lambda k, *a: k.python(*a)):
        kind = np.zeros((n, n), np.uint8)
        u = np.zeros((n, n), np.float32)
        image = np.zeros((n, n, 3), np.uint8)
        run(heat.build_scene, kind, u, pipes, slots)
        iterations, _ = run(heat.solve, u, kind, 1.5, 1e-4, 30)
        run(heat.render, u, kind, image)
        grids.append((kind, u, image, int(iterations)))
    (kind, u, image, iterations), (ref_kind, ref_u, ref_image, ref_iterations) = grids
    np.testing.assert_array_equal(kind, ref_kind)
    assert iterations == ref_iterations
    np.testing.assert_allclose(u, ref_u, atol=1e-5)
    assert np.abs(image.astype(int) - ref_image).max() <= 1


# --- stable fluids --------------------------------------------------------------------


@pytest.fixture(scope="module")
def fluids() -> ModuleType:
    return load_gallery_module("stable_fluids")


def staggered_divergence(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Divergence (times the cell size) of each inner cell of a staggered grid, float64."""
    u, v = u.astype(np.float64), v.astype(np.float64)
    return u[1:, 1:-1] - u[:-1, 1:-1] + v[1:-1, 1:] - v[1:-1, :-1]


def corner_curl(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vorticity (times the cell size) at the inner cell corners, float64."""
    u, v = u.astype(np.float64), v.astype(np.float64)
    return (v[2:-1, 1:-1] - v[1:-2, 1:-1]) - (u[1:-1, 2:-1] - u[1:-1, 1:-2])


def random_flow(fluids: ModuleType, nx: int, ny: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random velocity on an ``nx x ny`` staggered grid, nothing through the walls."""
    rng = np.random.default_rng(seed)
    u, v, _, _ = fluids.make_grid(nx, ny)
    u[1:-1, 1:-1] = rng.normal(size=(nx - 1, ny))
    v[1:-1, 1:-1] = rng.normal(size=(nx, ny - 1))
    return u, v


def test_fluids_projection_removes_divergence(fluids: ModuleType) -> None:
    """One projection (Jacobi from zero pressure, then the gradient subtracted) leaves a
    tiny fraction of the divergence and changes the flow by a gradient only: the
    vorticity stays as it was."""
    nx, ny = 24, 20                                   # not square: the axes stay apart
    u, v = random_flow(fluids, nx, ny, seed=7)
    u_before, v_before = u.copy(), v.copy()
    before, after = fluids.project_velocity(u, v, 1500)

    div_before = staggered_divergence(u_before, v_before)
    div_after = staggered_divergence(u, v)
    assert float(before) == pytest.approx(np.abs(div_before).max(), rel=1e-5)
    assert float(after) == pytest.approx(np.abs(div_after).max(), rel=1e-3, abs=1e-6)
    assert float(after) < 1e-3 * float(before)
    assert np.sqrt(np.mean(div_after**2)) < 1e-3 * np.sqrt(np.mean(div_before**2))
    # nothing flows through the walls
    assert np.all(u[0] == 0) and np.all(u[-1] == 0)
    assert np.all(v[:, 0] == 0) and np.all(v[:, -1] == 0)
    # a gradient has no curl: the vorticity inside is unchanged
    np.testing.assert_allclose(corner_curl(u, v), corner_curl(u_before, v_before), atol=1e-4)
    # a second projection has (almost) nothing left to remove
    first_change = max(np.abs(u - u_before).max(), np.abs(v - v_before).max())
    u_again, v_again = u.copy(), v.copy()
    fluids.project_velocity(u_again, v_again, 1500)
    second_change = max(np.abs(u_again - u).max(), np.abs(v_again - v).max())
    assert first_change > 0.5 and second_change < 1e-2 * first_change


def test_fluids_few_jacobi_iterations_still_reduce_divergence(fluids: ModuleType) -> None:
    """As in one time step of the simulation: 40 sweeps from zero pressure."""
    u, v = random_flow(fluids, 64, 64, seed=8)
    before, after = fluids.project_velocity(u, v, 40)
    assert float(after) < 0.1 * float(before)


def test_fluids_simulation_stays_bounded(fluids: ModuleType) -> None:
    n = 48
    u, v, dye, stats = fluids.run(n, 120, dt=0.02)
    assert np.all(np.isfinite(u)) and np.all(np.isfinite(v)) and np.all(np.isfinite(stats))
    # advection interpolates, so the dye stays between 0 and the sources' densities
    assert dye.min() >= 0.0 and dye.max() <= 1.0 + 1e-5
    assert stats[-1, 2] == pytest.approx(dye[1:-1, 1:-1].sum(dtype=np.float64), rel=1e-4)
    assert stats[-1, 2] > 10.0                        # the sources did inject dye
    assert np.abs(u).max() > 0.05 * n                 # and set the fluid moving
    # with the last step's pressure as the first guess, projections remove nearly all
    ratio = stats[:, 1] / stats[:, 0]
    assert ratio[len(ratio) // 2:].max() < 0.01
    np.testing.assert_allclose(stats[-1, 1], np.abs(staggered_divergence(u, v)).max(),
                               rtol=1e-3, atol=1e-6)


def test_fluids_kernel_matches_its_python_reference(fluids: ModuleType) -> None:
    n = 16
    sources = fluids.default_sources(n, 0.6)
    sources[:, fluids.SRADIUS] = 3.0                  # wide enough to reach cells of a tiny grid
    results = []
    for simulate in (fluids.simulate, fluids.simulate.python):
        u, v, dye, p = fluids.make_grid(n, n)
        stats = np.zeros((3, 3), np.float32)
        simulate(u, v, dye, p, sources, 0.05, 1.0 * n, 0.35, 0.1, 40, 3, stats)
        results.append((u, v, dye, p, stats))
    (u, v, dye, p, stats), (ref_u, ref_v, ref_dye, ref_p, ref_stats) = results
    assert np.abs(ref_u).max() > 1.0 and ref_dye.max() > 0.5     # something happened
    np.testing.assert_allclose(u, ref_u, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(v, ref_v, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dye, ref_dye, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(p, ref_p, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(stats, ref_stats, rtol=1e-4, atol=1e-5)


# --- soft-body throw: kernels, and the gradient through the whole flight --------------


@pytest.fixture(scope="module")
def throw() -> ModuleType:
    return load_gallery_module("soft_body_throw")


def test_throw_step_matches_its_python_reference(throw: ModuleType) -> None:
    x0, neighbours, rest = throw.make_body(4)
    rng = np.random.default_rng(3)
    x0[:, 1] += rng.normal(scale=0.03, size=len(x0))     # some springs stretched, some on the ground
    v0 = rng.normal(size=x0.shape)
    results = []
    for step in (throw.step, throw.step.python):
        x, v, f = x0.copy(), v0.copy(), np.zeros_like(x0)
        for _ in range(5):
            step(x, v, f, neighbours, rest, throw.STIFFNESS, throw.DAMPING, 0.01)
        results.append((x, v, f))
    for got, expected in zip(results[0], results[1]):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert np.abs(results[1][2]).max() > 10.0


def test_throw_gradient_through_the_flight_matches_finite_differences(throw: ModuleType) -> None:
    scene = throw.Scene(3, "cpu")
    rng = np.random.default_rng(4)
    scene.v0.numpy()[...] += rng.normal(scale=0.5, size=scene.v0.shape)
    steps, dt = 100, throw.FLIGHT_SECONDS / 100
    with throw.kd.Tape() as tape:
        loss, _ = scene.run(steps, dt)
    tape.backward(loss)
    gradient = scene.v0.grad.numpy().copy()
    base = scene.v0.numpy().copy()

    def loss_at(v0: np.ndarray) -> float:
        scene.v0.numpy()[...] = v0
        return float(scene.run(steps, dt)[0])

    for index in [(0, 0), (7, 1)]:
        shift = np.zeros_like(base)
        shift[index] = 1e-6
        numeric = (loss_at(base + shift) - loss_at(base - shift)) / 2e-6
        assert gradient[index] == pytest.approx(numeric, rel=1e-5, abs=1e-8)

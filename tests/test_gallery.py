"""The gallery scripts: each runs in --small mode and writes a real picture; their kernels
agree with NumPy references, with physics (conservation laws) and with their own
plain-Python reference (``kernel.python``)."""

import importlib.util
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")

GALLERY = Path(__file__).resolve().parent.parent / "gallery"
SCRIPTS = sorted(GALLERY.glob("*.py"))


def load_gallery_module(name: str) -> ModuleType:
    """Import ``gallery/<name>.py`` (the gallery is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"gallery_{name}", GALLERY / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- every script, end to end ---------------------------------------------------------


def test_gallery_is_not_empty() -> None:
    assert {"lennard_jones.py", "heat_diffusion.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_small_run_writes_png(script: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    output = tmp_path / "picture.png"
    result = subprocess.run(
        [sys.executable, str(script), "--small", "--output", str(output)],
        cwd=workdir, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.stdout.strip(), "the script printed nothing"
    assert output.is_file() and output.stat().st_size > 0
    assert list(workdir.iterdir()) == [], "the script wrote into its working directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "picture.png"]

    with Image.open(output) as image:
        image.verify()
    with Image.open(output) as image:
        assert image.format == "PNG"
        assert image.width >= 64 and image.height >= 64
        pixels = np.asarray(image.convert("RGB"))
    colors = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colors) > 16, "the picture is (nearly) a single flat colour"
    assert pixels.std() > 5.0


# On the GPU each script runs as --small; on kdsl's emulated device (no GPU here) the
# block reductions are slow to emulate, so the grids are smaller still.
EMULATED_RUNS = {
    "heat_diffusion": ["--size", "48"],
    "stable_fluids": ["--size", "32", "--steps", "60", "--jacobi", "20"],
    "galaxy_collision": ["--small"],
    "lennard_jones": ["--small"],
    "soft_body_throw": ["--small"],
    "sph_dam_break": ["--spacing", "0.05", "--time", "0.05", "--size", "64"],
}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_runs_on_cuda(script: Path, tmp_path: Path) -> None:
    """``--device cuda``: the arrays on the device, the whole run there; each script
    checks its own physics (convergence, conservation, divergence) and fails if it is
    off."""
    import os

    from kdsl.runtime.cuda.driver import is_available

    env = dict(os.environ)
    if is_available():
        options = ["--small"]
    else:
        env["KDSL_CUDA_EMULATOR"] = "1"
        options = EMULATED_RUNS[script.stem]
    output = tmp_path / "picture.png"
    result = subprocess.run(
        [sys.executable, str(script), *options, "--device", "cuda", "--output", str(output)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "device: cuda" in result.stdout
    with Image.open(output) as image:
        assert np.asarray(image.convert("RGB")).std() > 5.0


# --- Lennard-Jones: forces, energy ----------------------------------------------------


@pytest.fixture(scope="module")
def lj() -> ModuleType:
    return load_gallery_module("lennard_jones")


def reference_forces(pos: np.ndarray, box: float, cutoff: float,
                     shift: float) -> tuple[np.ndarray, float]:
    """All-pairs Lennard-Jones forces and potential energy in float64, minimum image."""
    pos = pos.astype(np.float64)
    d = pos[:, None, :] - pos[None, :, :]
    d -= box * np.round(d / box)
    r2 = np.sum(d * d, axis=-1)
    np.fill_diagonal(r2, np.inf)
    inside = r2 < cutoff * cutoff
    inv6 = np.where(inside, 1.0 / r2**3, 0.0)
    force_over_r = np.where(inside, 24.0 * inv6 * (2.0 * inv6 - 1.0) / r2, 0.0)
    energy = np.where(inside, 4.0 * inv6 * (inv6 - 1.0) - shift, 0.0)
    return np.sum(force_over_r[:, :, None] * d, axis=1), 0.5 * float(np.sum(energy))


def jittered_lattice(n: int, density: float, jitter: float,
                     seed: int) -> tuple[np.ndarray, float]:
    """``n`` particles near the sites of a square lattice, and the periodic box side."""
    rng = np.random.default_rng(seed)
    box = math.sqrt(n / density)
    side = math.ceil(math.sqrt(n))
    spacing = box / side
    sites = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1)
    pos = (sites.reshape(-1, 2)[:n] + 0.5) * spacing
    pos += rng.uniform(-jitter, jitter, size=pos.shape) * spacing
    return np.mod(pos, box).astype(np.float32), box


@pytest.mark.parametrize(("n", "density"), [(200, 0.6), (225, 0.3), (30, 0.6)],
                         ids=["cells-dense", "cells-sparse", "all-pairs"])
def test_lj_forces_match_numpy(lj: ModuleType, n: int, density: float) -> None:
    pos, box = jittered_lattice(n, density, jitter=0.25, seed=n)
    system = lj.make_system(pos, np.zeros_like(pos), box)
    if n == 30:
        assert system.ncell == 1
    else:
        assert system.ncell >= 3
    potential = lj.compute_acceleration(system)

    ref_force, ref_potential = reference_forces(pos, box, lj.CUTOFF, lj.ENERGY_SHIFT)
    scale = np.abs(ref_force).max()
    np.testing.assert_allclose(system.acc, ref_force, rtol=1e-4, atol=1e-4 * scale)
    assert potential == pytest.approx(ref_potential, rel=1e-4)
    # Newton's third law: no net force
    assert np.abs(system.acc.sum(axis=0)).max() < 1e-3 * scale


def test_lj_energy_is_conserved(lj: ModuleType) -> None:
    system = lj.initial_state(400, density=0.4, temperature=0.5, seed=3)
    ke0, pe0 = lj.total_energy(system)
    history = lj.run(system, 200, dt=0.005)
    ke1, pe1 = lj.total_energy(system)

    assert history.shape == (200, 2) and np.all(np.isfinite(history))
    # the energies recorded inside the kernel match separate evaluations
    assert history[-1, 0] == pytest.approx(ke1, rel=1e-4)
    assert history[-1, 1] == pytest.approx(pe1, rel=1e-4, abs=1e-3)
    totals = history.sum(axis=1)
    assert np.abs(totals - (ke0 + pe0)).max() / system.n < 1e-3
    assert abs((ke1 + pe1) - (ke0 + pe0)) / system.n < 1e-3
    # something happened: potential energy was converted into kinetic energy
    assert abs(pe1 - pe0) / system.n > 1e-2
    # momentum stays zero
    assert np.abs(system.vel.sum(axis=0)).max() < 1e-2
    assert np.all((system.pos >= 0.0) & (system.pos <= system.box))


def test_lj_thermostat_reaches_temperature(lj: ModuleType) -> None:
    system = lj.initial_state(400, density=0.4, temperature=1.0, seed=4)
    history = lj.run(system, 400, dt=0.005, temperature=0.3, tau=0.1)
    kinetic = history[-50:, 0] / system.n
    assert kinetic.mean() == pytest.approx(0.3, rel=0.1)


def test_lj_kernels_match_their_python_reference(lj: ModuleType) -> None:
    """The compiled kernels agree with the same functions run as plain Python."""
    compiled = lj.initial_state(64, density=0.5, temperature=0.5, seed=5)
    reference = lj.initial_state(64, density=0.5, temperature=0.5, seed=5)
    for system in (compiled, reference):
        lj.compute_acceleration(system)
    history = np.zeros((3, 2), np.float32)
    ref_history = np.zeros((3, 2), np.float32)
    lj.simulate(compiled.pos, compiled.vel, compiled.acc, compiled.box, 0.005, 3, history,
                0.5, 0.01)
    lj.simulate.python(reference.pos, reference.vel, reference.acc, reference.box, 0.005, 3,
                       ref_history, 0.5, 0.01)
    np.testing.assert_allclose(compiled.pos, reference.pos, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled.vel, reference.vel, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(history, ref_history, rtol=1e-4)


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


# --- galaxy collision -----------------------------------------------------------------


@pytest.fixture(scope="module")
def galaxy() -> ModuleType:
    return load_gallery_module("galaxy_collision")


def test_galaxy_gravity_matches_numpy(galaxy: ModuleType) -> None:
    pos, vel, mass, _ = galaxy.encounter(200, seed=1)
    acc = np.zeros_like(pos)
    galaxy.accelerations(pos, mass, acc)

    p = pos.astype(np.float64)
    d = p[None, :, :] - p[:, None, :]
    inv_r3 = (np.sum(d * d, axis=-1) + galaxy.EPS2) ** -1.5
    reference = np.einsum("ij,ijk->ik", mass[None, :] * inv_r3, d)
    np.testing.assert_allclose(acc, reference, rtol=1e-4, atol=1e-4 * np.abs(reference).max())

    kinetic, potential = galaxy.energies(pos, vel, mass)
    r = np.sqrt(np.sum(d * d, axis=-1) + galaxy.EPS2)
    ref_potential = -np.sum(np.triu(mass[:, None] * mass[None, :] / r, 1))
    ref_kinetic = 0.5 * np.sum(mass * np.sum(vel.astype(np.float64) ** 2, axis=1))
    assert float(kinetic) == pytest.approx(ref_kinetic, rel=1e-5)
    assert float(potential) == pytest.approx(ref_potential, rel=1e-5)


def test_galaxy_energy_and_momentum_are_conserved(galaxy: ModuleType) -> None:
    pos, vel, mass, _ = galaxy.encounter(256, seed=2)
    acc = np.zeros_like(pos)
    galaxy.accelerations(pos, mass, acc)
    kinetic0, potential0 = (float(e) for e in galaxy.energies(pos, vel, mass))
    momentum0 = (mass[:, None] * vel).sum(axis=0)
    start = pos.copy()
    galaxy.leapfrog(pos, vel, acc, mass, 0.01, 100)
    kinetic1, potential1 = (float(e) for e in galaxy.energies(pos, vel, mass))
    assert np.abs(pos - start).max() > 0.1
    assert abs((kinetic1 + potential1) - (kinetic0 + potential0)) < 1e-3 * kinetic0
    momentum1 = (mass[:, None] * vel).sum(axis=0)
    assert np.abs(momentum1 - momentum0).max() < 1e-4


def test_galaxy_splat_deposits_every_star(galaxy: ModuleType) -> None:
    """Bilinear weights sum to one per star; atomic adds must lose none of them."""
    rng = np.random.default_rng(5)
    n = 20000
    pos = rng.normal(0.0, 0.3, size=(n, 3)).astype(np.float32)    # many share pixels
    ids = (np.arange(n) % 2).astype(np.int32)
    density = np.zeros((32, 32, 2), np.float32)
    galaxy.splat(pos, ids, np.eye(3, dtype=np.float32), 16.0, density)

    x = 16.0 + 16.0 * pos[:, 0] - 0.5
    y = 16.0 - 16.0 * pos[:, 1] - 0.5
    inside = (np.floor(x) >= 0) & (np.floor(y) >= 0) & (np.floor(x) + 1 < 32) & (
        np.floor(y) + 1 < 32)
    assert inside.sum() > n // 2
    for g in (0, 1):
        assert density[:, :, g].sum() == pytest.approx(np.sum(inside & (ids == g)), rel=1e-4)


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


def test_galaxy_kernels_match_their_python_reference(galaxy: ModuleType) -> None:
    pos, vel, mass, _ = galaxy.encounter(48, seed=3)
    acc = np.zeros_like(pos)
    ref_acc = np.zeros_like(pos)
    galaxy.accelerations(pos, mass, acc)
    galaxy.accelerations.python(pos, mass, ref_acc)
    np.testing.assert_allclose(acc, ref_acc, rtol=1e-5, atol=1e-6)
    for value, ref in zip(galaxy.energies(pos, vel, mass),
                          galaxy.energies.python(pos, vel, mass), strict=True):
        assert float(value) == pytest.approx(float(ref), rel=1e-5)


def test_galaxy_splat_matches_its_python_reference(galaxy: ModuleType) -> None:
    pos, _, _, ids = galaxy.encounter(48, seed=3)
    camera = galaxy.rotation(-0.5, 0.0).astype(np.float32)
    density = np.zeros((24, 24, 2), np.float32)
    ref_density = np.zeros((24, 24, 2), np.float32)
    galaxy.splat(pos, ids, camera, 4.0, density)
    galaxy.splat.python(pos, ids, camera, 4.0, ref_density)
    np.testing.assert_allclose(density, ref_density, rtol=1e-5, atol=1e-6)


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


# --- SPH dam break --------------------------------------------------------------------


def test_sph_density_matches_brute_force_and_python_reference() -> None:
    """One step: the densities summed over the grid's neighbours are NumPy's all-pairs
    sums, and the whole step agrees with the kernel run as plain Python."""
    sph = load_gallery_module("sph_dam_break")
    spacing = 0.05
    x, v = sph.initial_state(spacing, (0.4, 0.3))
    x += np.random.default_rng(0).uniform(-0.2, 0.2, x.shape).astype(np.float32) * spacing
    h, rho0 = 3.0 * spacing, 1000.0
    mass = rho0 / sph.rest_density(spacing, h)
    constants = (1e-4, h, mass, rho0, 100.0, sph.VISCOSITY, *sph.TANK)
    runs = []
    for run in (sph.simulate, sph.simulate.python):
        state = [x.copy(), v.copy(), np.zeros(len(x), np.float32), np.zeros((1, 2), np.float32)]
        run(state[0], state[1], state[2], 1, *constants, state[3])
        runs.append(state)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    w = np.where(d2 <= np.float32(h) ** 2, (h * h - d2) ** 3, 0.0)
    expected = mass * 4.0 / (math.pi * h ** 8) * w.sum(1)
    np.testing.assert_allclose(runs[0][2], expected, rtol=1e-4)
    for compiled, reference in zip(*runs, strict=True):
        np.testing.assert_allclose(compiled, reference, rtol=1e-4, atol=1e-6)

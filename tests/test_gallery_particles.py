"""The gallery's particle simulations (Lennard-Jones, galaxy collision, SPH dam break):
their kernels agree with NumPy references, with physics (conservation laws) and with
their own plain-Python reference (``kernel.python``)."""

import math
from types import ModuleType

import numpy as np
import pytest
from kdsl_gallery_util import load_gallery_module

pytest.importorskip("PIL.Image")  # the scripts draw their pictures with Pillow

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

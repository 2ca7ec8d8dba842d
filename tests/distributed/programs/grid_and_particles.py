"""Run under ``mpiexec -n N``: checks kdsl.distributed on N ranks against one-process
references (computed on rank 0) and prints ``all checks passed on N ranks``.

Each check raises AssertionError on a mismatch; the abort hook then ends the job with a
non-zero status.
"""

import itertools
import os
import sys
from pathlib import Path

import numpy as np

import kdsl as kd
import kdsl.distributed as kdd
from kdsl.distributed import halo

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "gallery"))

import heat_diffusion as heat  # noqa: E402
import lennard_jones as lj  # noqa: E402
from mpi_runs import heat_diffusion as heat_mpi  # noqa: E402
from mpi_runs import lennard_jones as lj_mpi  # noqa: E402

WORLD = kdd.mpi().COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()


def padded_reference(field: np.ndarray, grid: kdd.Grid) -> np.ndarray:
    """What a local array holds after a halo exchange: the global field padded by the
    ghost width (wrapped on periodic axes, zero at closed edges), cut to this block."""
    g = grid.ghost
    padded = field
    for axis in range(grid.ndim):
        pad = [(0, 0)] * field.ndim
        pad[axis] = (g, g)
        padded = np.pad(padded, pad, mode="wrap" if grid.periodic[axis] else "constant")
    return padded[tuple(slice(s.start, s.stop + 2 * g) for s in grid.local_slices)]


def check_halo_exchange() -> None:
    rng = np.random.default_rng(3)
    cases = [((13,), True), ((11,), False), ((10, 9), True), ((9, 12), False),
             ((10, 9), (False, True)), ((6, 7, 5), (True, False, True)), ((6, 6, 8), False)]
    for (shape, periodic), ghost, dtype in itertools.product(cases, (1, 2),
                                                              (np.float32, kd.vec2)):
        grid = kdd.Grid(shape, ghost=ghost, periodic=periodic)
        trailing = () if dtype is np.float32 else (2,)
        field = rng.normal(size=shape + trailing).astype(np.float32) + 2.0    # never zero
        expected = padded_reference(field, grid)
        contiguous = grid.zeros(dtype)
        contiguous[grid.interior] = field[grid.local_slices]
        grid.halo_exchange(contiguous)
        grid.halo_exchange(contiguous)          # the persistent requests, reused
        assert np.array_equal(contiguous, expected), (shape, periodic, ghost)
        # C-contiguous arrays are sent from their own memory, by MPI datatypes
        assert all(isinstance(plan, halo.DirectPlan) for plan in grid._exchanges._plans.values())
        # a strided array (Fortran order) goes through the packed path
        strided = np.asfortranarray(np.zeros_like(contiguous))
        strided[grid.interior] = field[grid.local_slices]
        grid.halo_exchange(strided)
        assert np.array_equal(strided, expected), (shape, periodic, ghost, "strided")
        if not strided.flags.c_contiguous:
            last = next(reversed(grid._exchanges._plans.values()))
            assert isinstance(last, halo.PackedPlan)
        gathered = grid.gather(contiguous)
        if RANK == 0:
            assert np.array_equal(gathered, field)
        else:
            assert gathered is None
        scattered = grid.scatter(field if RANK == 0 else None)
        assert np.array_equal(scattered[grid.interior], field[grid.local_slices])


def check_width_one_of_two() -> None:
    grid = kdd.Grid((12, 10), ghost=2, periodic=True)
    field = np.arange(120, dtype=np.float64).reshape(12, 10) + 1.0
    a = grid.full(-1.0, np.float64)
    a[grid.interior] = field[grid.local_slices]
    grid.halo_exchange(a, width=1)
    expected = padded_reference(field, grid)
    inner = (slice(1, -1), slice(1, -1))
    assert np.array_equal(a[inner], expected[inner])
    # the outermost layer is untouched (only its corners inside the inner ring moved)
    assert np.all(a[0, :] == -1.0) and np.all(a[-1, :] == -1.0)


def expect_error(kind: type[Exception], words: str, call, *args, **kwargs) -> None:  # noqa: ANN001
    """``call(*args, **kwargs)`` raises ``kind`` with ``words`` in its message."""
    try:
        call(*args, **kwargs)
    except kind as error:
        assert words in str(error), (words, str(error))
    else:
        raise AssertionError(f"{call.__name__}{args} did not raise {kind.__name__}")


def check_bad_input() -> None:
    expect_error(ValueError, "1, 2 or 3 axes", kdd.Grid, (4, 4, 4, 4))
    expect_error(ValueError, "positive integers", kdd.Grid, (8, 0))
    expect_error(ValueError, "ghost", kdd.Grid, (8, 8), ghost=-1)
    expect_error(ValueError, "periodic", kdd.Grid, (8, 8), periodic=(True,))
    expect_error(ValueError, "dims", kdd.Grid, (8, 8), dims=(SIZE + 1, 1))
    expect_error(ValueError, "too small", kdd.Grid, (SIZE * 2 - 1,), ghost=2)
    grid = kdd.Grid((8 * SIZE, 6), ghost=1)
    a = grid.zeros(np.float32)
    expect_error(ValueError, "width", grid.halo_exchange, a, width=2)
    expect_error(ValueError, "shape", grid.halo_exchange, a[1:])
    expect_error(ValueError, "shape", grid.gather, a[:, 1:])
    pos = np.zeros((3, 2), np.float32)
    expect_error(ValueError, "positions", kdd.Particles, grid, np.zeros((3, 3), np.float32))
    expect_error(ValueError, "box", kdd.Particles, grid, pos, box=(1.0, -1.0))
    expect_error(ValueError, "'vel'", kdd.Particles, grid, pos, vel=np.zeros((2, 2)))
    particles = kdd.Particles(grid, pos)
    expect_error(ValueError, "cutoff", particles.ghosts, -1.0)
    expect_error(ValueError, "unknown particle fields", particles.ghosts, 1.0, fields=("m",))
    expect_error(TypeError, "allreduce", kdd.allreduce, "text")


def check_reductions() -> None:
    assert kdd.allreduce(RANK + 1) == SIZE * (SIZE + 1) // 2
    assert kdd.allreduce(float(RANK), op="max") == float(SIZE - 1)
    total = kdd.allreduce(np.float32(0.5))
    assert isinstance(total, np.float32) and total == np.float32(0.5 * SIZE)
    vector = kdd.allreduce(np.array([RANK, -RANK], np.int64), op="min")
    assert vector.tolist() == [0, -(SIZE - 1)]
    # bools combine as Python's and NumPy's sum (a count), min (all) and max (any)
    assert kdd.allreduce(RANK == 0) == 1 and kdd.allreduce(True) == SIZE
    assert kdd.allreduce(RANK == 0, op="max") is True
    assert kdd.allreduce(RANK == 0, op="min") is (SIZE == 1)
    flags = np.array([True, RANK == 0, False])
    assert kdd.allreduce(flags).tolist() == [SIZE, 1, 0]
    assert kdd.allreduce(flags, op="min").tolist() == [True, SIZE == 1, False]
    assert kdd.allreduce(flags, op="max").dtype == np.bool_
    assert kdd.allreduce(np.bool_(True), op="prod") == np.True_
    try:
        kdd.allreduce(1.0, op="mean")
    except ValueError as error:
        assert "op" in str(error)
    else:
        raise AssertionError("allreduce accepted op='mean'")


def check_cuda_arrays() -> None:
    """CUDA arrays (the emulated device, whose memory the host can read) exchange like
    host arrays: staged through host buffers for an MPI that is not CUDA-aware, and
    handed to MPI through ``__cuda_array_interface__`` when it claims to be."""
    if os.environ.get("KDSL_CUDA_EMULATOR") != "1":
        return
    for aware, (shape, periodic, dtype) in itertools.product(
            ("0", "1"), (((12, 10), (True, False), kd.vec2), ((7, 6, 5), True, np.float64))):
        os.environ["KDSL_MPI_CUDA_AWARE"] = aware
        assert kdd.cuda_aware() == (aware == "1")
        grid = kdd.Grid(shape, ghost=1, periodic=periodic)
        host = grid.zeros(dtype)
        host[grid.interior] = np.random.default_rng(RANK).normal(
            size=host[grid.interior].shape)
        device = kd.array(host, device="cuda")
        grid.halo_exchange(host)
        grid.halo_exchange(device)
        assert np.array_equal(device.numpy(), host), aware
        from_device, from_host = grid.gather(device), grid.gather(host)
        assert RANK != 0 or np.array_equal(from_device, from_host)
        filled = grid.full(2.5, dtype, device="cuda")
        assert filled.device == "cuda" and filled.shape == host.shape
        assert np.array_equal(filled.numpy(), grid.full(2.5, dtype))
    del os.environ["KDSL_MPI_CUDA_AWARE"]


@kd.kernel
def life_step(src: kd.Array[kd.u8, 2], dst: kd.Array[kd.u8, 2]):
    """Conway's game of life on the interior of a local array with one ghost layer (the
    mpi4py tutorials' stencil: every cell reads its 8 neighbours, corners included)."""
    for i, j in kd.ndrange(src.shape[0] - 2, src.shape[1] - 2):
        alive = 0
        for di in range(3):
            for dj in range(3):
                if di != 1 or dj != 1:
                    alive += kd.i32(src[i + di, j + dj])
        me = src[i + 1, j + 1]
        dst[i + 1, j + 1] = kd.u8(1) if alive == 3 or (alive == 2 and me == 1) else kd.u8(0)


@kd.kernel
def box_blur_3d(src: kd.Array[kd.f64, 3], dst: kd.Array[kd.f64, 3]):
    """The mean of the 27 cells around each interior cell (a 3-D stencil with corners)."""
    for i, j, k in kd.ndrange(src.shape[0] - 2, src.shape[1] - 2, src.shape[2] - 2):
        total = 0.0
        for a in range(3):
            for b in range(3):
                for c in range(3):
                    total += src[i + a, j + b, k + c]
        dst[i + 1, j + 1, k + 1] = total / 27.0


def life_reference(board: np.ndarray, steps: int) -> np.ndarray:
    for _ in range(steps):
        alive = sum(np.roll(board, (di, dj), axis=(0, 1))
                    for di in (-1, 0, 1) for dj in (-1, 0, 1) if di or dj)
        board = ((alive == 3) | ((alive == 2) & (board == 1))).astype(np.uint8)
    return board


def check_stencil_programs() -> None:
    """Stencil codes as mpi4py users write them, on every rank count bit for bit the
    single-process result: a periodic game of life (a glider crosses the block edges and
    the box's corners) and a 27-point blur in 3-D with one closed axis."""
    board = np.zeros((20, 18), np.uint8)
    board[1:4, 1:4] = [[0, 1, 0], [0, 0, 1], [1, 1, 1]]             # a glider
    board[10:13, 12] = 1                                             # a blinker
    board[15:17, 2:4] = 1                                            # a block
    grid = kdd.Grid(board.shape, ghost=1, periodic=True)
    a, b = grid.zeros(np.uint8), grid.zeros(np.uint8)
    a[grid.interior] = board[grid.local_slices]
    for _ in range(45):
        grid.halo_exchange(a)
        life_step(a, b)
        a, b = b, a
    result = grid.gather(a)
    assert RANK != 0 or np.array_equal(result, life_reference(board, 45))
    field = np.random.default_rng(8).random((9, 8, 10))
    grid3 = kdd.Grid(field.shape, ghost=1, periodic=(True, False, True))
    u, v = grid3.zeros(np.float64), grid3.zeros(np.float64)
    u[grid3.interior] = field[grid3.local_slices]
    expected = field
    for _ in range(3):
        grid3.halo_exchange(u)
        box_blur_3d(u, v)
        u, v = v, u
        padded = expected
        for axis, wraps in enumerate(grid3.periodic):    # zero ghosts at the closed edges
            pad = [(0, 0)] * 3
            pad[axis] = (1, 1)
            padded = np.pad(padded, pad, mode="wrap" if wraps else "constant")
        expected = sum(padded[a:a + 9, b:b + 8, c:c + 10] for a in range(3) for b in range(3)
                       for c in range(3)) / 27.0
    assert np.array_equal(u[grid3.interior], expected[grid3.local_slices])


def check_heat_solver() -> None:
    """The distributed SOR equals the single-process solve bit for bit."""
    n = 40
    grid = kdd.Grid((n, n), ghost=1)
    kind, u = heat_mpi.make_block(grid, n)
    iterations, change = heat_mpi.solve_distributed(grid, u, kind, heat.optimal_omega(n),
                                                    1e-4, 60)
    u_global, kind_global = grid.gather(u), grid.gather(kind)
    if RANK != 0:
        return
    ref_kind = np.zeros((n, n), np.uint8)
    ref_u = np.zeros((n, n), np.float32)
    heat.build_scene(ref_kind, ref_u, *heat.default_scene())
    ref_iterations, ref_change = heat.solve(ref_u, ref_kind, heat.optimal_omega(n), 1e-4, 60)
    assert np.array_equal(kind_global, ref_kind)
    assert iterations == int(ref_iterations) and float(change) == float(ref_change)
    assert np.array_equal(u_global, ref_u), np.abs(u_global - ref_u).max()


def minimum_image_pairs(pos: np.ndarray, box: np.ndarray, periodic: tuple[bool, ...],
                        cutoff: float) -> np.ndarray:
    """For each particle, how many others lie within ``cutoff`` (minimum image)."""
    d = pos[:, None, :].astype(np.float64) - pos[None, :, :]
    for axis, wraps in enumerate(periodic):
        if wraps:
            d[..., axis] -= box[axis] * np.round(d[..., axis] / box[axis])
    r2 = np.sum(d * d, axis=-1)
    np.fill_diagonal(r2, np.inf)
    return np.sum(r2 < cutoff * cutoff, axis=1)


def check_particles() -> None:
    rng = np.random.default_rng(11)
    for cells, periodic, box, n in (((8, 8), True, (8.0, 6.0), 300),
                                    ((6, 5, 6), (True, False, True), (3.0, 2.5, 3.0), 200)):
        grid = kdd.Grid(cells, ghost=0, periodic=periodic)
        box_array = np.asarray(box)
        everything = (rng.random((n, len(cells))) * box_array).astype(np.float32)
        tags = np.arange(n, dtype=np.float64) * 10.0
        # every rank contributes a share: particles start on the wrong ranks
        mine = slice(RANK * n // SIZE, (RANK + 1) * n // SIZE)
        particles = kdd.Particles(grid, everything[mine], box=box, tag=tags[mine],
                                  ids=np.arange(n)[mine])
        assert particles.total() == n
        cutoff = 0.6
        for _ in range(3):
            lo, hi = particles.block_bounds(grid.coords)
            inside = np.all((particles.pos >= lo) & (particles.pos < hi), axis=1)
            assert inside.all() and np.all(np.diff(particles.ids) > 0)
            assert np.array_equal(particles["tag"], particles.ids * 10.0)
            # ghosts: the local particles with their ghosts see every neighbour within the
            # cutoff, no more, no fewer
            everyone = particles.gather()
            for shift in (True, False):
                ghosts = particles.ghosts(cutoff, fields=("tag",), shift_periodic=shift)
                assert np.array_equal(ghosts.fields["tag"], ghosts.ids * 10.0)
                near = np.concatenate([particles.pos, ghosts.pos])
                counted = minimum_image_pairs(near, box_array,
                                              (False,) * grid.ndim if shift else grid.periodic,
                                              cutoff)[:particles.n]
                counts = WORLD.gather((particles.ids, counted), root=0)
                if RANK == 0:
                    assert everyone is not None
                    reference = minimum_image_pairs(everyone[0], box_array, grid.periodic,
                                                    cutoff)
                    ids = np.concatenate([c[0] for c in counts])
                    values = np.concatenate([c[1] for c in counts])
                    assert np.array_equal(np.sort(ids), np.arange(n))
                    assert np.array_equal(values, reference[ids]), (shift, periodic)
            # move everything, across blocks and across the periodic edges
            step = rng.normal(scale=0.8, size=particles.pos.shape).astype(np.float32)
            closed = [axis for axis, wraps in enumerate(grid.periodic) if not wraps]
            step[:, closed] = 0.0
            particles.pos += step
            particles.migrate()
            assert particles.total() == n


def all_images_pairs(pos: np.ndarray, box: np.ndarray, periodic: tuple[bool, ...],
                     cutoff: float) -> np.ndarray:
    """For each particle, how many images of the others (and of itself) lie within
    ``cutoff``, every image counted (for a cutoff longer than half the box)."""
    reach = [int(cutoff // length) + 1 if wraps else 0 for length, wraps in zip(box, periodic)]
    total = np.zeros(len(pos), np.int64)
    for image in itertools.product(*(range(-k, k + 1) for k in reach)):
        d = pos[:, None, :].astype(np.float64) - pos[None, :, :] + np.asarray(image) * box
        r2 = np.sum(d * d, axis=-1)
        if not any(image):
            np.fill_diagonal(r2, np.inf)
        total += np.sum(r2 < cutoff * cutoff, axis=1)
    return total


def check_particles_on_edges() -> None:
    """Particles on the blocks' edges, on the box's edges and a hair below 0 end up in
    ``[0, box)`` on the rank owning them; their ghosts, for cutoffs up to longer than the
    box, give every rank count the same neighbours."""
    for cells, periodic, box in (((12, 6), True, (3.6, 4.2)), ((9,), True, (2.7,)),
                                 ((10, 4, 6), (True, False, True), (1.0, 1.0, 1.0))):
        grid = kdd.Grid(cells, ghost=0, periodic=periodic)
        box_array = np.asarray(box)
        corners = [np.arange(c + 1) * (b / c) for c, b in zip(cells, box)]
        lattice = np.stack(np.meshgrid(*corners, indexing="ij"), -1).reshape(-1, len(cells))
        below = np.array([[-1e-9] * len(cells), [-3e-8] * len(cells)])
        everything = np.concatenate([lattice, below]).astype(np.float32)
        for axis, wraps in enumerate(grid.periodic):
            if not wraps:
                everything[:, axis] = np.clip(everything[:, axis], 0.0, box[axis] * 0.999)
        n = len(everything)
        mine = slice(RANK * n // SIZE, (RANK + 1) * n // SIZE)
        particles = kdd.Particles(grid, everything[mine], box=box, ids=np.arange(n)[mine])
        assert particles.total() == n
        lo, hi = particles.block_bounds(grid.coords)
        assert np.all((particles.pos >= 0) & (particles.pos < box_array.astype(np.float32)))
        assert np.all(particles.pos >= lo.astype(np.float32) - 1e-6)
        everyone = particles.gather()
        for cutoff in (0.27, 1.23):   # no pair at exactly the cutoff
            ghosts = particles.ghosts(cutoff)
            near = np.concatenate([particles.pos, ghosts.pos])
            counted = all_images_pairs(near, box_array, (False,) * grid.ndim,
                                       cutoff)[:particles.n]
            counts = WORLD.gather((particles.ids, counted), root=0)
            if RANK == 0:
                assert everyone is not None
                reference = all_images_pairs(everyone[0], box_array, grid.periodic, cutoff)
                ids = np.concatenate([c[0] for c in counts])
                values = np.concatenate([c[1] for c in counts])
                assert np.array_equal(values, reference[ids]), (cells, cutoff)


def check_lennard_jones() -> None:
    """A few distributed steps match the single-process run within float rounding."""
    system = lj.initial_state(400, 0.3, 0.3, seed=4) if RANK == 0 else None
    reference = None
    if RANK == 0:
        reference = lj.make_system(system.pos.copy(), system.vel.copy(), system.box)
    state = lj_mpi.DistributedSystem(system)
    history = state.run(15, 0.005, 0.3, tau=0.5)
    history = np.concatenate([history, state.run(15, 0.005)])
    final = state.gather()
    if RANK != 0:
        return
    ref_history = np.concatenate([lj.run(reference, 15, 0.005, 0.3, tau=0.5),
                                  lj.run(reference, 15, 0.005)])
    assert final is not None and final.n == reference.n
    np.testing.assert_allclose(final.pos, reference.pos, rtol=0, atol=1e-4)
    np.testing.assert_allclose(final.vel, reference.vel, rtol=0, atol=1e-4)
    np.testing.assert_allclose(history, ref_history, rtol=1e-4, atol=1e-3)


def main() -> None:
    check_halo_exchange()
    check_width_one_of_two()
    check_reductions()
    check_bad_input()
    check_cuda_arrays()
    check_heat_solver()
    check_stencil_programs()
    check_particles()
    check_particles_on_edges()
    check_lennard_jones()
    WORLD.Barrier()
    if RANK == 0:
        print(f"all checks passed on {SIZE} ranks")


if __name__ == "__main__":
    main()

"""Distributed runs over MPI (mpi4py): a global grid split over the ranks with ghost
layers and halo exchange, global reductions and gathers, and particles that migrate
between the ranks' subdomains with ghost copies near their edges.

    import kdsl.distributed as kdd
    grid = kdd.Grid((1024, 1024), ghost=1, periodic=False)
    u = grid.zeros(kd.f32)            # this rank's block plus one ghost layer
    step(u)                           # the same kernels as a single-process run
    grid.halo_exchange(u)
    total = kdd.allreduce(energy(u), op="sum")
    picture = grid.gather(u)          # the global array on rank 0, None elsewhere

Run with ``mpiexec -n 4 python script.py`` (or ``srun``). Importing this module makes an
uncaught exception on any rank abort the whole job, and, unless KDSL_NUM_THREADS is set,
gives each rank its share of the node's cores.
"""

from kdsl.distributed.cartesian import Grid, split_extent
from kdsl.distributed.collectives import allreduce
from kdsl.distributed.halo import cuda_aware
from kdsl.distributed.mpi_runtime import install_abort_on_error, mpi, share_cores_between_ranks
from kdsl.distributed.particles import Ghosts, Particles

__all__ = ["Ghosts", "Grid", "Particles", "allreduce", "cuda_aware", "install_abort_on_error",
           "rank", "size", "split_extent"]


def rank(comm: object = None) -> int:
    """This process's rank in ``comm`` (default ``MPI.COMM_WORLD``)."""
    from kdsl.distributed.mpi_runtime import default_comm

    return int(default_comm(comm).Get_rank())


def size(comm: object = None) -> int:
    """The number of ranks in ``comm`` (default ``MPI.COMM_WORLD``)."""
    from kdsl.distributed.mpi_runtime import default_comm

    return int(default_comm(comm).Get_size())


mpi()
install_abort_on_error()
share_cores_between_ranks()

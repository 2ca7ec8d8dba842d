"""Run under ``mpiexec -n 2``: rank 1 raises while rank 0 waits for it in a collective.
Without the abort hook the job would hang; with it, it exits with a non-zero status."""

import kdsl.distributed as kdd

world = kdd.mpi().COMM_WORLD
if world.Get_rank() == 1:
    raise RuntimeError("rank 1 failed on purpose")
world.Barrier()
print("rank 0 passed the barrier")

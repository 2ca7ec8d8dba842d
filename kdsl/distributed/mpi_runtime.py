"""MPI itself: importing mpi4py, the default communicator, ending the whole job when one
rank raises, and the default number of threads per rank."""

from __future__ import annotations

import os
import sys
import traceback
from types import ModuleType, TracebackType
from typing import Any

_INSTALL_HINT = ("kdsl.distributed needs mpi4py and an MPI library: pip install 'kdsl[mpi]' "
                 "(mpi4py and the mpich wheel), or mpi4py built against the cluster's MPI")


def mpi() -> ModuleType:
    """The ``mpi4py.MPI`` module (MPI is initialised on first import)."""
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise ImportError(_INSTALL_HINT) from error
    return MPI


def default_comm(comm: Any = None) -> Any:
    """``comm``, or ``MPI.COMM_WORLD`` when it is None."""
    return mpi().COMM_WORLD if comm is None else comm


_previous_excepthook = sys.excepthook


def _abort_on_uncaught(kind: type[BaseException], value: BaseException,
                       tb: TracebackType | None) -> None:
    """Prints the traceback, then ends every rank: the others would wait forever for
    messages this one will never send."""
    world = mpi().COMM_WORLD
    if kind is KeyboardInterrupt or world.Get_size() == 1:
        _previous_excepthook(kind, value, tb)
        return
    rank = world.Get_rank()
    text = "".join(traceback.format_exception(kind, value, tb))
    sys.stderr.write(f"rank {rank} of {world.Get_size()} raised; aborting the job\n{text}")
    sys.stderr.flush()
    sys.stdout.flush()
    world.Abort(1)


def install_abort_on_error() -> None:
    """Makes an uncaught exception on any rank abort the whole job (``MPI.Abort``), so the
    job exits with an error instead of hanging. Installed when kdsl.distributed is imported;
    idempotent."""
    if sys.excepthook is not _abort_on_uncaught:
        global _previous_excepthook
        _previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught


def ranks_on_this_node(comm: Any = None) -> int:
    """How many ranks of ``comm`` share this rank's node (its shared-memory group)."""
    MPI = mpi()
    node = default_comm(comm).Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return int(node.Get_size())
    finally:
        node.Free()


def share_cores_between_ranks() -> None:
    """Without KDSL_NUM_THREADS, each rank's parallel loops use its share of the node's
    cores (cores available / ranks on the node, at least 1), not all of them."""
    if os.environ.get("KDSL_NUM_THREADS"):
        return
    from kdsl.runtime.threads import get_num_threads, set_num_threads

    ranks = ranks_on_this_node()
    if ranks > 1:
        set_num_threads(max(1, get_num_threads() // ranks))

"""What compiled code and the runtime agree on: the status array, error codes, the
sites of run-time errors and the names of a module's symbols. (No LLVM here: loading
cached code needs only this.)"""

from __future__ import annotations

from kdsl.ir.location import SourceLocation
from kdsl.records import dataclass

# the runtime's entry points, in the order of the table the init function receives
HOOK_ORDER = ("print", "parallel", "thread_num", "num_threads", "requested_threads", "allocate",
              "release", "cuda_launch", "cuda_copy_to_host", "cuda_functions", "gemm")
STATUS_SLOTS = 4  # error code, site, index, size; return values follow


class ErrorCode:
    INDEX = 1
    ASSERT = 2
    MEMORY = 3
    SHAPE = 4
    VALUE = 5
    LAUNCH = 6  # a CUDA driver call failed: the index slot holds its CUresult


@dataclass(frozen=True)
class Site:
    """Where a run-time error can be raised: for messages after the kernel returns."""

    kind: int
    location: SourceLocation
    detail: str


def init_symbol(entry_name: str) -> str:
    return f"{entry_name}_init"

"""The error a failed CUDA driver call raises, from the real driver or the emulator."""

from __future__ import annotations

from typing import Any


class CudaError(RuntimeError):
    """A CUDA driver call failed; ``name`` is the ``CUresult`` (``"CUDA_ERROR_..."``),
    ``code`` its value and ``call`` the driver function."""

    def __init__(self, name: str, code: int, call: str, description: str = "") -> None:
        self.name = name
        self.code = code
        self.call = call
        self.description = description
        detail = f" ({description})" if description else ""
        super().__init__(f"{call} failed with {name}{detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.code, self.call, self.description))

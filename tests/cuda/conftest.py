"""A fake CUDA driver for testing host-side logic without a GPU.

"Device memory" is host memory, so copies are memmoves, and the addresses the compiled
host program passes around can be read here. Launches are recorded rather than run (no
PTX executes); a test can give a launch an effect (say, writing known block partials)
to check what the host program does with its results. The C entry points the host
program calls (cuLaunchKernel, cuMemcpyDtoH_v2) are ctypes callbacks.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kdsl.runtime.cuda.emulator import COPY_T, LAUNCH_T, HostMemoryDriver


@dataclass
class Launch:
    name: str
    grid: tuple[int, int]
    block: int
    params: Any  # void** (valid during the launch only)

    def parameter(self, k: int, ctype: Any = ctypes.c_uint64) -> Any:
        """The k-th kernel parameter's value."""
        return ctypes.cast(self.params[k], ctypes.POINTER(ctype))[0]


@dataclass
class FakeDriver(HostMemoryDriver):
    modules: list[str] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    effects: dict[str, Callable[[Launch], int]] = field(default_factory=dict)
    fail_with: int = 0

    def __post_init__(self) -> None:
        self._launch = LAUNCH_T(self._on_launch)
        self._copy = COPY_T(self._on_copy)

    def device_name(self) -> str:
        return "fake GPU"

    def load_module(self, image: bytes | str) -> int:
        text = image.decode() if isinstance(image, bytes) else image
        self.modules.append(text.rstrip("\0"))
        return len(self.modules)

    def get_function(self, module: int, name: str) -> int:
        assert f".entry {name}(" in self.modules[module - 1], f"no kernel {name} in the PTX"
        handle = 0x1000 + len(self.names)
        self.names[handle] = name
        return handle

    def c_function_addresses(self) -> dict[str, int]:
        return {"cuLaunchKernel": ctypes.cast(self._launch, ctypes.c_void_p).value,
                "cuMemcpyDtoH_v2": ctypes.cast(self._copy, ctypes.c_void_p).value}

    # --- the C entry points -------------------------------------------------------------
    def _on_launch(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> int:
        launch = Launch(self.names[f], (gx, gy), bx, params)
        self.launches.append(launch)
        if self.fail_with:
            return self.fail_with
        for pattern, effect in self.effects.items():
            if pattern in launch.name:
                return effect(launch)
        return 0

    def _on_copy(self, dst, src, nbytes) -> int:
        ctypes.memmove(dst, src, nbytes)
        return 0


@pytest.fixture
def fake_driver():
    from kdsl.runtime.cuda import driver

    fake = FakeDriver()
    previous = driver.current_driver()
    driver.set_driver(fake)
    yield fake
    driver.set_driver(previous)


_EMULATOR: Any = None


@pytest.fixture
def emulated_device():
    """kdsl's emulated CUDA device (one for the session: modules stay loaded)."""
    global _EMULATOR
    from kdsl.runtime.cuda import driver
    from kdsl.runtime.cuda.emulator import EmulatedDriver

    if _EMULATOR is None:
        _EMULATOR = EmulatedDriver()
    previous = driver.current_driver()
    driver.set_driver(_EMULATOR)
    yield _EMULATOR
    driver.set_driver(previous)

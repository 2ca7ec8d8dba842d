"""libNVVM: NVVM IR to PTX, and ``ptxas`` to check that PTX assembles.

libNVVM is reached through ``cuda.bindings.nvvm`` (cuda-python). Which library it loads
is decided here, before that module is imported: ``KDSL_NVVM`` (a path to
``libnvvm.so``), else a CUDA toolkit (``CUDA_HOME``, ``CUDA_PATH``, the toolkit of the
``ptxas`` on ``PATH``, ``/usr/local/cuda``), else the ``nvidia-nvvm`` wheel. A toolkit is
preferred so that the PTX it makes is of a version its own ``ptxas`` (and a driver of the
same release) accepts. libdevice comes from the same place as libNVVM.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

DEFAULT_ARCH = (9, 0)
_lock = threading.Lock()


class NvvmUnavailable(RuntimeError):
    """libNVVM, libdevice or cuda-python is not installed."""


def _toolkit_roots() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    ptxas = shutil.which("ptxas")
    if ptxas:
        roots.append(str(Path(ptxas).resolve().parent.parent))
    roots.append("/usr/local/cuda")
    return [Path(r) for r in roots if r]


def _toolkit_nvvm() -> tuple[Path, Path] | None:
    for root in _toolkit_roots():
        for lib in ("lib64/libnvvm.so.4", "lib64/libnvvm.so", "nvvm/lib64/libnvvm.so",
                    "lib/libnvvm.so"):
            path = root / lib
            libdevice = root / "nvvm" / "libdevice" / "libdevice.10.bc"
            if path.exists() and libdevice.exists():
                return path, libdevice
    return None


@functools.cache
def _libraries() -> tuple[Any, bytes]:
    """``cuda.bindings.nvvm`` bound to the chosen libNVVM, and libdevice's bitcode."""
    chosen = os.environ.get("KDSL_NVVM")
    libdevice: Path | None = None
    if chosen:
        path = Path(chosen)
        for candidate in (path.parent.parent / "nvvm" / "libdevice" / "libdevice.10.bc",
                          path.parent.parent / "libdevice" / "libdevice.10.bc"):
            if candidate.exists():
                libdevice = candidate
    else:
        found = _toolkit_nvvm()
        if found is not None:
            path, libdevice = found
            chosen = str(path)
    if chosen:
        try:  # loaded first, so that cuda.bindings.nvvm uses this copy
            ctypes.CDLL(chosen, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise NvvmUnavailable(f"cannot load libNVVM from {chosen}: {e}") from None
    try:
        from cuda.bindings import nvvm
    except ImportError:
        raise NvvmUnavailable(
            "CUDA code generation needs cuda-python and libNVVM: pip install 'kdsl[cuda]'"
        ) from None
    if libdevice is None:
        try:
            import cuda.pathfinder as pathfinder

            libdevice = Path(pathfinder.find_bitcode_lib("device"))
        except Exception as e:  # noqa: BLE001 - any failure means: not found
            raise NvvmUnavailable(f"libdevice was not found ({e}); pip install 'kdsl[cuda]'") from None
    try:
        nvvm.version()
    except Exception as e:  # noqa: BLE001
        raise NvvmUnavailable(f"libNVVM could not be loaded: {e}") from None
    return nvvm, libdevice.read_bytes()


def nvvm_version() -> str:
    nvvm, _ = _libraries()
    return ".".join(map(str, nvvm.version())) + " ir " + ".".join(map(str, nvvm.ir_version()))


def compile_ptx(nvvm_ir: str, arch: tuple[int, int] = DEFAULT_ARCH, fastmath: bool = True) -> str:
    """PTX for ``compute_<arch>`` from NVVM IR text (libdevice linked lazily)."""
    nvvm, libdevice = _libraries()
    options = [f"-arch=compute_{arch[0]}{arch[1]}", "-opt=3"]
    if fastmath:
        options += ["-ftz=0", "-prec-div=1", "-prec-sqrt=1", "-fma=1"]
    else:
        options += ["-ftz=0", "-prec-div=1", "-prec-sqrt=1", "-fma=0"]
    text = nvvm_ir.encode()
    with _lock:
        program = nvvm.create_program()
        try:
            nvvm.add_module_to_program(program, text, len(text), "kernel")
            nvvm.lazy_add_module_to_program(program, libdevice, len(libdevice), "libdevice")
            try:
                nvvm.compile_program(program, len(options), options)
            except Exception as e:  # noqa: BLE001 - nvvmError: attach the log
                raise RuntimeError(f"libNVVM rejected the generated IR: {e}\n{_log(nvvm, program)}") from None
            size = nvvm.get_compiled_result_size(program)
            buffer = bytearray(size)
            nvvm.get_compiled_result(program, buffer)
        finally:
            nvvm.destroy_program(program)
    return bytes(buffer).rstrip(b"\0").decode()


def _log(nvvm: Any, program: Any) -> str:
    size = nvvm.get_program_log_size(program)
    buffer = bytearray(size)
    nvvm.get_program_log(program, buffer)
    return bytes(buffer).rstrip(b"\0").decode(errors="replace")


def ptx_version(ptx: str) -> tuple[int, int]:
    match = re.search(r"^\.version (\d+)\.(\d+)", ptx, re.M)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def with_ptx_version(ptx: str, version: tuple[int, int]) -> str:
    """The same PTX declared as an older ISA version (for a driver older than libNVVM;
    the code kdsl generates uses nothing newer than sm_90's PTX 7.8)."""
    return re.sub(r"^\.version \d+\.\d+", f".version {version[0]}.{version[1]}", ptx, count=1,
                  flags=re.M)


def ptxas() -> str | None:
    path = shutil.which("ptxas")
    if path:
        return path
    for root in _toolkit_roots():
        candidate = root / "bin" / "ptxas"
        if candidate.exists():
            return str(candidate)
    return None


def ptx_isa_for_cuda(version: int) -> tuple[int, int]:
    """The newest PTX ISA that CUDA ``version`` (1000 * major + 10 * minor: a driver's or
    a toolkit's) reads: 11.x reads 7.x, 12.x reads 8.x, 13.x reads 9.x."""
    major, minor = version // 1000, (version % 1000) // 10
    if major >= 13:
        return (9, minor)
    if major == 12:
        return (8, min(minor, 8))
    if major == 11:
        return (7, min(minor, 8))
    return (6, 0)


@functools.cache
def _ptxas_isa(tool: str) -> tuple[int, int]:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"release (\d+)\.(\d+)", out)
    if not match:
        return (99, 0)
    return ptx_isa_for_cuda(1000 * int(match.group(1)) + 10 * int(match.group(2)))


def check_with_ptxas(ptx: str, arch: tuple[int, int] = DEFAULT_ARCH) -> None:
    """Assembles PTX with ``ptxas``; RuntimeError with its messages when it fails. PTX
    from a newer libNVVM than the ``ptxas`` is declared at the ISA version it reads."""
    tool = ptxas()
    if tool is None:
        raise RuntimeError("ptxas is not installed")
    if ptx_version(ptx) > _ptxas_isa(tool):
        ptx = with_ptx_version(ptx, _ptxas_isa(tool))
    with tempfile.TemporaryDirectory(prefix="kdsl-ptxas-") as tmp:
        source = Path(tmp, "kernel.ptx")
        source.write_text(ptx)
        result = subprocess.run([tool, f"-arch=sm_{arch[0]}{arch[1]}", str(source), "-o",
                                 str(Path(tmp, "kernel.cubin"))], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ptxas rejected the PTX:\n{result.stderr}")

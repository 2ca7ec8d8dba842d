"""Programs on the PATH, files of unique names and scratch folders, without the
``shutil`` and ``tempfile`` modules: a first compile needs these, and importing those two
(with what they import: bz2, lzma, random, fnmatch) costs it about 2.5 ms."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


def which(program: str) -> str | None:
    """The first executable file named ``program`` in the folders of ``PATH`` (as
    ``shutil.which`` finds it on POSIX systems); None where there is none."""
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    for folder in dict.fromkeys(folders):
        path = os.path.join(folder or os.curdir, program)
        if os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path):
            return path
    return None


def unique_file(folder: str, prefix: str, suffix: str = "") -> tuple[int, str]:
    """A new file in ``folder`` (readable and writable by its owner only), opened for
    writing: its descriptor and path, as ``tempfile.mkstemp`` gives them."""
    while True:
        path = os.path.join(folder, f"{prefix}{os.urandom(8).hex()}{suffix}")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), path
        except FileExistsError:  # pragma: no cover - 64 random bits
            continue


def temporary_root() -> str:
    """The folder for temporary files: ``TMPDIR`` where set, otherwise ``/tmp`` where it
    is a writable folder, otherwise the one the ``tempfile`` module finds."""
    for folder in (os.environ.get("TMPDIR"), "/tmp"):
        if folder and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return folder
    import tempfile

    return tempfile.gettempdir()


@contextmanager
def scratch_folder(prefix: str) -> Iterator[str]:
    """A new folder (its owner's only) for the files of the block, removed with them
    after it (one level: the block makes no folders in it)."""
    root = temporary_root()
    while True:
        path = os.path.join(root, f"{prefix}{os.urandom(8).hex()}")
        try:
            os.mkdir(path, 0o700)
            break
        except FileExistsError:  # pragma: no cover - 64 random bits
            continue
    try:
        yield path
    finally:
        for name in os.listdir(path):
            try:
                os.unlink(os.path.join(path, name))
            except OSError:
                pass
        try:
            os.rmdir(path)
        except OSError:
            pass

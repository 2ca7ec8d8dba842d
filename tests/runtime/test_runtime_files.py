"""The small file helpers of a first compile: ``which`` finds what ``shutil.which`` finds,
``unique_file`` makes new private files, ``scratch_folder`` is removed with its files."""

import os
import shutil
import stat

import kdsl.files as files


def test_which_finds_what_shutil_finds(monkeypatch, tmp_path):
    for program in ("ld", "sh", "ls", "no-such-program-kdsl"):
        assert files.which(program) == shutil.which(program)
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    (tmp_path / "folder").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert files.which("tool") is None  # not executable
    tool.chmod(0o755)
    assert files.which("tool") == str(tool) == shutil.which("tool")
    assert files.which("folder") is None


def test_unique_files_are_new_and_private(tmp_path):
    made = set()
    for _ in range(20):
        fd, path = files.unique_file(str(tmp_path), ".tmp-", ".so")
        os.write(fd, b"x")
        os.close(fd)
        assert os.path.basename(path).startswith(".tmp-") and path.endswith(".so")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        made.add(path)
    assert len(made) == 20


def test_a_scratch_folder_goes_with_its_files(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with files.scratch_folder("kdsl-link-") as folder:
        assert os.path.dirname(folder) == str(tmp_path)
        for name in ("kernel.o", "kernel.so"):
            with open(os.path.join(folder, name), "wb") as f:
                f.write(b"data")
    assert not os.path.exists(folder)
    assert os.listdir(tmp_path) == []


def test_an_unusable_tmpdir_falls_back(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    assert os.path.isdir(files.temporary_root())

"""`FileSystem.replace_file`, the one way a file is replaced whole: the new bytes or the old,
never a part of either; exactly the mode asked for; the file and its folder fsynced before it
returns (unless told not to); and nothing left beside the file when any step fails."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from boxmaker.store import FileSystem

STEPS = ["create", "write", "fsync", "close", "rename", "fsync_dir"]


class Recording(FileSystem):
    """Notes each file operation by name; the one named `fail` raises `error` (after it was
    done, for `close`: the descriptor is not leaked)."""

    def __init__(self, fail: str = "", error: BaseException | None = None) -> None:
        self.fail = fail
        self.error = error or OSError(errno.ENOSPC, "No space left on device")
        self.ops: list[str] = []

    def _op(self, name: str) -> None:
        self.ops.append(name)
        if name == self.fail:
            raise self.error

    def create(self, path: Path) -> int:
        self._op("create")
        return super().create(path)

    def write(self, fd: int, data: bytes) -> int:
        self._op("write")
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self._op("fsync")
        super().fsync(fd)

    def close(self, fd: int) -> None:
        super().close(fd)
        self._op("close")

    def rename(self, source: Path, target: Path) -> None:
        self._op("rename")
        super().rename(source, target)

    def fsync_dir(self, path: Path) -> None:
        self._op("fsync_dir")
        super().fsync_dir(path)


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("there", [True, False], ids=["replaced", "new"])
def test_the_file_holds_the_new_bytes_and_nothing_is_left_beside_it(
    tmp_path: Path, there: bool
) -> None:
    path = tmp_path / "grants.json"
    if there:
        path.write_bytes(b"the old grants, longer than the new")
    FileSystem().replace_file(path, b"new")
    assert path.read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["grants.json"]


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444])
def test_the_file_has_exactly_the_mode_asked_for_whatever_the_umask(
    tmp_path: Path, mode: int
) -> None:
    path = tmp_path / "policy.toml"
    path.write_bytes(b"old")
    path.chmod(0o666)
    with umask(0o077):  # narrower than 0640 and 0444: the mode asked for holds all the same
        FileSystem().replace_file(path, b"new", mode=mode)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_the_file_is_its_owner_s_alone_unless_another_mode_is_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    with umask(0):
        FileSystem().replace_file(path, b"{}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_file_and_then_its_folder_are_fsynced_before_it_returns(tmp_path: Path) -> None:
    fs = Recording()
    fs.replace_file(tmp_path / "grants.json", b"new")
    assert fs.ops == STEPS  # the file's fsync before the rename, the folder's after it


def test_without_sync_neither_the_file_nor_the_folder_is_fsynced(tmp_path: Path) -> None:
    fs = Recording()
    fs.replace_file(tmp_path / "index.json", b"{}", sync=False)
    assert fs.ops == ["create", "write", "close", "rename"]
    assert (tmp_path / "index.json").read_bytes() == b"{}"


@pytest.mark.parametrize("step", STEPS[:-1])
def test_a_failed_step_leaves_the_old_file_and_nothing_beside_it(tmp_path: Path, step: str) -> None:
    path = tmp_path / "server.json"
    path.write_bytes(b"old")
    with pytest.raises(OSError, match="No space left"):
        Recording(fail=step).replace_file(path, b"new")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["server.json"]


def test_an_interruption_mid_write_leaves_the_old_file_and_nothing_beside_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bxctl-history"
    path.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        Recording(fail="write", error=KeyboardInterrupt()).replace_file(path, b"new")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["bxctl-history"]


def test_a_failed_fsync_of_the_folder_is_raised_after_the_file_was_replaced(
    tmp_path: Path,
) -> None:
    path = tmp_path / "grants.json"
    path.write_bytes(b"old")
    with pytest.raises(OSError, match="No space left"):
        Recording(fail="fsync_dir").replace_file(path, b"new")
    assert path.read_bytes() == b"new"  # renamed already; whether it lasts is not known
    assert os.listdir(tmp_path) == ["grants.json"]

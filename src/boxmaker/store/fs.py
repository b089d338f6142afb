"""The file operations the store uses, in one small object, so tests can fail any of them,
and `storage_errors`, the one place where an `OSError` becomes a `StorageError` naming a file.

Everything is a plain blocking call. No file is opened through a symbolic link, and an
existing file is used only if loopd's user alone can write it (`trust.open_checked`).
`FileSystem.replace_file` is the project's one way to replace a file whole (a session's
`index.json` and kept results, brokerd's grants and `policy.toml`, loopd's hints, bxctl's
history): the daemons and bxctl call it outside the store too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from .. import layout
from ..session import StorageError
from .trust import open_checked

__all__ = ["TORN_COPIES", "FileSystem", "storage_errors"]

TORN_COPIES = 999  # torn tails kept of one file at one offset (a stuck writer, not a person)


@contextlib.contextmanager
def storage_errors(path: Path, *, reading: bool = False) -> Iterator[None]:
    """Raise an `OSError` of the block as a `StorageError` naming `path` (what the system
    said, "No space left on device"), the `OSError` as its cause."""
    try:
        yield
    except OSError as exc:
        raise StorageError(path, exc.strerror or str(exc), reading=reading) from exc


class FileSystem:
    def makedirs(self, path: Path) -> None:
        os.makedirs(path, mode=0o700, exist_ok=True)

    def mkdir(self, path: Path) -> None:
        os.mkdir(path, 0o700)

    def create(self, path: Path) -> int:
        """Open a new file for writing; it must not exist (not even as a link)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(path, flags, 0o600)

    def open_append(self, path: Path) -> int:
        """Open an existing file to read it and append to it.

        Raises:
            Exposed: a link, or not loopd's user's alone.
        """
        return open_checked(path, os.O_RDWR | os.O_APPEND)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def write_all(self, fd: int, data: bytes) -> None:
        """Write all of `data`; after a short write the next one says why (ENOSPC)."""
        while data:
            written = self.write(fd, data)
            if written <= 0:
                raise OSError(errno.EIO, "the disk took no bytes")
            data = data[written:]

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def write_new(self, path: Path, data: bytes) -> None:
        """Create `path` (it must not exist) with `data`, fsynced, closed."""
        fd = self.create(path)
        try:
            self.write_all(fd, data)
            self.fsync(fd)
        finally:
            self.close(fd)

    def keep_torn(self, path: Path, tail: bytes, end: int) -> Path:
        """Keep `tail`, the bytes of a write to `path` cut short at `end`, in a new file beside
        it (`layout.torn_name`, numbered after those kept before), durably; where.

        Raises:
            FileExistsError: `TORN_COPIES` are kept already (nothing is thrown away for it).
        """
        for copy in range(1, TORN_COPIES + 1):
            aside = path.with_name(layout.torn_name(path.name, end, copy))
            try:
                self.write_new(aside, tail)
            except FileExistsError:
                if copy == TORN_COPIES:
                    raise
                continue
            self.fsync_dir(path.parent)
            return aside
        raise AssertionError("unreachable")

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def close(self, fd: int) -> None:
        os.close(fd)

    def rename(self, source: Path, target: Path) -> None:
        os.rename(source, target)

    def unlink(self, path: Path) -> None:
        os.unlink(path)

    def fsync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace_file(
        self, path: Path, data: bytes, *, mode: int = 0o600, sync: bool = True
    ) -> None:
        """Replace `path` with a file holding `data`, atomically: a reader sees the old file or
        the new one, never a part of either. The new file is written beside it under a name of
        its own (`layout.partial_name`, created exclusively, never through a link), given
        exactly `mode` (whatever the umask), fsynced, renamed over `path`, and the folder
        fsynced: after a crash, `path` is the old file or the whole new one.

        `sync=False` leaves out both fsyncs, for a hint that is written often or in an event
        loop and that nothing needs after a crash (`index.json` after each turn, loopd's
        `server.json`): a crash may then leave the old file, the new one or an empty one.

        Raises:
            OSError: from the file system; `path` is as it was (unless only the folder's
                fsync failed), and the new file is gone.
        """
        partial = path.with_name(layout.partial_name(path.name, secrets.token_hex(4)))
        fd = self.create(partial)
        try:
            try:
                os.fchmod(fd, mode)
                self.write_all(fd, data)
                if sync:
                    self.fsync(fd)
            finally:
                self.close(fd)
            self.rename(partial, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise
        if sync:
            self.fsync_dir(path.parent)

    def lock(self, fd: int) -> bool:
        """Take the file's exclusive lock if no other open file holds it; True if taken."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def read(self, path: Path) -> bytes:
        """The whole of a file.

        Raises:
            Exposed: a link, or not loopd's user's alone.
        """
        fd = open_checked(path, os.O_RDONLY)
        try:
            return self.read_all(fd)
        finally:
            os.close(fd)

    def read_first_line(self, path: Path, most: int = 1 << 16) -> bytes:
        """A file's first line with its newline (at most `most` bytes; all there is when it
        has none).

        Raises:
            Exposed: a link, or not loopd's user's alone.
        """
        fd = open_checked(path, os.O_RDONLY)
        try:
            data = os.pread(fd, most, 0)
        finally:
            os.close(fd)
        end = data.find(b"\n")
        return data if end < 0 else data[: end + 1]

    def read_if_there(self, path: Path) -> bytes | None:
        """`read`, or None when there is no such file."""
        try:
            return self.read(path)
        except FileNotFoundError:
            return None

    def read_all(self, fd: int, offset: int = 0) -> bytes:
        """What an open file holds from `offset` on (the whole of it by default)."""
        parts = []
        chunk = max(os.fstat(fd).st_size - offset, 1 << 16)  # all in one read, as a rule
        while part := os.pread(fd, chunk, offset):
            parts.append(part)
            offset += len(part)
        return b"".join(parts)

    def remove_tree(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def list_dir(self, path: Path) -> list[str]:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return []

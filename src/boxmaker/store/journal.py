"""An epoch's log open for appending: whole lines written in one `write` and made durable with
an `fsync` before anything else happens, or taken back out of the file (SPEC section 5).

The journal knows bytes and sizes only; what the lines mean is the session's. Before each
write it checks that the file at its path is still the one it holds open, of the size it
wrote (`trust.log_changed`): an editor's save, a removal or a cut would make appended turns
vanish or follow a gap. A write or fsync that fails leaves the file at the size the caller
names (the last durable record boundary), so the log always ends at a record boundary.
Blocking calls, each a few microseconds or one fsync.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..session import LogChanged, SessionError
from .fs import FileSystem, storage_errors
from .trust import log_changed

__all__ = ["Journal"]


class Journal:
    """The log at `path`, open as `fd` (read and append), `size` bytes written so far."""

    def __init__(self, fs: FileSystem, path: Path, fd: int, size: int) -> None:
        self._fs = fs
        self.path = path
        self._fd: int | None = fd
        self.size = size
        self.held = False  # the lock `bxctl rm` waits on

    @property
    def closed(self) -> bool:
        return self._fd is None

    def write(self, data: bytes, *, sync: bool, durable_size: int) -> None:
        """Write `data` at the end, then fsync unless not `sync` (`fsync` makes it durable).

        Raises:
            StorageError: naming the log; the file is cut back to `durable_size`.
            LogChanged: the log is no longer the file at its path, of the size written;
                nothing is written.
        """
        fd = self._open_fd()
        with storage_errors(self.path, reading=True):
            what = log_changed(fd, self.path, self.size)
        if what is not None:
            raise LogChanged(self.path, what)
        try:
            self._fs.write_all(fd, data)  # a short write's next one says why (ENOSPC)
            if sync:
                self._fs.fsync(fd)
        except OSError as exc:
            self._fail(exc, durable_size)
        self.size += len(data)

    def fsync(self, *, durable_size: int) -> None:
        """Make what was written durable.

        Raises:
            StorageError: naming the log; the file is cut back to `durable_size`.
        """
        try:
            self._fs.fsync(self._open_fd())
        except OSError as exc:
            self._fail(exc, durable_size)

    def truncate(self, size: int) -> None:
        """Cut the log back to `size` bytes, durably.

        Raises:
            StorageError: naming the log, when the cut cannot be made durable.
        """
        fd = self._open_fd()
        with storage_errors(self.path):
            self._fs.truncate(fd, size)
            self._fs.fsync(fd)
        self.size = size

    def _fail(self, exc: OSError, durable_size: int) -> None:
        """A write or fsync failed: cut the file back to its last durable record boundary
        (the first reason is the one that matters), then raise it."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self._fs.truncate(self._fd, durable_size)
        self.size = durable_size
        with storage_errors(self.path):
            raise exc

    def changed(self) -> bool:
        """Whether the log is no longer the one this journal wrote (removed, replaced, cut or
        grown by another writer since)."""
        if self._fd is None:
            return True
        try:
            return log_changed(self._fd, self.path, self.size) is not None
        except OSError:
            return True

    def lock(self) -> bool:
        """Take the log's lock for a turn; False when another process holds it."""
        self.held = self._fd is not None and self._fs.lock(self._fd)
        return self.held

    def unlock(self) -> None:
        if self._fd is not None:
            self._fs.unlock(self._fd)
        self.held = False

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._fs.close(fd)

    def _open_fd(self) -> int:
        if self._fd is None:
            raise SessionError(f"{self.path} is closed")
        return self._fd

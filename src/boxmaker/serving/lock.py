"""One loopd per home (and per socket): an exclusive `flock` on a file, held while it runs.

The lock is taken before loopd touches anything else, so a second loopd refused on it changes
nothing (it used to sweep the first one's half-made sessions away before it learnt it was not
alone). The kernel drops the lock when the process ends, however it ends, so a stale lock
cannot exist. The holder writes its pid into the file once it has the lock; a refused loopd
reads it back to name the holder (or, in the microseconds before the holder has written it,
finds the holder in `/proc/locks`). The file is never removed: removing a lock file lets two
processes lock two different files of the same name. The descriptor that holds the lock is
open for reading only (the pid is written through another, closed at once): a file open for
writing would keep the home's file system from being remounted read-only.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from ..store import open_checked

__all__ = ["Locked", "PidLock", "take_lock"]


class Locked(Exception):
    """Another process holds the lock; `pid` is that process (None if it could not be told)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        who = f"pid {pid}" if pid is not None else "a process whose pid is not known"
        super().__init__(f"{path} is locked by {who}")


class PidLock:
    """A held lock; `release()` lets it go (as the process's end does)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):  # a read-only disk keeps the pid: it is harmless
                _write(self.path, b"")  # no pid of a process that no longer holds it
            os.close(fd)  # closing the last descriptor drops the lock


def take_lock(path: Path) -> PidLock:
    """Take the exclusive lock on `path` (created 0600 if absent) or fail at once.

    Raises:
        Locked: another process holds it.
        Exposed: the file is a link, or not loopd's user's alone.
        OSError: the file cannot be opened or made.
    """
    fd = open_checked(path, os.O_RDONLY | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        held = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
        holder = _holder(fd) if held else None
        os.close(fd)
        if held:
            raise Locked(path, holder) from exc
        raise
    try:
        _write(path, f"{os.getpid()}\n".encode())
    except BaseException:
        os.close(fd)
        raise
    return PidLock(path, fd)


def _write(path: Path, data: bytes) -> None:
    fd = open_checked(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _holder(fd: int) -> int | None:
    """The pid the holder wrote, else the one `/proc/locks` gives for the file."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    if text.isdigit():
        return int(text)
    st = os.fstat(fd)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            for line in table:  # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == where:
                    return int(fields[4]) if fields[4].isdigit() else None
    except OSError:
        pass
    return None

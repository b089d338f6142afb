"""A root as a `Manifest` (`snapshot`), each file's bytes copied into the objects store. Read
race-free and never through a link; a blocking call, made before and after every tool call
that may change the root. The pure half, what a manifest is and how two compare, is
`manifest.py`; putting one back is `restore.py`.

Strategy: no path string is ever built and opened. The root is opened by its path with
`O_NOFOLLOW` and checked to be the folder it was granted as; every folder below it is opened
relative to the one above (`O_DIRECTORY | O_NOFOLLOW`) and listed with `os.scandir(fd)`. A
symbolic link is recorded with its target text and nothing is read through it; a FIFO, socket
or device is recorded as kind "other" and never opened; a file is opened with
`O_NOFOLLOW | O_NONBLOCK` and checked on its descriptor to be a regular file. Folders named in
`skip` (roots closed to this one) are neither entered nor recorded; a folder on another file
system (a mount inside the root) is recorded as an empty folder and not entered, so an undo
never reaches into it. What vanishes or changes kind during the walk is left out, as if the
walk had come a moment later.

The stat cache (`StatCache`) spares reading a file again whose device, inode, size,
modification and change times are all as they were and whose blob is still stored. It cannot
see a change that leaves all five alone: one made while the clock is set back, or on a file
system that does not keep change times. A file changed in the 2 s before the walk is never
cached (git's racy-timestamp rule), as a write in the same clock tick would look unchanged.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Collection, Iterator
from pathlib import Path

from attrs import frozen

from .errors import CheckpointError
from .manifest import Entry, Manifest
from .objects import Objects

__all__ = [
    "RACY_NS",
    "Identity",
    "OverBounds",
    "Seen",
    "StatCache",
    "amount",
    "between",
    "open_root",
    "snapshot",
]

RACY_NS = 2_000_000_000  # a file changed this close to a walk's start is read again next time
Identity = tuple[int, int]  # (st_dev, st_ino)
_ROOT = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# Gone or swapped between listing and opening: left out, as if the walk came a moment later.
_GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENXIO, errno.EINVAL)


@frozen
class OverBounds:
    """The root holds too much to be checkpointed; `reason` says what, as "holds more than
    100,000 files" (the caller names the root)."""

    reason: str


@frozen
class Seen:
    """What the stat cache knows of one file: its stat as read, and its bytes' SHA-256."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    sha256: str


class StatCache:
    """The files of one root as the last whole walk saw them (path -> `Seen`); a snapshot
    replaces them when it finishes, and leaves them when it stops early."""

    def __init__(self) -> None:
        self.lines: dict[str, Seen] = {}


def snapshot(
    root: Path,
    identity: Identity | None,
    objects: Objects,
    *,
    skip: Collection[Identity] = (),
    max_files: int,
    max_bytes: int,
    cache: StatCache,
    now_ns: int | None = None,
) -> Manifest | OverBounds:
    """Everything beneath `root` as a manifest, each new file's bytes stored in `objects`.
    `identity` is the root's (st_dev, st_ino) as granted (None: not checked); `skip`, the
    identities of folders inside it never entered (roots closed to it). Stops early with
    `OverBounds` past `max_files` entries (folders, links and all) or `max_bytes` of files.
    `now_ns` is the walk's start on the wall clock (tests move it; None: now).

    Raises:
        CheckpointError: the root is not a folder, or not the one it was granted as; or the
            file system fails (the message names the path).
    """
    started = time.time_ns() if now_ns is None else now_ns
    root_fd = open_root(root, identity, "no checkpoint is taken")
    try:
        walk = _Walk(objects, set(skip), max_files, max_bytes, cache, started)
        try:
            over = walk.run(root_fd)
        except OSError as exc:
            raise CheckpointError(f"cannot snapshot {walk.at or '.'} in {root}: {exc}") from exc
    finally:
        os.close(root_fd)
    if over is not None:
        return over
    cache.lines = walk.seen
    return walk.manifest


def open_root(root: Path, identity: Identity | None, otherwise: str) -> int:
    """`root` opened as a folder, not through a link, and checked to be the folder
    `identity` names (None: not checked); the caller closes it.

    Raises:
        CheckpointError: it cannot be opened as a folder, or is another folder now
            (`otherwise` says what is not done then).
    """
    try:
        fd = os.open(root, _ROOT)
    except OSError as exc:
        raise CheckpointError(
            f"{root} cannot be opened as a folder ({exc.strerror}): {otherwise}"
        ) from exc
    st = os.fstat(fd)
    if identity is not None and (st.st_dev, st.st_ino) != identity:
        os.close(fd)
        raise CheckpointError(
            f"{root} is no longer the folder it was granted as (moved or replaced since "
            f"brokerd started): {otherwise}"
        )
    return fd


def between(path: str) -> None:
    """Called by the walk between the stat of `path` and its open: a seam for the tests that
    swap a file or a folder for a link at that very moment (they replace it on this module).
    Does nothing."""


def amount(size: int) -> str:
    """`size` bytes in the largest binary unit that holds it whole: "1 GiB", "3,000 bytes"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size and size % (1 << shift) == 0:
            return f"{size >> shift:,} {unit}"
    return f"{size:,} bytes"


class _Walk:
    """One walk's state: what it found, what it counted, and the stat cache it makes."""

    def __init__(
        self,
        objects: Objects,
        skip: set[Identity],
        max_files: int,
        max_bytes: int,
        cache: StatCache,
        started: int,
    ) -> None:
        self.objects, self.skip, self.cache = objects, skip, cache
        self.max_files, self.max_bytes = max_files, max_bytes
        self.started, self.dev = started, -1
        self.manifest: Manifest = {}
        self.seen: dict[str, Seen] = {}
        self.files = self.bytes = 0
        self.at = ""  # the path being read, for an error's message

    def run(self, root_fd: int) -> OverBounds | None:
        self.dev = os.fstat(root_fd).st_dev
        stack: list[tuple[int, str, Iterator[str]]] = [(root_fd, "", _names(root_fd))]
        try:
            while stack:
                fd, base, pending = stack[-1]
                name = next(pending, None)
                if name is None:
                    stack.pop()
                    if stack:  # the root's descriptor is the caller's
                        os.close(fd)
                    continue
                self.at = f"{base}/{name}" if base else name
                found = self._one(fd, name, self.at)
                if isinstance(found, OverBounds):
                    return found
                if found is not None:
                    stack.append((found, self.at, _names(found)))
        finally:
            for fd, _, _ in stack[1:]:
                os.close(fd)
        return None

    def _one(self, fd: int, name: str, path: str) -> int | OverBounds | None:
        """Record `name` (in the folder `fd`); a folder to enter, opened, or why to stop."""
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        between(path)
        if stat.S_ISDIR(st.st_mode):
            return self._folder(fd, name, path)
        if self._count():
            return OverBounds(f"holds more than {self.max_files:,} files")
        if stat.S_ISREG(st.st_mode):
            return self._file(fd, name, path, st)
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _GONE:
                    return None
                raise
            self.manifest[path] = _entry_of("link", st, target=target)
        else:
            self.manifest[path] = _entry_of("other", st)
        return None

    def _count(self) -> bool:
        """Count one more entry; whether that is one too many."""
        self.files += 1
        return self.files > self.max_files

    def _folder(self, fd: int, name: str, path: str) -> int | OverBounds | None:
        try:
            sub = os.open(name, _FOLDER, dir_fd=fd)
        except OSError as exc:
            if exc.errno in _GONE:
                return None
            raise
        held = os.fstat(sub)  # the folder opened, whatever the stat saw a moment before
        if (held.st_dev, held.st_ino) in self.skip:
            os.close(sub)
            return None  # a root closed to this one: not a trace of it
        if self._count():
            os.close(sub)
            return OverBounds(f"holds more than {self.max_files:,} files")
        self.manifest[path] = _entry_of("dir", held)
        if held.st_dev != self.dev:
            os.close(sub)
            return None  # another file system mounted here: recorded, never entered
        return sub

    def _file(self, fd: int, name: str, path: str, st: os.stat_result) -> OverBounds | None:
        self.bytes += st.st_size
        if self.bytes > self.max_bytes:
            return self._too_big()
        line = self.cache.lines.get(path)
        if line is not None and line == _seen(st, line.sha256) and self.objects.has(line.sha256):
            self.seen[path] = line
            self.manifest[path] = _entry_of("file", st, size=st.st_size, sha256=line.sha256)
            return None
        try:
            source = os.open(name, _FILE, dir_fd=fd)
        except OSError as exc:
            if exc.errno in _GONE:
                return None
            raise
        try:
            held = os.fstat(source)
            if not stat.S_ISREG(held.st_mode):
                return None  # swapped for a FIFO or such since the stat: never read
            got = self.objects.put_file_from_fd(
                source, most=self.max_bytes - self.bytes + st.st_size
            )
        finally:
            os.close(source)
        if got is None:
            return self._too_big()
        sha, size = got
        self.bytes += size - st.st_size
        if (
            size == held.st_size
            and max(held.st_mtime_ns, held.st_ctime_ns) < self.started - RACY_NS
        ):
            self.seen[path] = _seen(held, sha)
        self.manifest[path] = _entry_of("file", held, size=size, sha256=sha)
        return None

    def _too_big(self) -> OverBounds:
        return OverBounds(f"holds more than {amount(self.max_bytes)}")


def _names(fd: int) -> Iterator[str]:
    """The names in the folder `fd`, listed at once (the listing is closed before any is
    read, so only one descriptor per level of the walk is open)."""
    with os.scandir(fd) as listing:
        return iter([item.name for item in listing])


def _entry_of(
    kind: str, st: os.stat_result, *, size: int = 0, sha256: str = "", target: str = ""
) -> Entry:
    mode = stat.S_IMODE(st.st_mode)
    return Entry(kind, mode, st.st_uid, st.st_gid, size, sha256, target, st.st_mtime_ns)


def _seen(st: os.stat_result, sha256: str) -> Seen:
    return Seen(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, sha256)

"""A session's origin index on disk (`<id>/origins.jsonl`; its lines: `session/origins.py`):
read once, then brought forward from where it stopped, never by reading a log twice.

`refresh` reads each log from the index's mark to its end (a few lines: what was written
since the last look), notes the origins of the `user` records there, and appends their lines
and a new mark. An index that is missing, damaged, of another session under the same id (the
folder is another), or whose mark no longer stands where it says (the log was cut back) is
built again from the logs, whole. `recorded` reads an origin's turn from its place on. Each
call blocks (loopd runs them in a worker thread, one at a time per session); the index is a
hint, written without an fsync: what it says is checked against the log before it is
believed, and what it lost is found in the log again.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .. import layout
from ..proto import DecodeError, LogRecord, Origin, TurnEndRecord, UserRecord
from ..session import (
    USER_PREFIX,
    Mark,
    Place,
    Recorded,
    line_hash,
    line_record,
    mark_line,
    place_line,
    read_index_line,
    recorded,
)
from .fs import FileSystem
from .identity import identity_of
from .trust import open_checked, stat_problem

__all__ = ["ORIGINS", "OriginIndex", "folder_id"]

ORIGINS = layout.ORIGINS


class _Stale(Exception):
    """The index's mark no longer stands in the log: it is built again."""


class OriginIndex:
    """The origins of the session in `folder`, as far as its logs have been read."""

    def __init__(self, fs: FileSystem, folder: Path) -> None:
        self._fs = fs
        self.folder = folder
        self.path = folder / ORIGINS
        self._places: dict[Origin, Place] = {}
        self._mark: Mark | None = None
        self.folder_id: str | None = None  # the session the index was read from

    def find(self, origin: Origin) -> Place | None:
        return self._places.get(origin)

    def of_channel(self, channel: str) -> list[Origin]:
        """The origins of one channel found so far (`refresh` first)."""
        return [origin for origin in self._places if origin.channel == channel]

    def refresh(self) -> None:
        """Read the logs on from the mark and write what was found.

        Raises:
            Exposed: a log or the index is not loopd's user's alone, or is a link.
            OSError: a file could not be read or written.
        """
        try:
            self._refresh()
        except BaseException:
            self.folder_id = None  # read again whole next time: never a half-read index
            raise

    def _refresh(self) -> None:
        now = folder_id(self.folder)
        if now is None:
            self._forget(None)
            return
        if self.folder_id != now:
            self._forget(now)
            whole = not self._load()
        else:
            whole = False
        epochs = layout.epochs_in(self._fs.list_dir(self.folder))
        try:
            found = self._scan(epochs)
        except _Stale:
            self._forget(self.folder_id)
            found, whole = self._scan(epochs), True
        if whole:
            self._fs.replace_file(self.path, b"".join(found), sync=False)
        elif found:
            fd = open_checked(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                self._fs.write_all(fd, b"".join(found))
            finally:
                os.close(fd)

    def recorded(self, origin: Origin, place: Place) -> Recorded | None:
        """How the turn of `origin` went, read from its place on; None when its `user` record
        is not there (the place is stale: it is forgotten).

        Raises:
            Exposed, OSError: the log could not be read.
        """
        records: list[LogRecord] = []
        path = self.folder / layout.log_name(place.epoch)
        try:
            for _at, line in _lines(path, place.at):
                record = line_record(line)
                if not records and not (isinstance(record, UserRecord) and record.origin == origin):
                    break
                records.append(record)
                if isinstance(record, TurnEndRecord):
                    break
        except DecodeError:
            records = []
        if not records:
            self._places.pop(origin, None)
            return None
        return recorded(records)

    def _forget(self, folder_id: str | None) -> None:
        self._places.clear()
        self._mark = None
        self.folder_id = folder_id

    def _load(self) -> bool:
        """Read the index file; False when it is missing or damaged (built again)."""
        try:
            data = self._fs.read(self.path)
        except FileNotFoundError:
            return False
        for line in data.splitlines(keepends=True):
            meaning = read_index_line(line) if line.endswith(b"\n") else None
            if meaning is None:
                self._forget(self.folder_id)
                return False
            if isinstance(meaning, Mark):
                self._mark = meaning
            else:
                origin, place = meaning
                self._places[origin] = place
        return True

    def _scan(self, epochs: list[int]) -> list[bytes]:
        """Read the logs from the mark on; the index's new lines (a mark last)."""
        mark = self._mark
        if mark is not None and mark.epoch not in epochs:
            raise _Stale
        found: list[bytes] = []
        for epoch in epochs:
            if mark is not None and epoch < mark.epoch:
                continue
            at_mark = mark is not None and epoch == mark.epoch
            start = mark.start if mark is not None and at_mark else 0
            checked = False
            for at, line in _lines(self.folder / layout.log_name(epoch), start):
                if at_mark and not checked:  # the mark's own line: still there, unchanged?
                    if mark is None or line_hash(line) != mark.hash:
                        raise _Stale
                    checked = True
                    continue
                if line.startswith(USER_PREFIX) and b'"origin":' in line:
                    found += self._noted(line, Place(epoch, at))
                if (digest := line_hash(line)) is not None:
                    self._mark = Mark(epoch, at, digest)
            if at_mark and not checked:
                raise _Stale
        if self._mark is not None and self._mark != mark:
            found.append(mark_line(self._mark))
        return found

    def _noted(self, line: bytes, place: Place) -> list[bytes]:
        try:
            record = line_record(line)
        except DecodeError:
            return []
        if not isinstance(record, UserRecord) or record.origin is None:
            return []
        self._places[record.origin] = place
        return [place_line(record.origin, place)]


def folder_id(folder: Path) -> str | None:
    """Which session is at `folder` now: its identity (the SHA-256 of its epoch 0's first
    line, which holds when it was made; "" while it has no readable log); None: no folder. A
    session removed and made again under its id is another, even in a folder of the same
    inode (which a file system reuses at once). A link, or a folder others may write, is no
    session here: the store refuses it, with the reason."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode) or stat_problem(st, folder=True) is not None:
        return None  # a link or a folder loopd does not trust is no session's (the store says)
    return identity_of(folder)


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[BinaryIO]:
    with os.fdopen(open_checked(path, os.O_RDONLY), "rb") as file:
        yield file


def _lines(path: Path, start: int) -> Iterator[tuple[int, bytes]]:
    """Each whole line of a log from byte `start` on (without its newline), with where it
    starts; a last line without its newline (being written) is left for the next look, and
    a `start` past the log's end gives none."""
    try:
        with _opened(path) as log:
            if start > os.fstat(log.fileno()).st_size:
                return
            log.seek(start)
            at = start
            for line in log:
                if not line.endswith(b"\n"):
                    return
                yield at, line[:-1]
                at += len(line)
    except FileNotFoundError:
        return

"""`<home>/memory/notes.jsonl`: the notes, one record a line, append only and hash-chained as
a session's log is (`session/chain.py`; line 1's `prev` is `GENESIS`), so a changed, removed or
reordered line is found, naming it.

Two processes write it, brokerd (`remember`, `forget`) and `bxctl memory` (`add`, `rm`), so
every append is made under the file's exclusive `flock`: read what is there, decide the record
from it (its id is the next), write it in one `write`, `fsync`, unlock. A last line without its
newline is a write cut short (never acknowledged): readers leave it out, and the next writer
moves it aside into `notes.jsonl.torn-<offset>` before it appends, as resume does for a log.
Files are opened without following a link and used only if they are their user's alone.
Blocking calls.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import time
from collections.abc import Callable
from pathlib import Path

from .. import layout
from ..proto import DecodeError, NotesRecord, dumps, parse_json, structure
from ..session import DEFAULT_TOKENS_PER_BYTE, Exposed, Link, StorageError, chain_break, seal
from ..store import (
    FileSystem,
    MemoryText,
    core_only,
    exposure,
    open_checked,
    storage_errors,
)
from .errors import NotesDamaged
from .notes import Notes, baseline_memory

__all__ = ["GENESIS", "NotesFile", "memory_reader", "memory_text", "parse_notes"]

GENESIS = hashlib.sha256(b"boxmaker notes").hexdigest()  # what line 1 of the chain follows
LOCK_WAIT_S = 10.0  # the longest a writer waits for another's append

Decide = Callable[[Notes], "NotesRecord | str"]


def parse_notes(
    data: bytes, path: Path, after: Link | None = None
) -> tuple[list[NotesRecord], Link, int]:
    """The records of the whole lines of `data`, where their chain ends, and the offset where
    the whole lines end (`len(data)` unless the last line has no newline: a write cut short).
    `after`: the line `data` follows (its number and hash), for a reader that keeps its place.

    Raises:
        NotesDamaged: naming the line that is not a chained note record.
    """
    records: list[NotesRecord] = []
    link, end = after or Link(0, GENESIS), 0
    for number, line in enumerate(io.BytesIO(data), link.seq + 1):
        if line[-1:] != b"\n":
            break
        try:
            value = parse_json(line[:-1])
        except DecodeError as exc:
            raise NotesDamaged(path, number, f"not a note record: {exc}") from exc
        if type(value) is not dict:
            raise NotesDamaged(path, number, "not a note record: not a JSON object")
        seq, prev, digest = value.pop("seq", None), value.pop("prev", None), value.pop("hash", None)
        broken = chain_break(line[:-1], seq, prev, digest, link.seq, link.hash)
        if broken is not None:
            raise NotesDamaged(path, number, f"{broken[0]}: {broken[1]}")
        try:
            records.append(structure(value, NotesRecord))
        except DecodeError as exc:
            raise NotesDamaged(path, number, f"not a note record: {exc}") from exc
        link, end = Link(seq, digest), end + len(line)
    return records, link, end


class NotesFile:
    """The notes of one home."""

    def __init__(self, home: Path, fs: FileSystem | None = None) -> None:
        self.path = layout.notes_file(home)
        self.folder = layout.memory_folder(home)
        self.fs = fs or FileSystem()

    def read(self) -> Notes:
        """The notes as their whole lines say (none when there is no file).

        Raises:
            NotesDamaged: a line is not a chained note record.
            Exposed: the file or its folder is a link, or not this user's alone.
            StorageError: the file cannot be read.
        """
        self._check_folder()
        with storage_errors(self.path, reading=True):
            data = self.fs.read_if_there(self.path)
        if data is None:
            return Notes()
        return Notes(tuple(parse_notes(data, self.path)[0]))

    def append(self, decide: Decide) -> NotesRecord | str:
        """Under the file's lock, append the record `decide` makes of the notes as they are
        (or write nothing, returning what it said instead); the record once durable.

        Raises:
            NotesDamaged: a line is not a chained note record; nothing is written.
            Exposed, StorageError: as `read`; a failed write is taken back out.
        """
        with storage_errors(self.folder):
            self.fs.makedirs(self.folder)
        self._check_folder()
        with storage_errors(self.path):
            fd = open_checked(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            self._lock(fd)
            with storage_errors(self.path):
                data = self.fs.read_all(fd)
            records, link, end = parse_notes(data, self.path)
            if end < len(data):
                self._set_aside(fd, data, end)
            made = decide(Notes(tuple(records)))
            if isinstance(made, str):
                return made
            line, _ = seal(dumps(made), link)
            self._write(fd, line, end, created=not data)
            return made
        finally:
            os.close(fd)  # the lock goes with it

    def _lock(self, fd: int) -> None:
        """The file's exclusive lock: another writer holds it for one append (a few
        milliseconds), so one that holds it for `LOCK_WAIT_S` is stuck, and said to be.

        Raises:
            StorageError: the lock was not free within `LOCK_WAIT_S`.
        """
        deadline = time.monotonic() + LOCK_WAIT_S
        with storage_errors(self.path):
            while not self.fs.lock(fd):
                if time.monotonic() > deadline:
                    said = f"another process has held its lock for {LOCK_WAIT_S:g} s"
                    raise StorageError(self.path, f"{said}; nothing was written")
                time.sleep(0.01)  # a blocking call, in a worker thread or bxctl

    def _write(self, fd: int, line: bytes, end: int, *, created: bool) -> None:
        try:
            with storage_errors(self.path):
                self.fs.write_all(fd, line)
                self.fs.fsync(fd)
                if created:
                    self.fs.fsync_dir(self.folder)
        except StorageError:
            with contextlib.suppress(OSError):
                self.fs.truncate(fd, end)
                self.fs.fsync(fd)
            raise

    def _set_aside(self, fd: int, data: bytes, end: int) -> None:
        """Keep a write cut short beside the file (durably), then cut the file back to `end`."""
        with storage_errors(self.path.with_name(layout.torn_name(self.path.name, end))):
            self.fs.keep_torn(self.path, data[end:], end)
        with storage_errors(self.path):
            self.fs.truncate(fd, end)
            self.fs.fsync(fd)

    def _check_folder(self) -> None:
        if (said := exposure(self.folder)) is not None:
            raise Exposed(self.folder, said)


def memory_text(home: Path, pinned_budget: int) -> tuple[str, str | None]:
    """The memory part of a baseline made now: `core.md`, then the pinned notes within
    `pinned_budget` characters (`notes.baseline_memory`); and, when the notes could not be
    read, why (they are then left out: a damaged notes file must not stop a conversation).

    Raises:
        Exposed: `core.md` or the memory folder is not this user's alone, or a link.
        StorageError: `core.md` cannot be read, or is not UTF-8.
    """
    text = core_only(home)()
    problem = None
    try:
        read = NotesFile(home).read()
    except (NotesDamaged, StorageError, Exposed) as error:
        read, problem = Notes(), str(error)
    return baseline_memory(text, read, pinned_budget), problem


def memory_reader(home: Path, pinned_tokens: int, warn: Callable[[str], None]) -> MemoryText:
    """What a store asks for the memory of each baseline it makes (`store.MemoryText`): the
    pinned notes within `pinned_tokens` (estimated at `DEFAULT_TOKENS_PER_BYTE`); `warn` is
    told when the notes were left out."""
    budget = int(pinned_tokens / DEFAULT_TOKENS_PER_BYTE)

    def memory() -> str:
        text, problem = memory_text(home, budget)
        if problem is not None:
            warn(f"the pinned notes are left out of the new baseline: {problem}")
        return text

    return memory

"""A file of a home that holds one record a line, append only and hash-chained as a session's
log is (`session/chain.py`; line 1's `prev` is the file's own genesis hash), so a changed,
removed or reordered line is found, naming it: the notes (`memory/notes.jsonl`) and the
schedules (`schedules.jsonl`).

Two processes write each (a daemon, and bxctl), so every append is made under the file's
exclusive `flock`: read what is there, decide the record from it, write it in one `write`,
`fsync`, unlock. A last line without its newline is a write cut short (never acknowledged):
readers leave it out, and the next writer moves it aside into `<name>.torn-<offset>` before it
appends, as resume does for a log. Files are opened without following a link and used only if
they are their user's alone. Blocking calls.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from attrs import frozen

from .. import layout
from ..proto import DecodeError, dumps, parse_json, structure
from ..session import Exposed, Link, StorageError, chain_break, seal
from .fs import FileSystem, storage_errors
from .trust import exposure, open_checked

__all__ = ["LOCK_WAIT_S", "Chain", "ChainedFile", "Damaged", "parse_chained"]

LOCK_WAIT_S = 10.0  # the longest a writer waits for another's append

R = TypeVar("R")
Damaged = Callable[[Path, int, str], Exception]  # (file, line, why): the file's own error


@frozen
class Chain(Generic[R]):
    """What a chained file holds: its `kind` of record (a tagged union) and what one is
    called (`note`), the hash its line 1 follows, and the error that names a damaged line."""

    kind: type[R]
    noun: str
    genesis: str
    damaged: Damaged


def parse_chained(
    data: bytes, path: Path, chain: Chain[R], after: Link | None = None
) -> tuple[list[R], Link, int]:
    """The `kind` records of the whole lines of `data`, where their chain ends, and the offset
    where the whole lines end (`len(data)` unless the last line has no newline: a write cut
    short). `after`: the line `data` follows (its number and hash), for a reader that keeps
    its place; else line 1 follows the chain's genesis.

    Raises:
        Exception: `chain.damaged(path, line, why)` for the first line that is not a chained
            record.
    """
    what, damaged = f"not a {chain.noun} record", chain.damaged
    records: list[R] = []
    link, end = after or Link(0, chain.genesis), 0
    for number, line in enumerate(io.BytesIO(data), link.seq + 1):
        if line[-1:] != b"\n":
            break
        try:
            value = parse_json(line[:-1])
        except DecodeError as exc:
            raise damaged(path, number, f"{what}: {exc}") from exc
        if type(value) is not dict:
            raise damaged(path, number, f"{what}: not a JSON object")
        seq, prev, digest = value.pop("seq", None), value.pop("prev", None), value.pop("hash", None)
        broken = chain_break(line[:-1], seq, prev, digest, link.seq, link.hash)
        if broken is not None:
            raise damaged(path, number, f"{broken[0]}: {broken[1]}")
        try:
            records.append(structure(value, chain.kind))
        except DecodeError as exc:
            raise damaged(path, number, f"{what}: {exc}") from exc
        link, end = Link(seq, digest), end + len(line)
    return records, link, end


class ChainedFile(Generic[R]):
    """One chained file of a home, at `path`."""

    def __init__(self, path: Path, chain: Chain[R], fs: FileSystem | None = None) -> None:
        self.path, self.folder, self.chain = path, path.parent, chain
        self.fs = fs or FileSystem()

    def parse(self, data: bytes, after: Link | None = None) -> tuple[list[R], Link, int]:
        """`parse_chained` for this file."""
        return parse_chained(data, self.path, self.chain, after)

    def read(self) -> tuple[R, ...]:
        """The records as the file's whole lines say (none when there is no file).

        Raises:
            Exception: the chain's `damaged` error: a line is not a chained record.
            Exposed: the file or its folder is a link, or not this user's alone.
            StorageError: the file cannot be read.
        """
        return tuple(self.read_from(0, None)[0])

    def read_from(self, offset: int, after: Link | None) -> tuple[list[R], Link, int]:
        """The records of the whole lines from `offset` on (where the lines up to `after`
        end), where their chain ends, and the offset where the whole lines end: a reader that
        keeps its place reads only what was appended since. Raises as `read`."""
        self._check_folder()
        with storage_errors(self.path, reading=True):
            data = self.fs.read_if_there(self.path)
        if data is None or len(data) < offset:  # no file, or not the file read before
            data, offset, after = data or b"", 0, None
        records, link, end = self.parse(data[offset:], after)
        return records, link, offset + end

    def append(self, decide: Callable[[tuple[R, ...]], R | str]) -> R | str:
        """Under the file's lock, append the record `decide` makes of the records as they are
        (or write nothing, returning what it said instead); the record once durable.

        Raises:
            Exception: the chain's `damaged` error; nothing is written.
            Exposed, StorageError: as `read`; a failed write is taken back out.
        """
        with self._locked() as fd:
            with storage_errors(self.path):
                data = self.fs.read_all(fd)
            records, link, end = self._whole_lines(fd, data, 0)
            made = decide(tuple(records))
            if isinstance(made, str):
                return made
            self._write(fd, seal(dumps(made), link)[0], end, created=not data)
            return made

    def append_known(self, record: R, offset: int, after: Link | None) -> None:
        """Append `record` as `append` does, reading only what follows `offset`, where the
        whole lines up to `after` end as a reader that keeps its place checked them: an append
        costs what was written since, not the whole file (loopd's `fired`, a year of them).
        Another file there (cut back, replaced: the chain does not go on from `after`) is
        read whole.

        Raises:
            Exception: the chain's `damaged` error; nothing is written.
            Exposed, StorageError: as `read`; a failed write is taken back out.
        """
        with self._locked() as fd:
            with storage_errors(self.path):
                size = os.fstat(fd).st_size
                if size < offset:
                    offset, after = 0, None
                data = self.fs.read_all(fd, offset)
            try:
                _, link, end = self._whole_lines(fd, data, offset, after)
            except Exception:  # not the file checked before: checked whole, as `append` does
                with storage_errors(self.path):
                    data, offset = self.fs.read_all(fd), 0
                _, link, end = self._whole_lines(fd, data, 0)
            self._write(fd, seal(dumps(record), link)[0], end, created=size == 0)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The file open for appending (made if missing, its folder too), under its lock."""
        with storage_errors(self.folder):
            self.fs.makedirs(self.folder)
        self._check_folder()
        with storage_errors(self.path):
            fd = open_checked(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            self._lock(fd)
            yield fd
        finally:
            os.close(fd)  # the lock goes with it

    def _whole_lines(
        self, fd: int, data: bytes, offset: int, after: Link | None = None
    ) -> tuple[list[R], Link, int]:
        """`data` (the file from `offset`) parsed, a write cut short set aside; where the whole
        lines end in the file."""
        records, link, end = self.parse(data, after)
        if end < len(data):
            self._set_aside(fd, data[end:], offset + end)
        return records, link, offset + end

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

    def _set_aside(self, fd: int, tail: bytes, end: int) -> None:
        """Keep a write cut short (`tail`, from `end`) beside the file, durably, then cut the
        file back to `end`."""
        with storage_errors(self.path.with_name(layout.torn_name(self.path.name, end))):
            self.fs.keep_torn(self.path, tail, end)
        with storage_errors(self.path):
            self.fs.truncate(fd, end)
            self.fs.fsync(fd)

    def _check_folder(self) -> None:
        if (said := exposure(self.folder)) is not None:
            raise Exposed(self.folder, said)

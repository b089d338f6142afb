"""One open session: its log file, appended to with the durability SPEC section 5 asks for,
and the state derived from its records (the next request's messages, the call counter, the
last usage). The store (`store.py`) makes and reads sessions; this is what a turn holds.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import NoReturn

import trio
from attrs import frozen

from ..proto import (
    Baseline,
    ChatMessage,
    EpochEndRecord,
    LogRecord,
    Outcome,
    SessionId,
    SessionStartRecord,
    Timestamp,
    ToolResultRecord,
    UsageRecord,
    dumps,
)
from ..session import (
    INTERRUPTED,
    Index,
    Link,
    Log,
    LogChanged,
    SessionError,
    StorageError,
    header,
    healing_records,
    index_of,
    messages_of,
    next_call,
    opening,
    os_reason,
    request_messages,
    seal,
    sha256_hex,
    turn_end,
    unended_turn,
)
from .epochs import write_epoch
from .fs import FileSystem
from .trust import log_changed

__all__ = ["INDEX_FILE", "Mark", "Session", "SetAside"]

INDEX_FILE = "index.json"


@frozen
class Mark:
    """A session's state at a moment: what `Session.cut_back` restores."""

    size: int
    records: int
    messages: int
    link: Link
    index: Index
    next_call: int
    last_usage: UsageRecord | None


@frozen
class SetAside:
    """An unfinished last write that resume moved out of the log into `path`: `size` bytes,
    holding `records` whole records (an `assistant` whose `usage` was cut) and a torn one."""

    path: Path
    size: int
    records: int


class Session:
    """One open session: its baseline, its records, and what derives from them.

    Only the turn that holds the session's lock uses it. The messages of the next request and
    the call counter are kept up to date as records are appended, so building a request never
    reads the log again.
    """

    def __init__(
        self,
        fs: FileSystem,
        session: SessionId,
        baseline: Baseline,
        log: Log,
        fd: int,
        size: int,
        log_path: Path,
        *,
        baseline_data: bytes,
        set_aside: SetAside | None = None,
    ) -> None:
        self.id = session
        self.set_aside = set_aside  # what resume moved out of the log
        self.remains: Path | None = None  # where create moved a folder that had no log
        self._fs = fs
        self.baseline = baseline
        self._baseline_data = baseline_data  # the file's bytes: each epoch's are the same
        self._fd: int | None = None
        self._held = False
        # loopd sets it: a turn's `index.json` is then written by `flush_index`, after the
        # answer went out, not in the append that ends the turn.
        self.defer_index = False
        self._index_due: Index | None = None
        self._load(log, fd, size, log_path)

    def _load(self, log: Log, fd: int, size: int, log_path: Path) -> None:
        """Take an epoch's log as the session's state (at creation, resume, a new epoch)."""
        self.records = log.records
        self.head = header(log.records)
        self.link = log.link  # where the hash chain ends: the next line follows it
        self.index = index_of(log.records, log.last_turn_end)
        self._chained_from = log.chained_from
        self.log_path = log_path
        self._fd = fd
        self._size = size  # bytes written (and fsynced, unless `_unsynced`)
        self._unsynced: Mark | None = None  # where records not yet fsynced begin
        self._messages: list[ChatMessage] = list(request_messages(self.baseline, self.records))
        self._next_call = next_call(self.records)
        # The cache is judged against the epoch's own completions only: a carried usage
        # record was made against another epoch's prompt.
        own = range(len(self.records) - 1, self.head.own_from - 1, -1)
        self._last_usage = next(
            (r for at in own if isinstance(r := self.records[at], UsageRecord)), None
        )

    @property
    def epoch(self) -> int:
        return self.head.epoch

    def request_messages(self) -> tuple[ChatMessage, ...]:
        """The next request's messages: the system text, then what the log gives."""
        return tuple(self._messages)

    def last_usage(self) -> UsageRecord | None:
        return self._last_usage

    def take_call(self) -> int:
        """The next tool-call number of this session (it increases across turns)."""
        call = self._next_call
        self._next_call += 1
        return call

    @property
    def slot(self) -> str:
        """The logical slot the session was created on (its `session_start` record)."""
        start = self.records[0]
        assert isinstance(start, SessionStartRecord)
        return start.slot

    def healing(self, now: Timestamp, content: str = INTERRUPTED) -> list[ToolResultRecord]:
        """An "interrupted, not run" result (or `content`) for each tool call left without
        one, numbered from the next call number (which they take once appended)."""
        return healing_records(self.records, now, self._next_call, self.baseline, content)

    async def heal(self, now: Timestamp) -> list[LogRecord]:
        """Close the turn loopd was in when it stopped: results for its tool calls left
        without one, then its `turn_end` (outcome `interrupted`). Returns what was appended."""
        unended = unended_turn(self.records, self._chained_from)
        healing: list[LogRecord] = [*self.healing(now)]
        if unended:
            spent = now.value - unended[0].time.value
            ms = max(0, round(spent.total_seconds() * 1000))
            healing.append(turn_end([*unended, *healing], now, Outcome.INTERRUPTED, ms))
        await self.append(*healing)
        return healing

    async def append(self, *records: LogRecord, durable: bool = True) -> None:
        """Write records in one write and make them durable (fsync) before anything else.

        The write happens in the event loop: an fsync here takes a few tenths of a millisecond,
        hardly more than a hop to a worker thread, and a record can then never be interrupted
        half-way. A cancel that is already pending is raised before writing.

        `durable=False` leaves the fsync to `sync()` (or to the next append's, which covers
        these bytes too): the turn writes its user message so, and makes it durable once the
        request is out, the disk and the server working at once (docs/decisions.md).

        Raises:
            StorageError: naming the log; nothing of these records is kept and the log ends
                at the record boundary before them.
            LogChanged: the log is no longer the file at its path, of the size written;
                nothing is written (and the session must be read again from disk).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        link, lines, index = self.link, [], self.index
        for record in records:
            line, link = seal(dumps(record), link)
            lines.append(line)
            index = index.after(record, link)
        if lines:
            self._write(b"".join(lines), durable)
            self.link = link
        for record in records:
            self.records.append(record)
            self._messages += messages_of(record, self.baseline.fenced)
            if isinstance(record, UsageRecord):
                self._last_usage = record
            elif isinstance(record, ToolResultRecord):
                self._next_call = max(self._next_call, record.call + 1)
        if index.turns != self.index.turns:  # a turn ended: the index follows the log
            if self.defer_index:
                self._index_due = index
            else:
                self._write_index(index)
        self.index = index

    def flush_index(self) -> None:
        """Write the `index.json` a turn's end left due (loopd: once its answer went out, so
        the replace is not on the way of `turn_done`). The index is a hint the log outranks:
        one left behind by a stop in between is one turn behind, as `verify` allows.

        Raises:
            StorageError: naming the index file.
        """
        if (due := self._index_due) is not None:
            self._index_due = None
            self._write_index(due)

    def mark(self) -> Mark:
        """Where the session is now, to `cut_back` to."""
        return Mark(
            self._size, len(self.records), len(self._messages), self.link, self.index,
            self._next_call, self._last_usage,
        )  # fmt: skip

    def cut_back(self, mark: Mark) -> None:
        """Take back every record appended since `mark`: the log is cut to its size then
        (and fsynced), as if they were never written. Synchronous, like an append's write:
        no cancel can leave it half done.

        Raises:
            StorageError: naming the log, when the cut cannot be made durable.
        """
        if self._fd is None:
            raise SessionError(f"session {self.id} is closed")
        try:
            self._fs.truncate(self._fd, mark.size)
            self._fs.fsync(self._fd)
        except OSError as exc:
            raise StorageError(self.log_path, os_reason(exc)) from None
        self._back_to(mark)

    def _back_to(self, mark: Mark) -> None:
        """The records since `mark` forgotten (the file already cut to its size)."""
        self._size = mark.size
        self._unsynced = None
        del self.records[mark.records :]
        del self._messages[mark.messages :]
        self.link, self.index = mark.link, mark.index
        self._next_call, self._last_usage = mark.next_call, mark.last_usage

    async def begin_epoch(self, now: Timestamp) -> None:
        """Open the next epoch from this one, whose last record is its `epoch_end` (appended
        by the caller, or found there by resume): its files are put in place
        (`epochs.write_epoch`), and the session goes on in it, its index written.

        In the event loop, as an append is: what it writes is the carried turns, at most
        `[context] carry_fraction` of the context (a few milliseconds at ordinary sizes), and
        a turn's time budget then never ends while a worker thread holds the switch.

        Raises:
            StorageError: naming the session's folder; the old epoch stays current, and the
                switch is made again from its `epoch_end` when the session is next opened.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self.begin_epoch_sync(now)

    def begin_epoch_sync(self, now: Timestamp) -> None:
        """`begin_epoch`, without the checkpoint (resume runs it in its worker thread)."""
        end = self.records[-1]
        assert isinstance(end, EpochEndRecord)
        folder = self.log_path.parent
        genesis = sha256_hex(self._baseline_data)
        records = opening(self.records, self.index, now, genesis)
        try:
            staged = write_epoch(
                self._fs, folder, end.epoch + 1, self._baseline_data, genesis, records,
                lock=self._held,
            )  # fmt: skip
        except OSError as exc:
            raise StorageError(folder, os_reason(exc)) from None
        old = self._fd
        self._load(staged.log, staged.fd, staged.size, staged.path)
        if old is not None:
            self._fs.close(old)
        self._index_due = None
        self._write_index(self.index)

    def _write(self, lines: bytes, durable: bool = True) -> None:
        """One write of whole lines (more only if the disk took part of them), then an fsync
        (unless not `durable`: then `sync` makes them so); if either fails the log is cut back
        to where it was, and nothing of these lines is kept."""
        fs = self._fs
        if self._fd is None:
            raise SessionError(f"session {self.id} is closed")
        self._check_unchanged(self._fd)
        before = self.mark() if not durable else None
        try:
            fs.write_all(self._fd, lines)  # a short write's next one says why (ENOSPC)
            if durable:
                fs.fsync(self._fd)
        except OSError as exc:
            self._fail(exc)
        self._size += len(lines)
        if before is not None and self._unsynced is None:
            self._unsynced = before  # what `sync` makes durable, or takes back
        elif durable:
            self._unsynced = None

    def sync(self) -> None:
        """Make what `append(durable=False)` wrote durable (nothing to do when it is).

        Raises:
            StorageError: naming the log; what was not made durable is taken back out of
                it, as a failed append's records are.
        """
        if self._unsynced is None or self._fd is None:
            return
        try:
            self._fs.fsync(self._fd)
        except OSError as exc:
            self._fail(exc)
        self._unsynced = None

    def _fail(self, exc: OSError) -> NoReturn:
        """A write or fsync failed: the log is cut back to its last durable record (where
        this write began, or where an unsynced append began, forgotten too) and the failure
        raised."""
        mark = self._unsynced
        if self._fd is not None:
            with contextlib.suppress(OSError):  # the reason that matters is the first one
                self._fs.truncate(self._fd, mark.size if mark is not None else self._size)
        if mark is not None:
            self._back_to(mark)
        raise StorageError(self.log_path, os_reason(exc)) from None

    def _check_unchanged(self, fd: int) -> None:
        """Refuse to append to a log someone else changed: an editor's save (a new file
        renamed over it), a removal or a truncation would make the appended turns vanish or
        follow a cut. Two `stat` calls, a few microseconds."""
        try:
            what = log_changed(fd, self.log_path, self._size)
        except OSError as exc:
            raise StorageError(self.log_path, os_reason(exc), reading=True) from None
        if what is not None:
            raise LogChanged(self.log_path, what)

    def _write_index(self, index: Index) -> None:
        """Replace `index.json` beside the log (a new file renamed over the old; no fsync:
        the log is what is durable, and the index is rebuilt from it at the next turn)."""
        try:
            self._fs.replace_file(self.log_path.with_name(INDEX_FILE), dumps(index) + b"\n")
        except OSError as exc:
            raise StorageError(self.log_path.with_name(INDEX_FILE), os_reason(exc)) from None

    def hold(self) -> bool:
        """Take the log's lock for a turn (`bxctl rm` will not remove a log while it is
        held); False when another process holds it."""
        self._held = self._fd is not None and self._fs.lock(self._fd)
        return self._held

    def release(self) -> None:
        if self._fd is not None:
            self._fs.unlock(self._fd)
        self._held = False

    def moved(self) -> bool:
        """Whether the log is no longer the one this session wrote (removed, replaced, cut or
        grown by another writer since): the session must then be read from disk again."""
        if self._fd is None:
            return True
        try:
            return log_changed(self._fd, self.log_path, self._size) is not None
        except OSError:
            return True

    def close(self) -> None:
        with contextlib.suppress(StorageError):  # a hint: the log is what is kept
            self.flush_index()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._fs.close(fd)

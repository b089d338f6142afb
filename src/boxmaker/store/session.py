"""One open session: its log file, appended to with the durability SPEC section 5 asks for,
and the state derived from its records (the next request's messages, the call counter, the
last usage). The store (`store.py`) makes and reads sessions; this is what a turn holds.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import trio
from attrs import frozen

from ..proto import (
    Baseline,
    ChatMessage,
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
    Index,
    Log,
    LogChanged,
    SessionError,
    StorageError,
    healing_records,
    index_of,
    message_of,
    next_call,
    os_reason,
    request_messages,
    seal,
    turn_end,
    unended_turn,
)
from .fs import FileSystem
from .trust import log_changed

__all__ = ["INDEX_FILE", "Session", "SetAside"]

INDEX_FILE = "index.json"


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
        set_aside: SetAside | None = None,
    ) -> None:
        self.id = session
        self.set_aside = set_aside  # what resume moved out of the log
        self.remains: Path | None = None  # where create moved a folder that had no log
        self._fs = fs
        self.baseline = baseline
        self.records = log.records
        self.link = log.link  # where the hash chain ends: the next line follows it
        self.index = index_of(log.records, log.last_turn_end)
        self._chained_from = log.chained_from
        self.log_path = log_path
        self._fd: int | None = fd
        self._size = size  # bytes written and fsynced
        self._messages: list[ChatMessage] = list(request_messages(baseline, self.records))
        self._next_call = next_call(self.records)
        self._last_usage = next(
            (r for r in reversed(self.records) if isinstance(r, UsageRecord)), None
        )

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

    def healing(self, now: Timestamp) -> list[ToolResultRecord]:
        """An "interrupted, not run" result for each tool call left without one, numbered from
        the next call number (which they take once appended)."""
        return healing_records(self.records, now, self._next_call, self.baseline)

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

    async def append(self, *records: LogRecord) -> None:
        """Write records in one write and make them durable (fsync) before anything else.

        The write happens in the event loop: an fsync here takes a few tenths of a millisecond,
        hardly more than a hop to a worker thread, and a record can then never be interrupted
        half-way. A cancel that is already pending is raised before writing.

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
            self._write(b"".join(lines))
            self.link = link
        for record in records:
            self.records.append(record)
            if (message := message_of(record, self.baseline.fenced)) is not None:
                self._messages.append(message)
            if isinstance(record, UsageRecord):
                self._last_usage = record
            elif isinstance(record, ToolResultRecord):
                self._next_call = max(self._next_call, record.call + 1)
        if index.turns != self.index.turns:  # a turn ended: the index follows the log
            self._write_index(index)
        self.index = index

    def _write(self, lines: bytes) -> None:
        """One write of whole lines (more only if the disk took part of them), then an fsync;
        if either fails the log is cut back to where it was, and nothing of these lines is
        kept."""
        fs = self._fs
        if self._fd is None:
            raise SessionError(f"session {self.id} is closed")
        self._check_unchanged(self._fd)
        try:
            fs.write_all(self._fd, lines)  # a short write's next one says why (ENOSPC)
            fs.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):  # the reason that matters is the first one
                fs.truncate(self._fd, self._size)
            raise StorageError(self.log_path, os_reason(exc)) from None
        self._size += len(lines)

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
        return self._fd is not None and self._fs.lock(self._fd)

    def release(self) -> None:
        if self._fd is not None:
            self._fs.unlock(self._fd)

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
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._fs.close(fd)

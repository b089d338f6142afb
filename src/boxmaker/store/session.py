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
    SessionId,
    SessionStartRecord,
    SystemMessage,
    Timestamp,
    ToolResultRecord,
    UsageRecord,
    dumps,
)
from ..session import (
    LogChanged,
    SessionError,
    StorageError,
    healing_records,
    message_of,
    next_call,
    os_reason,
)
from .fs import FileSystem
from .trust import log_changed

__all__ = ["Session", "SetAside"]


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
        records: list[LogRecord],
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
        self.records = records
        self.log_path = log_path
        self._fd: int | None = fd
        self._size = size  # bytes written and fsynced
        self._messages: list[ChatMessage] = [SystemMessage(content=baseline.system)]
        self._messages += [m for r in records if (m := message_of(r)) is not None]
        self._next_call = next_call(records)
        self._last_usage = next((r for r in reversed(records) if isinstance(r, UsageRecord)), None)

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

    async def heal(self, now: Timestamp) -> list[ToolResultRecord]:
        """Append an "interrupted, not run" result for each tool call left without one."""
        healing = healing_records(self.records, now, self._next_call)
        for _ in healing:
            self.take_call()
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
        lines = b"".join(dumps(record) + b"\n" for record in records)
        if lines:
            self._write(lines)
        for record in records:
            self.records.append(record)
            if (message := message_of(record)) is not None:
                self._messages.append(message)
            if isinstance(record, UsageRecord):
                self._last_usage = record

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

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._fs.close(fd)

"""The session store: `<home>/sessions/<id>/` with `0.baseline.json` and the log `0.jsonl`.

There is no state file; the log is the state. Durability, in order:

- **create** writes the baseline and the `session_start` line into a hidden folder
  (`.new-<id>-<random>`; no session id starts with `.`), fsyncs both files and the folder, then
  renames the folder into place and fsyncs `sessions/`. A crash or error at any point leaves
  the session absent or whole, never half-made; a leftover hidden folder is swept at start.
- **append** writes whole lines in one `write` (one record, or the records of one step such
  as `assistant` and its `usage`), then fsyncs, before the turn goes on. The one exception is
  the user message: written at once, fsynced as soon as its request is on its way to the
  server, and always before any of the server's answer reaches the channel. If a write or an fsync
  fails, the file is truncated back to a record boundary, and the error names the file.
- **resume** reads the baseline from its file (never from `system.md`), checks its sha256
  against `session_start`, and parses every line (`log.parse_log`). A last write cut short
  (loopd killed mid-write) is moved into a file of its own beside the log, and the session
  says so (`Session.set_aside`), so that it resumes from its last finished write.

Creating and resuming (which may read a long log) run in a worker thread. Appends run in the
event loop: an fsync is about a tenth of a millisecond, cheaper than a thread hop, and a cancel
can never interrupt a record half-way.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import trio
from attrs import frozen

from ..clock import Clock
from ..proto import (
    Baseline,
    ChatMessage,
    DecodeError,
    LogRecord,
    SessionId,
    SessionStartRecord,
    SystemMessage,
    Timestamp,
    ToolResultRecord,
    UsageRecord,
    dumps,
)
from .baseline import assemble_baseline, baseline_bytes, parse_baseline, sha256_hex
from .errors import (
    BaselineMismatch,
    NoSuchSession,
    SessionError,
    SessionExists,
    StorageError,
    TornLog,
)
from .fs import FileSystem
from .log import finished_writes
from .replay import healing_records, message_of, next_call

__all__ = ["BASELINE_FILE", "LOG_FILE", "Session", "SetAside", "Store", "read_baseline"]

BASELINE_FILE = "0.baseline.json"
LOG_FILE = "0.jsonl"
_NEW = ".new-"


def read_baseline(system: Path, home: Path) -> Baseline:
    """Assemble a new session's baseline from `system.md` and `<home>/memory/core.md`.

    Raises:
        StorageError: `system.md` cannot be read (or `core.md` exists but cannot be read).
    """
    try:
        text = system.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
        raise StorageError(system, reason, reading=True) from None
    core = home / "memory" / "core.md"
    try:
        memory = core.read_text(encoding="utf-8")
    except FileNotFoundError:
        memory = None
    except (OSError, UnicodeDecodeError) as exc:
        reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
        raise StorageError(core, reason, reading=True) from None
    return assemble_baseline(text, memory)


@frozen
class SetAside:
    """An unfinished last write that resume moved out of the log into `path`: `size` bytes,
    holding `records` whole records (an `assistant` whose `usage` was cut) and a torn one."""

    path: Path
    size: int
    records: int


class Store:
    """Sessions under `<home>/sessions/`."""

    def __init__(self, home: Path, clock: Clock, fs: FileSystem | None = None) -> None:
        self.sessions = home / "sessions"
        self.clock = clock
        self.fs = fs or FileSystem()

    def folder(self, session: SessionId) -> Path:
        folder = self.sessions / session.value
        assert folder.parent == self.sessions  # a SessionId can never name another place
        return folder

    def exists(self, session: SessionId) -> bool:
        return (self.folder(session) / LOG_FILE).is_file()

    def sweep(self) -> list[str]:
        """Remove the hidden folders of creations that never finished; returns their names."""
        stale = [name for name in self.fs.list_dir(self.sessions) if name.startswith(_NEW)]
        for name in stale:
            self.fs.remove_tree(self.sessions / name)
        return stale

    async def create(self, session: SessionId, baseline: Baseline, slot: str) -> Session:
        """Create a session with its baseline and `session_start` record.

        Raises:
            SessionExists: the session's folder is already there.
            StorageError: the disk refused; nothing is left behind.
        """
        data = baseline_bytes(baseline)
        start = SessionStartRecord(
            time=self.clock.now(), session=session, epoch=0, slot=slot, baseline=sha256_hex(data)
        )
        line = dumps(start) + b"\n"
        fd = await trio.to_thread.run_sync(self._create, session, data, line)
        return Session(self, session, baseline, [start], fd, len(line))

    def _create(self, session: SessionId, baseline: bytes, line: bytes) -> int:
        fs, final = self.fs, self.folder(session)
        if final.exists():
            raise SessionExists(session)
        staging = self.sessions / f"{_NEW}{session.value}-{secrets.token_hex(4)}"
        try:
            fs.makedirs(self.sessions)
            fs.mkdir(staging)
            for name, data in ((BASELINE_FILE, baseline), (LOG_FILE, line)):
                fd = fs.create(staging / name)
                try:
                    _write_all(fs, fd, data)
                    fs.fsync(fd)
                finally:
                    fs.close(fd)
            fs.fsync_dir(staging)
            try:
                fs.rename(staging, final)
            except OSError as exc:
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise SessionExists(session) from None
                raise
            fs.fsync_dir(self.sessions)
            return fs.open_append(final / LOG_FILE)
        except OSError as exc:
            raise StorageError(final, _reason(exc)) from None
        finally:
            fs.remove_tree(staging)

    async def resume(self, session: SessionId) -> Session:
        """Read a session back from disk.

        Raises:
            NoSuchSession: there is no log for it.
            TornLog: a line of the log (or the baseline file) is not what it must be.
            BaselineMismatch: the baseline file is not the one `session_start` recorded.
            StorageError: the files cannot be read.
        """
        return await trio.to_thread.run_sync(self._resume_paused, session)

    def _resume_paused(self, session: SessionId) -> Session:
        with _collection_paused():
            return self._resume(session)

    def _resume(self, session: SessionId) -> Session:
        folder = self.folder(session)
        log_path, baseline_path = folder / LOG_FILE, folder / BASELINE_FILE
        if not log_path.is_file():
            raise NoSuchSession(session)
        try:
            data = self.fs.read(log_path)
            baseline_data = self.fs.read(baseline_path)
        except OSError as exc:
            raise StorageError(folder, _reason(exc), reading=True) from None
        records, end = finished_writes(data, log_path)
        start = records[0]
        assert isinstance(start, SessionStartRecord)
        if start.session != session:
            raise TornLog(log_path, 1, f"session_start names session {start.session}")
        actual = sha256_hex(baseline_data)
        if actual != start.baseline:
            raise BaselineMismatch(baseline_path, start.baseline, actual)
        try:
            baseline = parse_baseline(baseline_data)
        except DecodeError as exc:
            raise TornLog(baseline_path, 1, f"not a baseline: {exc}") from None
        aside = None if end == len(data) else self._set_aside(log_path, data, end)
        try:
            fd = self.fs.open_append(log_path)
            if aside is not None:
                self.fs.truncate(fd, end)
                self.fs.fsync(fd)
        except OSError as exc:
            raise StorageError(log_path, _reason(exc)) from None
        return Session(self, session, baseline, records, fd, end, set_aside=aside)

    def _set_aside(self, log_path: Path, data: bytes, end: int) -> SetAside:
        """Keep the bytes of an unfinished write in `0.jsonl.torn-<offset>` (made durable
        before the log is cut back to `end`): nothing is thrown away."""
        fs, tail = self.fs, data[end:]
        path = log_path.with_name(f"{LOG_FILE}.torn-{end}")
        for n in range(2, 1000):
            if not path.exists():
                break
            path = log_path.with_name(f"{LOG_FILE}.torn-{end}-{n}")
        try:
            fd = fs.create(path)
            try:
                _write_all(fs, fd, tail)
                fs.fsync(fd)
            finally:
                fs.close(fd)
            fs.fsync_dir(path.parent)
        except OSError as exc:
            raise StorageError(path, _reason(exc)) from None
        return SetAside(path, len(tail), tail.count(b"\n"))


class Session:
    """One open session: its baseline, its records, and what derives from them.

    Only the turn that holds the session's lock uses it. The messages of the next request and
    the call counter are kept up to date as records are appended, so building a request never
    reads the log again.
    """

    def __init__(
        self,
        store: Store,
        session: SessionId,
        baseline: Baseline,
        records: list[LogRecord],
        fd: int,
        size: int,
        *,
        set_aside: SetAside | None = None,
    ) -> None:
        self.id = session
        self.set_aside = set_aside  # what resume moved out of the log
        self.store = store
        self.baseline = baseline
        self.records = records
        self.log_path = store.folder(session) / LOG_FILE
        self._fd: int | None = fd
        self._size = size  # bytes written
        self._durable = size  # bytes known to be on disk (fsynced)
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

    async def append(self, *records: LogRecord, sync: bool = True) -> None:
        """Write records in one write and make them durable (fsync) before anything else.

        With `sync=False` they are written now (and count from now: the next request holds
        them) and made durable by the next `sync()` or durable append: a turn writes its user
        message so, and syncs it while the request is on its way to the server.

        The write happens in the event loop: an fsync here takes a few tenths of a millisecond,
        hardly more than a hop to a worker thread, and a record can then never be interrupted
        half-way. A cancel that is already pending is raised before writing.

        Raises:
            StorageError: naming the log; nothing of these records is kept and the log ends
                at a record boundary (see `_fsync` for a failure after an unsynced append).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        lines = b"".join(dumps(record) + b"\n" for record in records)
        if lines:
            self._write(lines)
        if sync:
            self._fsync(pending=len(lines))
        for record in records:
            self.records.append(record)
            if (message := message_of(record)) is not None:
                self._messages.append(message)
            if isinstance(record, UsageRecord):
                self._last_usage = record

    def sync(self) -> None:
        """Make every record written so far durable, if one is not yet (one fsync).

        Raises:
            StorageError: naming the log; see `_fsync`.
        """
        self._fsync(pending=0)

    def _fsync(self, *, pending: int) -> None:
        """fsync what was written since the last one; `pending` bytes of it are the records of
        the append under way, not yet in this session's state.

        If it fails the log is cut back to its last durable record and the records of the
        append under way are not kept. Records written earlier without a sync are lost too:
        the session no longer holds what the disk holds, so it is closed (resume it again).
        """
        fd = self._fd
        if fd is None or self._durable == self._size:
            return
        try:
            self.store.fs.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):  # the reason that matters is the first one
                self.store.fs.truncate(fd, self._durable)
            earlier = self._size - pending > self._durable
            self._size = self._durable
            if earlier:
                self.close()
            raise StorageError(self.log_path, _reason(exc)) from None
        self._durable = self._size

    def _write(self, lines: bytes) -> None:
        """One write of whole lines (more only if the disk took part of them); if it fails the
        log is cut back to where it was, and nothing of these lines is kept."""
        fs = self.store.fs
        if self._fd is None:
            raise SessionError(f"session {self.id} is closed")
        try:
            _write_all(fs, self._fd, lines)  # a short write's next one says why (ENOSPC)
        except OSError as exc:
            with contextlib.suppress(OSError):  # the reason that matters is the first one
                fs.truncate(self._fd, self._size)
            raise StorageError(self.log_path, _reason(exc)) from None
        self._size += len(lines)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self.store.fs.close(fd)


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector off a log while it is read.

    A long log makes hundreds of thousands of objects, none in a cycle, which the collector
    would scan again and again as they are made. Resumes run in worker threads, several at
    once under load, so the collector is switched off by the first and on by the last
    (counted under a lock: checking and switching per thread raced and could leave it off).
    Nothing is moved between generations by hand: `gc.freeze` also moved the event loop's
    cyclic garbage where no collection was ever triggered again (loopd grew by 0.5 MB per 100
    connections under the load test).
    """
    global _pausers, _was_enabled
    with _pause_lock:
        if _pausers == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pausers -= 1
            if _pausers == 0 and _was_enabled:
                gc.enable()


_pause_lock = threading.Lock()
_pausers = 0
_was_enabled = True


def _write_all(fs: FileSystem, fd: int, data: bytes) -> None:
    while data:
        written = fs.write(fd, data)
        if written <= 0:
            raise OSError(errno.EIO, "the disk took no bytes")
        data = data[written:]


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)

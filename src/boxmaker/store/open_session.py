"""A session open for its turns: its baseline, its log (`Journal`) and the state its records
give (`session.SessionState`), kept in step: a write that fails leaves both as they were.

Appending is deciding the next state (its lines sealed into the hash chain) and writing those
lines; only once they are written is the new state the session's. A write may be left
unsynced (`durable=False`, the turn's user message, so the disk and the server work at once):
the state at the last fsync is kept, and a failed fsync, or a failed write after it, takes the
session back there, in the file as in memory. The store (`store.py`) makes and reads sessions;
this is what a turn holds. Blocking calls, each one write and one fsync at most: loopd makes
them in the event loop, where a record can never be interrupted half-way.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path

import attrs
from attrs import frozen

from .. import layout
from ..proto import (
    Baseline,
    ChatMessage,
    DecodeError,
    EpochEndRecord,
    LogRecord,
    Outcome,
    SessionId,
    SessionStartRecord,
    Timestamp,
    ToolResultRecord,
    UsageRecord,
    dumps,
    parse_json,
)
from ..session import (
    INTERRUPTED,
    Exposed,
    Index,
    Log,
    SessionState,
    StorageError,
    baseline_bytes,
    healing_records,
    next_baseline,
    opening,
    sha256_hex,
    turn_end,
    unended_turn,
)
from .fs import FileSystem, storage_errors
from .journal import Journal
from .kept_files import TurnFiles
from .staging import write_epoch

MemoryText = Callable[[], str]
"""What gives the memory part of a baseline being made (`core.md` and the pinned notes, as
`boxmaker.memory` reads them). Raises `Exposed` for a file or folder of the memory that is
not this user's alone, `StorageError` for one that cannot be read."""

__all__ = ["MemoryText", "OpenSession", "SetAside"]


@frozen
class SetAside:
    """An unfinished last write that resume moved out of the log into `path`: `size` bytes,
    holding `records` whole records (an `assistant` whose `usage` was cut) and a torn one."""

    path: Path
    size: int
    records: int


class OpenSession:
    """One open session. Only the turn that holds the session's lock uses it."""

    def __init__(
        self,
        fs: FileSystem,
        sid: SessionId,
        baseline: Baseline,
        log: Log,
        journal: Journal,
        *,
        baseline_data: bytes,
        set_aside: SetAside | None = None,
        memory: MemoryText | None = None,
        identity: str = "",
    ) -> None:
        self.id = sid
        # What the session is, whatever its id: the SHA-256 of its first line (epoch 0's
        # `session_start`, which holds when it was made). A new session under a removed
        # one's id is another session: brokerd keys what it keeps for one by this.
        self.identity = identity
        self.set_aside = set_aside  # what resume moved out of the log
        self.remains: Path | None = None  # where create moved a folder that had no log
        self.baseline = baseline
        self._fs = fs
        self._baseline_data = baseline_data  # the file's bytes
        self._memory = memory  # for the next epoch's baseline; None: it repeats this one
        self.memory_problem: str | None = None  # why the last switch kept the old memory
        self._journal = journal
        self.state = SessionState.of(baseline, log, journal.size)
        self._durable = self.state  # the state at the last fsync
        # loopd sets it: a turn's `index.json` is then written by `flush_index`, after the
        # answer went out, not in the append that ends the turn.
        self.defer_index = False
        self._index_due: Index | None = None
        self.shown = self._shown_before()  # the last turn a person saw end (`mark_shown`)
        self.files = TurnFiles(fs, self.log_path.parent)  # what its turns carried
        self._filled: tuple[object, tuple[ChatMessage, ...]] = (None, ())  # request_messages

    # --- what the state says ------------------------------------------------------------

    @property
    def records(self) -> tuple[LogRecord, ...]:
        return self.state.records

    @property
    def index(self) -> Index:
        return self.state.index

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def first_turn(self) -> int:
        """The number of the first turn this epoch's conversation holds (from 1, across
        epochs): the first it carried, or its own first."""
        opened = self.state.head.start
        return opened.turns + 1 if opened is not None else 1

    @property
    def log_path(self) -> Path:
        return self._journal.path

    @property
    def slot(self) -> str:
        """The logical slot the session was created on (its `session_start` record)."""
        start = self.state.records[0]
        assert isinstance(start, SessionStartRecord)
        return start.slot

    def request_messages(self) -> tuple[ChatMessage, ...]:
        """The next request's messages: the system text, then what the log gives, each image
        with its bytes (`TurnFiles.with_images`).

        Raises:
            StorageError: an image's file is missing or is not what its hash says.
        """
        messages = self.state.messages
        if self._filled[0] is not messages:
            self._filled = (messages, self.files.with_images(messages))
        return self._filled[1]

    def last_usage(self) -> UsageRecord | None:
        return self.state.last_usage

    def healing(self, now: Timestamp, content: str = INTERRUPTED) -> list[ToolResultRecord]:
        """An "interrupted, not run" result (or `content`) for each tool call left without
        one, numbered from the next call number."""
        state = self.state
        return healing_records(state.records, now, state.next_call, self.baseline, content)

    # --- writing ------------------------------------------------------------------------

    def heal(self, now: Timestamp) -> list[LogRecord]:
        """Close the turn loopd was in when it stopped: results for its tool calls left
        without one, then its `turn_end` (outcome `interrupted`). Returns what was appended."""
        unended = unended_turn(self.state.records, self.state.chained_from)
        healing: list[LogRecord] = [*self.healing(now)]
        if unended:
            spent = now.value - unended[0].time.value
            ms = max(0, round(spent.total_seconds() * 1000))
            healing.append(turn_end([*unended, *healing], now, Outcome.INTERRUPTED, ms))
        self.append(*healing)
        return healing

    def append(self, *records: LogRecord, durable: bool = True) -> None:
        """Write records in one write and make them durable (fsync) before anything else;
        `durable=False` leaves the fsync to `sync()` (or to the next append's, which covers
        these bytes too).

        Raises:
            StorageError: naming the log; nothing of these records is kept (nor of an
                unsynced append before them), and the log ends at the record boundary of the
                last fsync.
            LogChanged: the log is no longer the file at its path, of the size written;
                nothing is written (and the session must be read again from disk).
        """
        if not records:
            return
        data, after = self.state.sealed(records, self.baseline)
        try:
            self._journal.write(data, sync=durable, durable_size=self._durable.size)
        except StorageError:
            self.state = self._durable
            raise
        before, self.state = self.state, after
        if durable:
            self._durable = after
        if after.index.turns != before.index.turns:  # a turn ended: the index follows the log
            if self.defer_index:
                self._index_due = after.index
            else:
                self._write_index(after.index)

    def keep_whole(self, call: int, text: str) -> str:
        """Keep the whole of call `call`'s result (a new file, fsynced, renamed into
        `results/`, which is fsynced too) before its `tool_result` names it; its SHA-256 in
        hex. A file left by a call that was never recorded (loopd stopped in between: the
        number is taken again) is replaced.

        Raises:
            StorageError: naming the file.
        """
        return self._keep(layout.result_file(self.log_path.parent, call), text.encode())

    def keep_part(self, name: str, data: bytes) -> str:
        """Keep an attachment of a result as `results/<name>`, as `keep_whole` keeps a whole
        result; its SHA-256 in hex.

        Raises:
            StorageError: naming the file.
        """
        return self._keep(layout.part_file(self.log_path.parent, name), data)

    def _keep(self, path: Path, data: bytes) -> str:
        with storage_errors(path):
            self._fs.makedirs(path.parent)
            self._fs.replace_file(path, data)
        return hashlib.sha256(data).hexdigest()

    def read_whole(self, record: ToolResultRecord) -> str | None:
        """The whole result `record` names, if its file is there and still what the record's
        hash says (else None: missing, changed, or never kept).

        Raises:
            StorageError: the file could not be read.
        """
        if record.whole is None:
            return None
        path = layout.result_file(self.log_path.parent, record.call)
        with storage_errors(path, reading=True):
            data = self._fs.read_if_there(path)
        if data is None or hashlib.sha256(data).hexdigest() != record.whole:
            return None
        return data.decode(errors="replace")

    def sync(self) -> None:
        """Make what `append(durable=False)` wrote durable (nothing to do when it is).

        Raises:
            StorageError: naming the log; what was not made durable is taken back out of it,
                as a failed append's records are.
        """
        if self._durable is self.state:
            return
        try:
            self._journal.fsync(durable_size=self._durable.size)
        except StorageError:
            self.state = self._durable
            raise
        self._durable = self.state

    def cut_back(self, to: SessionState) -> None:
        """Take back every record appended since the session was in state `to` (the log is
        cut to its size then, and fsynced), as if they were never written.

        Raises:
            StorageError: naming the log, when the cut cannot be made durable.
        """
        self._journal.truncate(to.size)
        self.state = self._durable = to

    def _next_memory(self) -> tuple[str | None, str | None]:
        """The memory the next epoch's baseline holds (None: it repeats this one's bytes, a
        baseline from before memory), and why it is this epoch's own when the memory could
        not be read (a `core.md` that is not UTF-8, or that others may write): a switch must
        not stop for it, nor a session that must finish one to resume."""
        if self._memory is None or self.baseline.memory is None:
            return None, None
        try:
            return self._memory(), None
        except (StorageError, Exposed) as error:
            return self.baseline.memory, f"the new epoch keeps the last one's memory: {error}"

    def begin_epoch(self, now: Timestamp) -> None:
        """Open the next epoch from this one, whose last record is its `epoch_end` (appended
        by the caller, or found there by resume): its baseline is this one's with the memory
        as it is now (why it kept the last one's instead, if it did, is left in
        `memory_problem`), its files are put in place (`staging.write_epoch`), and the
        session goes on in it, its index written.

        Raises:
            StorageError: naming the session's folder; the old epoch stays current, and the
                switch is made again from its `epoch_end` when the session is next opened.
        """
        end = self.state.records[-1]
        assert isinstance(end, EpochEndRecord)
        folder = self.log_path.parent
        memory, self.memory_problem = self._next_memory()
        baseline, data = self.baseline, self._baseline_data
        if memory is not None and baseline.memory is not None:
            baseline = next_baseline(baseline, memory)
            data = baseline_bytes(baseline)
        genesis = sha256_hex(data)
        records = opening(self.state.records, self.state.index, now, genesis, self.identity)
        with storage_errors(folder):
            journal, log = write_epoch(
                self._fs,
                folder,
                end.epoch + 1,
                data,
                genesis,
                records,
                lock=self._journal.held,
            )
        self._journal.close()
        self._journal = journal
        self.baseline, self._baseline_data = baseline, data
        self.state = self._durable = SessionState.of(baseline, log, journal.size)
        self._index_due = None
        self._write_index(self.state.index)

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

    def _write_index(self, index: Index) -> None:
        """Replace `index.json` beside the log (a new file renamed over the old; no fsync:
        the log is what is durable, and the index is rebuilt from it at the next turn)."""
        path = self.log_path.with_name(layout.INDEX)
        with storage_errors(path):
            self._fs.replace_file(
                path, dumps(attrs.evolve(index, shown=self.shown)) + b"\n", sync=False
            )

    def mark_shown(self) -> None:
        """A person saw the last turn end: the index says so once it is next written."""
        if self.shown != self.index.turns:
            self.shown = self.index.turns
            self._index_due = self.index

    def _shown_before(self) -> int:
        """What the index on disk says was shown (an index of before `shown`, or none: every
        turn the log holds)."""
        turns = self.index.turns
        try:
            raw = parse_json(self._fs.read(self.log_path.with_name(layout.INDEX)))
        except (OSError, DecodeError, Exposed):  # missing, damaged, or not loopd's own
            return turns
        shown = raw.get("shown", turns) if type(raw) is dict else turns
        return min(shown, turns) if type(shown) is int and shown >= 0 else turns

    # --- the lock and the file ----------------------------------------------------------

    def hold(self) -> bool:
        """Take the log's lock for a turn (`bxctl rm` will not remove a log while it is
        held); False when another process holds it."""
        return self._journal.lock()

    def release(self) -> None:
        self._journal.unlock()

    def moved(self) -> bool:
        """Whether the log is no longer the one this session wrote (removed, replaced, cut or
        grown by another writer since): the session must then be read from disk again."""
        return self._journal.changed()

    def close(self) -> None:
        with contextlib.suppress(StorageError):  # a hint: the log is what is kept
            self.flush_index()
        self._journal.close()

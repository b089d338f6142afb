"""The session store: `<home>/sessions/<id>/`, each epoch's baseline and log (`layout.py`
names them; epoch 0's are made here, the others by `OpenSession.begin_epoch`).

There is no state file; the log is the state. Durability, in order:

- **create** puts the folder in place whole (`staging.create_folder`). A session *exists*
  when its folder holds a log (`exists`); a folder without one (emptied by hand, or its log
  removed) is not a session, and create moves it aside (kept) instead of refusing the id
  forever.
- **append** (`OpenSession`) writes whole lines in one `write` (one record, or the records of
  one step such as `assistant` and its `usage`), then fsyncs, before the turn goes on. If a
  write or an fsync fails, the file is truncated back to a record boundary, and the error
  names the file.
- **resume** reads the current (highest) epoch's files only: the baseline from its file (never
  from `system.md`), its sha256 checked against `session_start`, and every line of the log
  (`log.finished_writes`). A log that ends with `epoch_end` is a switch decided but not done:
  resume finishes it and sweeps what a crash left of it. A last write cut short (loopd killed
  mid-write) is moved into a file of its own beside the log, and the session says so
  (`OpenSession.set_aside`), so that it resumes from its last finished write. The log is
  opened once, without following a link and only if it is loopd's user's alone
  (`trust.open_checked`); the same descriptor is read and then appended to.

Every call blocks: loopd runs `create` and `resume` (which may read a long log) in a worker
thread.
"""

from __future__ import annotations

import contextlib
import gc
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from .. import layout
from ..clock import Clock
from ..profiles import Profile
from ..proto import (
    Baseline,
    DecodeError,
    EpochEndRecord,
    Mode,
    SessionId,
    SessionStartRecord,
    dumps,
)
from ..session import (
    BaselineMismatch,
    Exposed,
    Link,
    Log,
    NoSuchSession,
    SessionExists,
    StorageError,
    TornLog,
    assemble_baseline,
    baseline_bytes,
    finished_writes,
    parse_baseline,
    profile_baseline,
    seal,
    session_start,
    sha256_hex,
)
from ..tools import session_tools
from .fs import FileSystem, storage_errors
from .identity import session_identity
from .journal import Journal
from .open_session import MemoryText, OpenSession, SetAside
from .staging import create_folder, sweep_creations, sweep_folder
from .trust import exposure

__all__ = ["MemoryText", "Store", "core_only", "read_baseline", "read_text"]


def read_baseline(
    system: Path, memory: str, profile: Profile | None = None, core_tools: tuple[str, ...] = ()
) -> Baseline:
    """Assemble a new session's baseline from `system.md` and `memory` (its part from the
    owner's memory), under the model `profile` (none: the core tools, natively), with the
    tools the config makes core (`core_tools`).

    Raises:
        StorageError: `system.md` cannot be read.
    """
    text = read_text(system, trusted=False)  # the owner's config names it, wherever it is
    assert text is not None
    if profile is None:
        return assemble_baseline(text, memory, session_tools(core_tools))
    return profile_baseline(text, memory, profile, core_tools)


def core_only(home: Path) -> MemoryText:
    """The memory text as `<home>/memory/core.md` alone gives it (no notes)."""

    def memory() -> str:
        core = layout.core_memory(home)
        if (said := exposure(core.parent)) is not None:
            raise Exposed(core.parent, said)
        return (read_text(core) or "").rstrip("\n")

    return memory


def read_text(path: Path, *, trusted: bool = True) -> str | None:
    """A text file's text, its line ends as text mode reads them. `trusted`: a file of the
    home, read only if it is loopd's user's alone and not a link, and None when it is not
    there.

    Raises:
        StorageError: the file cannot be read, or is not UTF-8.
        Exposed: `trusted`, and a link or not loopd's user's alone.
    """
    with storage_errors(path, reading=True):
        data = FileSystem().read_if_there(path) if trusted else path.read_bytes()
    if data is None:
        return None
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise StorageError(path, str(exc), reading=True) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


class Store:
    """Sessions under `<home>/sessions/`."""

    def __init__(
        self,
        home: Path,
        clock: Clock,
        fs: FileSystem | None = None,
        memory: MemoryText | None = None,
    ) -> None:
        self.sessions = layout.sessions_folder(home)
        self.home = home
        self.clock = clock
        self.fs = fs or FileSystem()
        self.memory = memory or core_only(home)  # for each new epoch's baseline

    def folder(self, sid: SessionId) -> Path:
        return layout.session_folder(self.home, sid.value)

    def exists(self, sid: SessionId) -> bool:
        """Whether the session is there: its folder holds a log of some epoch (older ones may
        have been removed), or something other than a folder stands at its name, which
        `resume` refuses, saying what. A folder without a log is not a session: `create` moves
        it aside. So `exists` and `create` agree, and no id is ever wedged between
        `no_such_session` and `session_exists`."""
        folder = self.folder(sid)
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return False
        return not stat.S_ISDIR(st.st_mode) or bool(layout.epochs_in(self.fs.list_dir(folder)))

    def sweep(self) -> list[str]:
        """Remove the hidden folders of creations that never finished; returns their names."""
        return sweep_creations(self.fs, self.sessions)

    def create(
        self,
        sid: SessionId,
        baseline: Baseline,
        slot: str,
        *,
        what_if: SessionId | None = None,
        mode: Mode = Mode.AUTO,
    ) -> OpenSession:
        """Create a session with its baseline and `session_start` record (`what_if`: the
        session it replays, live, under another model: `bxctl replay --with`; `mode`: the one
        it opens in, `[tools] mode`).

        Raises:
            SessionExists: the session's folder is already there.
            StorageError: the disk refused; nothing is left behind.
        """
        data = baseline_bytes(baseline)
        start = SessionStartRecord(
            time=self.clock.now(),
            session=sid,
            epoch=0,
            slot=slot,
            baseline=sha256_hex(data),
            what_if=what_if,
            mode=None if mode is Mode.AUTO else mode,
        )
        line, link = seal(dumps(start), Link(0, start.baseline))
        if self.exists(sid):
            raise SessionExists(sid)
        final = self.folder(sid)
        with storage_errors(final):
            remains = self._clear_remains(final)
            journal = create_folder(self.fs, self.sessions, sid, data, line)
        opened = OpenSession(
            self.fs,
            sid,
            baseline,
            Log([start], link, chained_from=0),
            journal,
            baseline_data=data,
            memory=self.memory,
            identity=sha256_hex(line),
        )
        opened.remains = remains
        return opened

    def _clear_remains(self, folder: Path) -> Path | None:
        """Make room for a new session where a folder without a log stands: removed when
        empty, else moved aside (kept, never swept); returns where it went."""
        if not os.path.lexists(folder):
            return None
        if not self.fs.list_dir(folder):
            os.rmdir(folder)
            return None
        aside = self.sessions / layout.aside_name(folder.name, secrets.token_hex(4))
        self.fs.rename(folder, aside)
        return aside

    def resume(self, sid: SessionId) -> OpenSession:
        """Read a session back from disk.

        Raises:
            NoSuchSession: there is no log for it.
            TornLog: a line of the log (or the baseline file) is not what it must be.
            BaselineMismatch: the baseline file is not the one `session_start` recorded.
            StorageError: the files cannot be read.
        """
        with _collection_paused():
            return self._resume(sid)

    def _resume(self, sid: SessionId) -> OpenSession:
        folder = self.folder(sid)
        if not self.exists(sid):
            raise NoSuchSession(sid)
        if (said := exposure(folder)) is not None:
            raise Exposed(folder, said)
        # Only the current epoch's files are read, however many came before.
        names = self.fs.list_dir(folder)
        if not (found := layout.epochs_in(names)):
            raise NoSuchSession(sid)
        epoch = found[-1]
        sweep_folder(self.fs, folder, names)
        log_path = folder / layout.log_name(epoch)
        try:
            with storage_errors(log_path):  # opened to append: a read-only disk says so
                fd = self.fs.open_append(log_path)
        except StorageError as error:
            if isinstance(error.__cause__, FileNotFoundError):
                raise NoSuchSession(sid) from error
            raise
        try:
            opened = self._resume_from(sid, fd, epoch)
        except BaseException:
            self.fs.close(fd)
            raise
        if isinstance(opened.records[-1], EpochEndRecord):
            # A switch decided (its epoch_end is durable) but not finished: finish it.
            try:
                opened.begin_epoch(self.clock.now())
            except BaseException:
                opened.close()
                raise
        return opened

    def _resume_from(self, sid: SessionId, fd: int, epoch: int) -> OpenSession:
        folder = self.folder(sid)
        log_path = folder / layout.log_name(epoch)
        baseline_path = folder / layout.baseline_name(epoch)
        with storage_errors(folder, reading=True):
            data = self.fs.read_all(fd)
            baseline_data = self.fs.read(baseline_path)
        start = session_start(data, log_path)
        if start.session != sid:
            raise TornLog(log_path, 1, f"session_start names session {start.session}")
        if start.epoch != epoch:
            raise TornLog(log_path, 1, f"session_start says epoch {start.epoch}")
        actual = sha256_hex(baseline_data)
        if actual != start.baseline:
            raise BaselineMismatch(baseline_path, start.baseline, actual)
        log, end = finished_writes(data, log_path, actual)
        try:
            baseline = parse_baseline(baseline_data)
        except DecodeError as exc:
            raise TornLog(baseline_path, 1, f"not a baseline: {exc}") from exc
        aside = None if end == len(data) else self._set_aside(log_path, data, end)
        journal = Journal(self.fs, log_path, fd, len(data))
        if aside is not None:
            journal.truncate(end)
        return OpenSession(
            self.fs,
            sid,
            baseline,
            log,
            journal,
            baseline_data=baseline_data,
            set_aside=aside,
            memory=self.memory,
            identity=session_identity(self.fs, folder, start, data),
        )

    def _set_aside(self, log_path: Path, data: bytes, end: int) -> SetAside:
        """Keep the bytes of an unfinished write beside the log (made durable before the log
        is cut back to `end`): nothing is thrown away."""
        tail = data[end:]
        with storage_errors(log_path.with_name(layout.torn_name(log_path.name, end))):
            path = self.fs.keep_torn(log_path, tail, end)
        return SetAside(path, len(tail), tail.count(b"\n"))


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

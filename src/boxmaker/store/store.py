"""The session store: `<home>/sessions/<id>/` with each epoch's `<n>.baseline.json` and log
`<n>.jsonl` (`session/epoch.py`; epoch 0's are made here, the others by `epochs.py`).

There is no state file; the log is the state. Durability, in order:

- **create** writes the baseline and the `session_start` line into a hidden folder
  (`.new-<id>-<random>`; no session id starts with `.`), fsyncs both files and the folder, then
  renames the folder into place and fsyncs `sessions/`. A crash or error at any point leaves
  the session absent or whole, never half-made; a leftover hidden folder is swept at start.
  A session *exists* when its folder holds a log (`exists`); a folder without one (emptied by
  hand, or its log removed) is not a session, and create moves it aside
  (`sessions/.aside-<id>-<random>`, kept) instead of refusing the id forever.
- **append** (`Session`, in `session.py`) writes whole lines in one `write` (one record, or
  the records of one step such as `assistant` and its `usage`), then fsyncs, before the turn
  goes on. If a write or an fsync fails, the file is truncated back to a record boundary, and
  the error names the file.
- **resume** reads the current (highest) epoch's files only: the baseline from its file (never
  from `system.md`), its sha256 checked against `session_start`, and every line of the log
  (`log.finished_writes`). A log that ends with `epoch_end` is a switch decided but not done:
  resume finishes it (`Session.begin_epoch_sync`) and sweeps what a crash left of it. A last
  write cut short (loopd killed mid-write) is moved into a file of its own beside the log,
  and the session says so (`Session.set_aside`), so that it resumes from its last finished
  write. The log is opened once, without following a link and only if it is loopd's user's
  alone (`trust.open_checked`); the same descriptor is read and then appended to.

Creating and resuming (which may read a long log) run in a worker thread. Appends run in the
event loop: an fsync is about a tenth of a millisecond, cheaper than a thread hop, and a cancel
can never interrupt a record half-way.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import trio

from ..clock import Clock
from ..profiles import Profile
from ..proto import (
    Baseline,
    DecodeError,
    EpochEndRecord,
    SessionId,
    SessionStartRecord,
    dumps,
)
from ..session import (
    BaselineMismatch,
    Link,
    Log,
    NoSuchSession,
    SessionExists,
    StorageError,
    TornLog,
    Untrusted,
    assemble_baseline,
    baseline_bytes,
    baseline_name,
    epochs_in,
    finished_writes,
    log_name,
    os_reason,
    parse_baseline,
    profile_baseline,
    seal,
    session_start,
    sha256_hex,
)
from ..tools import Registry, default_registry
from .epochs import sweep
from .fs import FileSystem
from .session import Session, SetAside
from .trust import problem

__all__ = ["BASELINE_FILE", "LOG_FILE", "Store", "read_baseline"]

BASELINE_FILE = "0.baseline.json"
LOG_FILE = "0.jsonl"
_NEW = ".new-"
_ASIDE = ".aside-"


def read_baseline(
    system: Path, home: Path, profile: Profile | None = None, registry: Registry | None = None
) -> Baseline:
    """Assemble a new session's baseline from `system.md` and `<home>/memory/core.md`, under
    the model `profile` (none: the three core tools, as every session had before profiles).

    Raises:
        StorageError: `system.md` cannot be read (or `core.md` exists but cannot be read).
        Untrusted: `core.md` (or its folder) is not loopd's user's alone, or is a link.
    """
    try:
        text = system.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        raise StorageError(system, reason, reading=True) from None
    core = home / "memory" / "core.md"
    if (said := problem(core.parent)) is not None:
        raise Untrusted(core.parent, said)
    try:
        data = FileSystem().read(core)  # not through a link, and only if it is ours alone
        memory = data.decode().replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads
    except FileNotFoundError:
        memory = None
    except (OSError, UnicodeDecodeError) as exc:
        reason = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        raise StorageError(core, reason, reading=True) from None
    if profile is None:
        return assemble_baseline(text, memory)
    return profile_baseline(text, memory, profile, registry or default_registry())


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
        """Whether the session is there: its folder holds a log of some epoch (older ones may
        have been removed), or something other than a folder stands at its name, which
        `resume` refuses, saying what. A folder without a log is not a session: `create` moves
        it aside. So `exists` and `create` agree, and no id is ever wedged between
        `no_such_session` and `session_exists`."""
        folder = self.folder(session)
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return False
        return not stat.S_ISDIR(st.st_mode) or bool(epochs_in(self.fs.list_dir(folder)))

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
        line, link = seal(dumps(start), Link(0, start.baseline))
        fd, remains = await trio.to_thread.run_sync(self._create, session, data, line)
        log_path = self.folder(session) / LOG_FILE
        log = Log([start], link, chained_from=0)
        opened = Session(
            self.fs, session, baseline, log, fd, len(line), log_path, baseline_data=data
        )
        opened.remains = remains
        return opened

    def _create(self, session: SessionId, baseline: bytes, line: bytes) -> tuple[int, Path | None]:
        fs, final = self.fs, self.folder(session)
        if self.exists(session):
            raise SessionExists(session)
        staging = self.sessions / f"{_NEW}{session.value}-{secrets.token_hex(4)}"
        remains = None
        try:
            remains = self._clear_remains(final)
            fs.makedirs(self.sessions)
            fs.mkdir(staging)
            fs.write_new(staging / BASELINE_FILE, baseline)
            fs.write_new(staging / LOG_FILE, line)
            fs.fsync_dir(staging)
            try:
                fs.rename(staging, final)
            except OSError as exc:
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise SessionExists(session) from None
                raise
            fs.fsync_dir(self.sessions)
            return fs.open_append(final / LOG_FILE), remains
        except OSError as exc:
            raise StorageError(final, os_reason(exc)) from None
        finally:
            fs.remove_tree(staging)

    def _clear_remains(self, folder: Path) -> Path | None:
        """Make room for a new session where a folder without a log stands: removed when
        empty, else moved aside (kept, never swept); returns where it went."""
        if not os.path.lexists(folder):
            return None
        if not self.fs.list_dir(folder):
            os.rmdir(folder)
            return None
        aside = self.sessions / f"{_ASIDE}{folder.name}-{secrets.token_hex(4)}"
        self.fs.rename(folder, aside)
        return aside

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
        if not self.exists(session):
            raise NoSuchSession(session)
        if (said := problem(folder)) is not None:
            raise Untrusted(folder, said)
        # Only the current epoch's files are read, however many came before.
        names = self.fs.list_dir(folder)
        if not (found := epochs_in(names)):
            raise NoSuchSession(session)
        epoch = found[-1]
        sweep(self.fs, folder, names)
        log_path = folder / log_name(epoch)
        try:
            fd = self.fs.open_append(log_path)
        except FileNotFoundError:
            raise NoSuchSession(session) from None
        except OSError as exc:  # opened to append: a read-only disk says "cannot write"
            raise StorageError(log_path, os_reason(exc)) from None
        try:
            opened = self._resume_from(session, fd, epoch)
        except BaseException:
            self.fs.close(fd)
            raise
        if isinstance(opened.records[-1], EpochEndRecord):
            # A switch decided (its epoch_end is durable) but not finished: finish it.
            try:
                opened.begin_epoch_sync(self.clock.now())
            except BaseException:
                opened.close()
                raise
        return opened

    def _resume_from(self, session: SessionId, fd: int, epoch: int) -> Session:
        folder = self.folder(session)
        log_path, baseline_path = folder / log_name(epoch), folder / baseline_name(epoch)
        try:
            data = self.fs.read_all(fd)
            baseline_data = self.fs.read(baseline_path)
        except OSError as exc:
            raise StorageError(folder, os_reason(exc), reading=True) from None
        start = session_start(data, log_path)
        if start.session != session:
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
            raise TornLog(baseline_path, 1, f"not a baseline: {exc}") from None
        aside = None if end == len(data) else self._set_aside(log_path, data, end)
        try:
            if aside is not None:
                self.fs.truncate(fd, end)
                self.fs.fsync(fd)
        except OSError as exc:
            raise StorageError(log_path, os_reason(exc)) from None
        return Session(
            self.fs, session, baseline, log, fd, end, log_path,
            baseline_data=baseline_data, set_aside=aside,
        )  # fmt: skip

    def _set_aside(self, log_path: Path, data: bytes, end: int) -> SetAside:
        """Keep the bytes of an unfinished write in `<n>.jsonl.torn-<offset>` (made durable
        before the log is cut back to `end`): nothing is thrown away."""
        fs, tail = self.fs, data[end:]
        path = log_path.with_name(f"{log_path.name}.torn-{end}")
        for n in range(2, 1000):
            if not path.exists():
                break
            path = log_path.with_name(f"{log_path.name}.torn-{end}-{n}")
        try:
            fs.write_new(path, tail)
            fs.fsync_dir(path.parent)
        except OSError as exc:
            raise StorageError(path, os_reason(exc)) from None
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

"""Bringing the recall index up to date with its sources: the notes and each epoch's log of
each session, read from where the index stopped (SPEC section 17; `index.py` owns the
database).

Each file is a *source* (`sources`: its path under the home, its identity, how far it was
read, the chain's hash there, and `entries.Cursor`). Its new whole lines are read and must
follow the chain where it stopped; a source that was replaced, cut or rewritten since is read
again from its start, and one that is gone leaves the index. One transaction a source, so two
processes (brokerd, `bxctl memory`) may bring the index up to date at once: each reads where
the other left it. A source that cannot be read is told (`Updated.problems`), never fatal.
The files are opened as the store opens them: never through a link, only if they are this
user's alone. Blocking calls.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from attrs import frozen

from .. import layout
from ..proto import (
    Baseline,
    DecodeError,
    InvalidValue,
    SessionId,
    loads,
    parse_json,
    spaced,
    unstructure,
)
from ..session import (
    Exposed,
    Link,
    SessionError,
    StorageError,
    TornLog,
    parse_baseline,
    parse_log,
    parse_more,
    sha256_hex,
)
from ..store import FileSystem, exposure, open_checked, session_folders
from .entries import Cursor, Entry, log_entries, note_entries
from .errors import NotesDamaged
from .notes_file import GENESIS, parse_notes

__all__ = ["NOTES", "Sources", "Updated", "session_names", "transaction"]

NOTES = layout.NOTES_SOURCE  # the notes' source, by its path under the home


@frozen
class Updated:
    """What bringing the index up to date did: passages added and taken out, sources read,
    and the sources it could not read (each a sentence naming the file)."""

    added: int = 0
    removed: int = 0
    read: int = 0
    problems: tuple[str, ...] = ()

    def __add__(self, other: Updated) -> Updated:
        return Updated(
            self.added + other.added,
            self.removed + other.removed,
            self.read + other.read,
            self.problems + other.problems,
        )


class Sources:
    """The sources of one home, read into the index open as `db`."""

    def __init__(self, db: sqlite3.Connection, home: Path, fs: FileSystem) -> None:
        self.db = db
        self.home = home
        self.fs = fs

    def all(self) -> Updated:
        """Every source: the notes, each session (a name in `sessions/` that is no session id
        is passed over), and out with the sessions that are gone."""
        done = self.notes()
        names = session_names(self.home)
        for name in names:
            done += self.session(name)
        return done + self.prune(names)

    def prune(self, names: Sequence[str] | None = None) -> Updated:
        """Out with the sources of every session that is gone (or is no session); `names`:
        the sessions there, when just listed."""
        names = session_names(self.home) if names is None else names
        known = {layout.session_sources(name) for name in names}
        done = Updated()
        listed = self.db.execute("SELECT path FROM sources WHERE path != ?", (NOTES,))
        for (path,) in listed.fetchall():
            if path[: path.rfind("/") + 1] not in known:  # its session was removed
                with transaction(self.db):
                    done += self.drop(path)
        return done

    def session(self, session: str) -> Updated:
        """One session: each epoch's log read from where it stopped; the sources of a session
        that is gone (no folder, no log) or that may not be trusted taken out."""
        if not _session_id(session):
            return Updated()
        folder = layout.session_folder(self.home, session)
        done, epochs = Updated(), []
        if (said := exposure(folder)) is not None:
            done = Updated(problems=(f"{folder} was not indexed: it {said}",))
        else:
            try:
                epochs = layout.epochs_in(os.listdir(folder))
            except (FileNotFoundError, NotADirectoryError):
                pass  # gone
            except OSError as exc:
                return Updated(problems=(f"{folder} was not indexed: {exc.strerror or exc}",))
        for epoch in epochs:
            done += self._log(folder, session, epoch)
        prefix = layout.session_sources(session)
        held = self.db.execute(
            "SELECT path FROM sources WHERE substr(path, 1, ?) = ?", (len(prefix), prefix)
        ).fetchall()
        for (path,) in held:
            if layout.epoch_of(path[len(prefix) :]) not in epochs:
                with transaction(self.db):
                    done += self.drop(path)
        return done

    def again(self, source: str) -> Updated:
        """The session of a log source read again (`session`); a source that is no log of a
        session (an index written otherwise) taken out."""
        session = layout.session_of_source(source)
        if session is not None and _session_id(session):
            return self.session(session)
        with transaction(self.db):
            return self.drop(source)

    def _log(self, folder: Path, session: str, epoch: int) -> Updated:
        """One epoch's log, from where it stopped; read again from its start when what follows
        does not follow the chain there (the log was cut back and grew again)."""
        path = folder / layout.log_name(epoch)
        rel = layout.log_source(session, epoch)
        try:
            return self._fresh(rel, lambda: self._read_log(path, rel, session, epoch))
        except (TornLog, StorageError, Exposed, DecodeError, OSError) as error:
            return Updated(problems=(f"{path} was not indexed: {error}",))

    def _fresh(self, source: str, read: Callable[[], Updated]) -> Updated:
        """`read` of `source` in one transaction; when what it found does not follow on from
        where the index stopped (`_Stale`), the source's passages out and `read` again from
        its start, in another."""
        try:
            with transaction(self.db):
                return read()
        except _Stale:
            with transaction(self.db):
                removed = self.drop(source).removed
                again = read()
            return Updated(again.added, again.removed + removed, again.read)

    def _read_log(self, path: Path, rel: str, session: str, epoch: int) -> Updated:
        removed = 0
        with _opened(path) as (fd, st):
            row = self.db.execute(
                "SELECT dev, ino, offset, seq, hash, cursor FROM sources WHERE path = ?", (rel,)
            ).fetchone()
            if row is not None and (row[:2] != (st.st_dev, st.st_ino) or st.st_size < row[2]):
                removed = self.drop(rel).removed  # replaced or cut: read it again
                row = None
            if row is not None and st.st_size == row[2]:
                return Updated(removed=removed)
            baseline_data = self.fs.read(path.with_name(layout.baseline_name(epoch)))
            # From where it stopped; a log from before the chain is read whole each time.
            whole = row is None or not row[4]
            offset = 0 if whole else row[2]
            data = os.pread(fd, st.st_size - offset, offset)
        data = data[: data.rfind(b"\n") + 1]  # a write under way, or cut short: not yet
        if whole:
            log = parse_log(data, path, sha256_hex(baseline_data))
            done = row[3] if row is not None else 0
            records, cursor = log.records[done:], _cursor(row[5]) if row is not None else Cursor()
        else:
            done, cursor = row[3], _cursor(row[5])
            try:
                log = parse_more(data, path, Link(done, row[4]))
            except TornLog as error:
                raise _Stale(str(error)) from error  # not where it stopped: read it whole
            records = log.records
        entries, cursor = log_entries(records, cursor, session, done + 1, _fenced(baseline_data))
        added = self._insert(rel, entries)
        chained = log.chained_from == 0
        self.db.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                rel,
                st.st_dev,
                st.st_ino,
                offset + len(data),
                done + len(records),
                log.link.hash if chained else "",
                spaced(unstructure(cursor)),
            ),
        )
        return Updated(added, removed, 1)

    def notes(self) -> Updated:
        """The notes, from where they stopped; read again from their start when what follows
        does not follow the chain there."""
        path = layout.notes_file(self.home)
        try:
            return self._fresh(NOTES, lambda: self._read_notes(path))
        except FileNotFoundError:
            with transaction(self.db):
                return self.drop(NOTES)
        except (NotesDamaged, StorageError, Exposed, OSError) as error:
            return Updated(problems=(f"{path} was not indexed: {error}",))

    def _read_notes(self, path: Path) -> Updated:
        removed = 0
        with _opened(path) as (fd, st):
            row = self.db.execute(
                "SELECT dev, ino, offset, seq, hash FROM sources WHERE path = ?", (NOTES,)
            ).fetchone()
            if row is not None and (row[:2] != (st.st_dev, st.st_ino) or st.st_size < row[2]):
                removed = self.drop(NOTES).removed
                row = None
            offset = row[2] if row is not None else 0
            if st.st_size == offset:
                return Updated(removed=removed)
            data = os.pread(fd, st.st_size - offset, offset)
        after = Link(row[3], row[4]) if row is not None else Link(0, GENESIS)
        try:
            records, link, end = parse_notes(data, path, after)
        except NotesDamaged as error:
            if row is None:
                raise
            raise _Stale(str(error)) from error
        made, withdrawn = note_entries(records, after.seq + 1)
        for note in withdrawn:
            removed += self._delete_where("note = ?", (note,))
        added = self._insert(NOTES, made)
        kept = (NOTES, st.st_dev, st.st_ino, offset + end, link.seq, link.hash, "")
        self.db.execute("INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)", kept)
        return Updated(added, removed, 1)

    def _insert(self, source: str, entries: Sequence[Entry]) -> int:
        """Add `entries` as passages of `source`: a summary once a session (an opening's and
        its `epoch_end`'s are the same summary)."""
        kept, summaries = [], set()
        for e in entries:
            if e.summary is not None:
                if (e.session, e.summary) in summaries or self.db.execute(
                    "SELECT 1 FROM entries WHERE session IS ? AND summary = ?",
                    (e.session, e.summary),
                ).fetchone():
                    continue
                summaries.add((e.session, e.summary))
            kept.append(e)
        (last,) = self.db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()
        rows = [
            (
                last + n,
                source,
                e.kind,
                e.seq,
                e.time,
                e.session,
                e.epoch,
                e.turn,
                int(e.untrusted),
                e.tool,
                e.summary,
                e.note,
                int(e.pinned),
                e.text,
            )
            for n, e in enumerate(kept, 1)
        ]
        self.db.executemany(f"INSERT INTO entries VALUES ({','.join('?' * 14)})", rows)
        self.db.executemany(
            "INSERT INTO search (rowid, text) VALUES (?, ?)", [(row[0], row[-1]) for row in rows]
        )
        return len(rows)

    def drop(self, source: str) -> Updated:
        """Take a source and its passages out of the index (its file is gone, or must be
        read again from its start)."""
        removed = self._delete_where("source = ?", (source,))
        self.db.execute("DELETE FROM sources WHERE path = ?", (source,))
        return Updated(removed=removed)

    def _delete_where(self, where: str, values: tuple[str, ...]) -> int:
        self.db.execute(
            "INSERT INTO search (search, rowid, text) SELECT 'delete', id, text "
            f"FROM entries WHERE {where}",
            values,
        )
        return self.db.execute(f"DELETE FROM entries WHERE {where}", values).rowcount


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (taken at once, waiting for another process's), committed at the
    end of the block, rolled back if it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):  # a damaged file may have ended it already
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[tuple[int, os.stat_result]]:
    """A source open to read (never through a link; only if it is this user's alone), and
    what `fstat` says of it.

    Raises:
        FileNotFoundError: it is gone.
        Exposed, OSError: as `open_checked` does.
    """
    fd = open_checked(path, os.O_RDONLY)
    try:
        yield fd, os.fstat(fd)
    finally:
        os.close(fd)


def _fenced(data: bytes) -> Baseline | None:
    """The epoch's baseline when its calls are tool blocks (a fenced session), else None: a
    native session's calls are in its records."""
    try:
        baseline = parse_baseline(data)
    except DecodeError:
        return None
    return baseline if baseline.fenced is not None else None


class _Stale(Exception):
    """What a source holds now does not follow where the index stopped reading it."""


def _cursor(text: str) -> Cursor:
    """The reading's place as the index keeps it.

    Raises:
        _Stale: it is not one (an index written otherwise): the source is read again.
    """
    try:
        return loads(Cursor, text)
    except DecodeError as exc:
        raise _Stale(f"the index's place in it is not readable: {exc}") from exc


def session_names(home: Path) -> list[str]:
    """The names in `<home>/sessions/` that are session ids (a hidden name, or a file of
    another name, is none), oldest first by name."""
    return sorted(
        folder.name
        for folder in session_folders(home)
        if _session_id(folder.name) and not _what_if(folder)
    )


def _what_if(folder: Path) -> bool:
    """Whether the session in `folder` is a what-if (`bxctl replay --with`): another model's
    answers to the owner's messages, never memory."""
    try:
        first = FileSystem().read_first_line(folder / layout.log_name(0))
        start = parse_json(first)
    except (OSError, SessionError, DecodeError):
        return False
    return type(start) is dict and start.get("what_if") is not None


def _session_id(name: str) -> bool:
    """Whether `name` (in `sessions/`, or from the index) is a session id."""
    try:
        SessionId(name)
    except InvalidValue:
        return False
    return True

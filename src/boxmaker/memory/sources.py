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
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
from attrs import frozen

from .. import layout
from ..proto import Baseline, DecodeError
from ..session import (
    Link,
    StorageError,
    TornLog,
    Untrusted,
    parse_baseline,
    parse_log,
    parse_more,
    sha256_hex,
)
from ..store import FileSystem, open_checked, session_folders
from .entries import Cursor, Entry, log_entries, note_entries
from .errors import NotesDamaged
from .notes_file import GENESIS, parse_notes

__all__ = ["NOTES", "Sources", "Updated", "transaction"]

NOTES = "memory/notes.jsonl"  # the notes' source, by its path under the home


@frozen
class Updated:
    """What bringing the index up to date did: passages added and taken out, sources read,
    and the sources it could not read (each a sentence naming the file)."""

    added: int = 0
    removed: int = 0
    read: int = 0
    problems: tuple[str, ...] = ()

    def __add__(self, other: Updated) -> Updated:
        return Updated(self.added + other.added, self.removed + other.removed,
                       self.read + other.read, self.problems + other.problems)  # fmt: skip


class Sources:
    """The sources of one home, read into the index open as `db`."""

    def __init__(self, db: sqlite3.Connection, home: Path, fs: FileSystem) -> None:
        self.db = db
        self.home = home
        self.fs = fs

    def all(self) -> Updated:
        done = self.notes()
        folders = session_folders(self.home)
        for folder in folders:
            done += self.session(folder.name)
        known = {f"sessions/{folder.name}/" for folder in folders}
        listed = self.db.execute("SELECT path FROM sources WHERE path LIKE 'sessions/%'")
        for (path,) in listed.fetchall():
            if path[: path.rindex("/") + 1] not in known:  # its session was removed
                with transaction(self.db):
                    done += self.drop(path)
        return done

    def session(self, session: str) -> Updated:
        folder = layout.session_folder(self.home, session)
        done = Updated()
        epochs = layout.epochs_in(self.fs.list_dir(folder))
        for epoch in epochs:
            done += self._log(folder, session, epoch)
        for (path,) in self.db.execute("SELECT path FROM sources WHERE path LIKE ?",
                                       (f"sessions/{session}/%",)).fetchall():  # fmt: skip
            if int(path.rsplit("/", 1)[1].split(".")[0]) not in epochs:
                with transaction(self.db):
                    done += self.drop(path)
        return done

    def _log(self, folder: Path, session: str, epoch: int) -> Updated:
        path = folder / layout.log_name(epoch)
        rel = f"sessions/{session}/{epoch}.jsonl"
        try:
            with transaction(self.db):
                return self._read_log(path, rel, session, epoch)
        except (TornLog, StorageError, Untrusted, DecodeError, OSError) as error:
            return Updated(problems=(f"{path} was not indexed: {error}",))

    def _read_log(self, path: Path, rel: str, session: str, epoch: int) -> Updated:
        removed = 0
        with _opened(path) as (fd, st):
            row = self.db.execute("SELECT dev, ino, offset, seq, hash, cursor FROM sources "
                             "WHERE path = ?", (rel,)).fetchone()  # fmt: skip
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
            log = parse_more(data, path, Link(done, row[4]))
            records = log.records
        entries, cursor = log_entries(records, cursor, session, done + 1, _fenced(baseline_data))
        added = self._insert(rel, entries)
        chained = log.chained_from == 0
        self.db.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)",
            (rel, st.st_dev, st.st_ino, offset + len(data), done + len(records),
             log.link.hash if chained else "", json.dumps(attrs.asdict(cursor))),
        )  # fmt: skip
        return Updated(added, removed, 1)

    def notes(self) -> Updated:
        path = layout.notes_file(self.home)
        try:
            with transaction(self.db):
                return self._read_notes(path)
        except FileNotFoundError:
            with transaction(self.db):
                return self.drop(NOTES)
        except (NotesDamaged, StorageError, Untrusted, OSError) as error:
            return Updated(problems=(f"{path} was not indexed: {error}",))

    def _read_notes(self, path: Path) -> Updated:
        removed = 0
        with _opened(path) as (fd, st):
            row = self.db.execute("SELECT dev, ino, offset, seq, hash FROM sources WHERE path = ?",
                             (NOTES,)).fetchone()  # fmt: skip
            if row is not None and (row[:2] != (st.st_dev, st.st_ino) or st.st_size < row[2]):
                removed = self.drop(NOTES).removed
                row = None
            offset = row[2] if row is not None else 0
            if st.st_size == offset:
                return Updated(removed=removed)
            data = os.pread(fd, st.st_size - offset, offset)
        after = Link(row[3], row[4]) if row is not None else Link(0, GENESIS)
        records, link, end = parse_notes(data, path, after)
        made, withdrawn = note_entries(records, after.seq + 1)
        for note in withdrawn:
            removed += self._delete_where("note = ?", (note,))
        added = self._insert(NOTES, made)
        kept = (NOTES, st.st_dev, st.st_ino, offset + end, link.seq, link.hash, "")
        self.db.execute("INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)", kept)
        return Updated(added, removed, 1)

    def _insert(self, source: str, entries: Sequence[Entry]) -> int:
        kept = [
            e for e in entries
            if e.summary is None or self.db.execute(
                "SELECT 1 FROM entries WHERE session IS ? AND summary = ?", (e.session, e.summary)
            ).fetchone() is None
        ]  # fmt: skip
        (last,) = self.db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()
        rows = [
            (last + n, source, e.kind, e.seq, e.time, e.session, e.epoch, e.turn,
             int(e.untrusted), e.tool, e.summary, e.note, int(e.pinned), e.text)
            for n, e in enumerate(kept, 1)
        ]  # fmt: skip
        self.db.executemany(f"INSERT INTO entries VALUES ({','.join('?' * 14)})", rows)
        self.db.executemany("INSERT INTO search (rowid, text) VALUES (?, ?)",
                       [(row[0], row[-1]) for row in rows])  # fmt: skip
        return len(rows)

    def drop(self, source: str) -> Updated:
        """Take a source and its passages out of the index (its file is gone, or must be
        read again from its start)."""
        removed = self._delete_where("source = ?", (source,))
        self.db.execute("DELETE FROM sources WHERE path = ?", (source,))
        return Updated(removed=removed)

    def _delete_where(self, where: str, values: tuple[str, ...]) -> int:
        self.db.execute("INSERT INTO search (search, rowid, text) SELECT 'delete', id, text "
                   f"FROM entries WHERE {where}", values)  # fmt: skip
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
        Untrusted, OSError: as `open_checked` does.
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


def _cursor(text: str) -> Cursor:
    raw = json.loads(text)
    return Cursor(raw["epoch"], raw["turns"], raw["skip"],
                  tuple((id, name) for id, name in raw["calls"]))  # fmt: skip

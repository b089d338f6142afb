"""The recall index, `<home>/memory/index.sqlite`: SQLite FTS5 (the standard library's) over
the notes and every epoch of every session, derived from them and never the truth.

Each file it reads is a *source* (`sources`: its path under the home, its identity, how far it
was read, the chain's hash there, and `entries.Cursor`). Bringing the index up to date reads
each source from where it stopped, its new whole lines only, checking that they follow the
chain where it stopped; a source that was replaced, cut or rewritten since is read again from
its start, and one that is gone leaves the index. One transaction a source, so two processes
(brokerd, `bxctl memory`) may bring it up to date at once: each reads where the other left
it. An index that is missing is made; one of another schema (stale) or that SQLite finds
damaged is rebuilt from nothing, in place: deleting it loses nothing but the time to rebuild.

Passages (`entries`, with where each came from) are searched with BM25 through an FTS5 table
whose content they are (Porter stemming, diacritics folded). The files it reads are opened as
the store opens them: never through a link, only if they are this user's alone. Blocking
calls; brokerd makes them in a worker thread, one at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

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
from ..store import FileSystem, open_checked, session_folders, storage_errors, untrusted_reason
from .entries import Cursor, Entry, log_entries, note_entries
from .errors import NotesDamaged
from .notes_file import GENESIS, parse_notes
from .query import Hit, match_expression

__all__ = ["SCHEMA", "RecallIndex", "Updated"]

T = TypeVar("T")

SCHEMA = 1  # `PRAGMA user_version`: an index of another is stale, and rebuilt
NOTES = "memory/notes.jsonl"  # the notes' source, by its path under the home
_TABLES = """
CREATE TABLE sources (
    path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER, offset INTEGER, seq INTEGER,
    hash TEXT, cursor TEXT
);
CREATE TABLE entries (
    id INTEGER PRIMARY KEY, source TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER,
    time TEXT, session TEXT, epoch INTEGER, turn INTEGER, untrusted INTEGER, tool TEXT,
    summary TEXT, note TEXT, pinned INTEGER, text TEXT NOT NULL
);
CREATE INDEX entries_source ON entries (source);
CREATE INDEX entries_note ON entries (note) WHERE note IS NOT NULL;
CREATE UNIQUE INDEX entries_summary ON entries (session, summary) WHERE summary IS NOT NULL;
CREATE VIRTUAL TABLE search USING fts5 (
    text, content='entries', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
"""
_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_HIT = (
    "SELECT e.id, e.kind, snippet(search, 0, '', '', ' … ', 24), e.time, e.session, e.turn, "
    "e.untrusted, e.tool, e.summary, e.note, e.pinned, bm25(search) AS score "
    "FROM search JOIN entries AS e ON e.id = search.rowid WHERE search MATCH :match "
    "AND NOT (e.kind != 'note' AND e.session IS :session AND coalesce(e.turn, 0) >= :first) "
    "AND NOT (:own = 0 AND e.kind = 'summary' AND e.session IS :session) "
    "ORDER BY CASE e.kind WHEN 'note' THEN score * 2 ELSE score END, e.id DESC LIMIT :most"
)


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


class RecallIndex:
    """The recall index of one home. Not thread-safe: one caller at a time."""

    def __init__(self, home: Path, fs: FileSystem | None = None) -> None:
        self.home = home
        self.path = layout.recall_index(home)
        self.fs = fs or FileSystem()
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self.rebuilt = 0  # times it was found missing, stale or damaged and made anew

    # --- opening -------------------------------------------------------------------------

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db, self._identity = None, None

    def _connect(self) -> sqlite3.Connection:
        """The open index: opened again when the file at its path is no longer the one open
        (deleted, or replaced), made when missing, rebuilt when of another schema.

        Raises:
            Untrusted: the index or its folder is a link, or not this user's alone.
            StorageError: it cannot be opened or made.
        """
        identity = self._on_disk()
        if self._db is not None and identity == self._identity:
            return self._db
        self.close()
        folder = self.path.parent
        with storage_errors(folder):
            self.fs.makedirs(folder)
        for place, is_folder in ((folder, True), (self.path, False)):
            if (said := untrusted_reason(place, folder=is_folder)) is not None:
                raise Untrusted(place, said)
        if identity is None:  # made 0600 here: SQLite makes its journal with the same mode
            with storage_errors(self.path), contextlib.suppress(FileExistsError):
                os.close(self.fs.create(self.path))
            identity = self._on_disk()
        try:
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise StorageError(self.path, str(exc)) from exc
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("PRAGMA synchronous = NORMAL")  # derived: a crash at worst means a rebuild
        self._db, self._identity = db, identity
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version != SCHEMA:  # missing (made just now) or stale: filled from nothing
            self._made_anew(db, fresh=version == 0)
            self._update_all(db)
        return db

    def _on_disk(self) -> tuple[int, int] | None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _made_anew(self, db: sqlite3.Connection, *, fresh: bool) -> None:
        """Every table dropped and made again, empty, in one transaction (other processes
        wait): the index of a home whose sources are then read from their start."""
        with _transaction(db):
            names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for name in names:
                if name == "search" or not name.startswith("search_"):
                    db.execute(f'DROP TABLE IF EXISTS "{name}"')
            for statement in _TABLES.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA}")
        if not fresh:
            self.rebuilt += 1

    def _damaged(self, error: sqlite3.DatabaseError) -> bool:
        """Whether `error` says the file is not an index (then it is deleted and made again):
        damaged, not a database at all, or missing a table of the schema."""
        name = getattr(error, "sqlite_errorname", "")
        return name.startswith(_DAMAGED) or "no such table" in str(error)

    # --- what callers do -----------------------------------------------------------------

    def update(self) -> Updated:
        """Bring the index up to date with the notes and every session's every epoch (and
        out with the sessions that are gone).

        Raises:
            Untrusted, StorageError: the index cannot be used (not a source: those are
                told in `Updated.problems`).
        """
        return self._with_db(self._update_all)

    def update_session(self, session: str) -> Updated:
        """Bring the index up to date with one session (its current epoch and any before it
        not read to their end)."""
        return self._with_db(lambda db: self._update_session(db, session))

    def update_notes(self) -> Updated:
        return self._with_db(self._update_notes)

    def rebuild(self) -> Updated:
        """Make the index anew from nothing (`bxctl memory reindex`)."""

        def anew(db: sqlite3.Connection) -> Updated:
            self._made_anew(db, fresh=False)
            return self._update_all(db)

        return self._with_db(anew)

    def search(
        self,
        words: Sequence[str],
        most: int,
        *,
        session: str | None = None,
        first_turn: int = 0,
        own_summaries: bool = True,
    ) -> list[Hit]:
        """The best `most` passages holding any of `words` (notes weigh double), each with how
        many of the words it holds; none of `session`'s from turn `first_turn` on (they are in
        its conversation), nor its summaries unless `own_summaries`."""
        if not words:
            return []

        def find(db: sqlite3.Connection) -> list[Hit]:
            rows = db.execute(_HIT, {
                "match": match_expression(words), "session": session, "first": first_turn,
                "own": int(own_summaries), "most": most,
            }).fetchall()  # fmt: skip
            ids = [row[0] for row in rows]
            marks = ",".join("?" * len(ids))
            matched = dict.fromkeys(ids, 0)
            for word in words if len(words) > 1 and ids else ():
                found = db.execute(f"SELECT rowid FROM search WHERE search MATCH ? AND rowid "
                                   f"IN ({marks})", (match_expression([word]), *ids))  # fmt: skip
                for (rowid,) in found:
                    matched[rowid] += 1
            one = len(words) == 1
            return [
                Hit(kind, snippet, time, owner, turn, bool(untrusted), tool, summary, note,
                    bool(pinned), 1 if one else matched[id])
                for id, kind, snippet, time, owner, turn, untrusted, tool, summary, note,
                pinned, _score in rows
            ]  # fmt: skip

        return self._with_db(find)

    def counts(self) -> dict[str, int]:
        """How many passages of each kind the index holds, and its sources."""

        def count(db: sqlite3.Connection) -> dict[str, int]:
            kinds = dict(db.execute("SELECT kind, count(*) FROM entries GROUP BY kind").fetchall())
            (sources,) = db.execute("SELECT count(*) FROM sources").fetchone()
            return {**kinds, "sources": sources}

        return self._with_db(count)

    def _with_db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the open index; an index SQLite finds damaged is deleted, made again and
        filled from the sources, then `work` runs once more.

        Raises:
            StorageError: SQLite failed otherwise (a full disk, a lock held past the wait).
        """
        for attempt in (1, 2):
            try:
                return work(self._connect())
            except sqlite3.DatabaseError as error:
                if attempt == 2 or not self._damaged(error):
                    raise StorageError(self.path, f"the recall index failed: {error}") from error
                self._delete()
                self._update_all(self._connect())
                self.rebuilt += 1
        raise AssertionError("unreachable")

    def _delete(self) -> None:
        self.close()
        for name in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{name}")

    # --- reading the sources -------------------------------------------------------------

    def _update_all(self, db: sqlite3.Connection) -> Updated:
        done = self._update_notes(db)
        folders = session_folders(self.home)
        for folder in folders:
            done += self._update_session(db, folder.name)
        known = {f"sessions/{folder.name}/" for folder in folders}
        for (path,) in db.execute("SELECT path FROM sources WHERE path LIKE 'sessions/%'"):
            if path[: path.rindex("/") + 1] not in known:
                done += self._drop(db, path)
        return done

    def _update_session(self, db: sqlite3.Connection, session: str) -> Updated:
        folder = layout.session_folder(self.home, session)
        done = Updated()
        epochs = layout.epochs_in(self.fs.list_dir(folder))
        for epoch in epochs:
            done += self._update_log(db, folder, session, epoch)
        for (path,) in db.execute("SELECT path FROM sources WHERE path LIKE ?",
                                  (f"sessions/{session}/%",)).fetchall():  # fmt: skip
            if int(path.rsplit("/", 1)[1].split(".")[0]) not in epochs:
                done += self._drop(db, path)
        return done

    def _update_log(
        self, db: sqlite3.Connection, folder: Path, session: str, epoch: int
    ) -> Updated:
        path = folder / layout.log_name(epoch)
        rel = f"sessions/{session}/{epoch}.jsonl"
        try:
            with _transaction(db):
                return self._read_log(db, path, rel, session, epoch)
        except (TornLog, StorageError, Untrusted, DecodeError, OSError) as error:
            return Updated(problems=(f"{path} was not indexed: {error}",))

    def _read_log(
        self, db: sqlite3.Connection, path: Path, rel: str, session: str, epoch: int
    ) -> Updated:
        removed = 0
        with _opened(path) as (fd, st):
            row = db.execute("SELECT dev, ino, offset, seq, hash, cursor FROM sources "
                             "WHERE path = ?", (rel,)).fetchone()  # fmt: skip
            if row is not None and (row[:2] != (st.st_dev, st.st_ino) or st.st_size < row[2]):
                removed = self._drop(db, rel).removed  # replaced or cut: read it again
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
        added = self._insert(db, rel, entries)
        chained = log.chained_from == 0
        db.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)",
            (rel, st.st_dev, st.st_ino, offset + len(data), done + len(records),
             log.link.hash if chained else "", json.dumps(attrs.asdict(cursor))),
        )  # fmt: skip
        return Updated(added, removed, 1)

    def _update_notes(self, db: sqlite3.Connection) -> Updated:
        path = layout.notes_file(self.home)
        try:
            with _transaction(db):
                return self._read_notes(db, path)
        except FileNotFoundError:
            with _transaction(db):
                return self._drop(db, NOTES)
        except (NotesDamaged, StorageError, Untrusted, OSError) as error:
            return Updated(problems=(f"{path} was not indexed: {error}",))

    def _read_notes(self, db: sqlite3.Connection, path: Path) -> Updated:
        removed = 0
        with _opened(path) as (fd, st):
            row = db.execute("SELECT dev, ino, offset, seq, hash FROM sources WHERE path = ?",
                             (NOTES,)).fetchone()  # fmt: skip
            if row is not None and (row[:2] != (st.st_dev, st.st_ino) or st.st_size < row[2]):
                removed = self._drop(db, NOTES).removed
                row = None
            offset = row[2] if row is not None else 0
            if st.st_size == offset:
                return Updated(removed=removed)
            data = os.pread(fd, st.st_size - offset, offset)
        after = Link(row[3], row[4]) if row is not None else Link(0, GENESIS)
        records, link, end = parse_notes(data, path, after)
        made, withdrawn = note_entries(records, after.seq + 1)
        for note in withdrawn:
            removed += self._delete_where(db, "note = ?", (note,))
        added = self._insert(db, NOTES, made)
        kept = (NOTES, st.st_dev, st.st_ino, offset + end, link.seq, link.hash, "")
        db.execute("INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)", kept)
        return Updated(added, removed, 1)

    def _insert(self, db: sqlite3.Connection, source: str, entries: Sequence[Entry]) -> int:
        kept = [
            e for e in entries
            if e.summary is None or db.execute(
                "SELECT 1 FROM entries WHERE session IS ? AND summary = ?", (e.session, e.summary)
            ).fetchone() is None
        ]  # fmt: skip
        (last,) = db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()
        rows = [
            (last + n, source, e.kind, e.seq, e.time, e.session, e.epoch, e.turn,
             int(e.untrusted), e.tool, e.summary, e.note, int(e.pinned), e.text)
            for n, e in enumerate(kept, 1)
        ]  # fmt: skip
        db.executemany(f"INSERT INTO entries VALUES ({','.join('?' * 14)})", rows)
        db.executemany("INSERT INTO search (rowid, text) VALUES (?, ?)",
                       [(row[0], row[-1]) for row in rows])  # fmt: skip
        return len(rows)

    def _drop(self, db: sqlite3.Connection, source: str) -> Updated:
        """Take a source and its passages out of the index (its file is gone, or must be
        read again from its start)."""
        removed = self._delete_where(db, "source = ?", (source,))
        db.execute("DELETE FROM sources WHERE path = ?", (source,))
        return Updated(removed=removed)

    def _delete_where(self, db: sqlite3.Connection, where: str, values: tuple[str, ...]) -> int:
        db.execute("INSERT INTO search (search, rowid, text) SELECT 'delete', id, text "
                   f"FROM entries WHERE {where}", values)  # fmt: skip
        return db.execute(f"DELETE FROM entries WHERE {where}", values).rowcount


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
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

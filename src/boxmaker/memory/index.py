"""The recall index, `<home>/memory/index.sqlite`: SQLite FTS5 (the standard library's) over
the notes and every epoch of every session, derived from them and never the truth.

`sources.py` brings it up to date, a source at a time from where it stopped. An index that
is missing is made and filled; one of another schema (stale) is made again in place, and one
SQLite finds damaged is deleted and made again: deleting it loses nothing but the time to
rebuild. Passages (`entries`, with where each came from) are searched with BM25 through an
FTS5 table whose content they are (Porter stemming, diacritics folded), in bounded time
(`search.py`).
Blocking calls; brokerd makes them in a worker thread, one at a time.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from .. import layout
from ..session import Exposed, StorageError
from ..store import FileSystem, exposure, storage_errors
from .search import TOKENIZER, Found, Terms, search_index
from .sources import Sources, Updated, transaction

__all__ = ["SCHEMA", "Found", "RecallIndex", "Updated"]

T = TypeVar("T")

# `PRAGMA user_version`: an index of another is stale, and rebuilt. 2: secrecy spreads through
# its epoch (issue 41), so what an index of 1 holds after a secret must go.
SCHEMA = 2
_TABLES = f"""
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
    text, content='entries', content_rowid='id', tokenize='{TOKENIZER}'
);
"""
_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


class RecallIndex:
    """The recall index of one home. Not thread-safe: one caller at a time."""

    def __init__(self, home: Path, fs: FileSystem | None = None) -> None:
        self.home = home
        self.path = layout.recall_index(home)
        self.fs = fs or FileSystem()
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._terms: Terms | None = None  # made at the first search, kept (in memory only)
        # Times it was made anew, empty (missing, stale, damaged, or rebuilt): its sources
        # must then be read again from their start (`update`, or brokerd in the background).
        self.made = 0

    # --- opening -------------------------------------------------------------------------

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db, self._identity = None, None

    def _connect(self) -> sqlite3.Connection:
        """The open index: opened again when the file at its path is no longer the one open
        (deleted, or replaced), made empty when missing or of another schema (`made` counts).

        Raises:
            Exposed: the index or its folder is a link, or not this user's alone.
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
            if (said := exposure(place, folder=is_folder)) is not None:
                raise Exposed(place, said)
        if identity is None:  # made 0600 here: SQLite makes its journal with the same mode
            with storage_errors(self.path), contextlib.suppress(FileExistsError):
                os.close(self.fs.create(self.path))
            identity = self._on_disk()
        try:
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise StorageError(self.path, str(exc)) from exc
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("PRAGMA synchronous = OFF")  # derived: a crash at worst means a rebuild
        db.execute("PRAGMA secure_delete = ON")  # what leaves the index is overwritten
        self._db, self._identity = db, identity
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version != SCHEMA:  # missing (made just now) or stale: to be filled from nothing
            self._made_anew(db)
        return db

    def _on_disk(self) -> tuple[int, int] | None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _made_anew(self, db: sqlite3.Connection) -> None:
        """Every table dropped and made again, empty, in one transaction (other processes
        wait): the index of a home whose sources are then read from their start."""
        with transaction(db):
            names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for name in names:
                if name == "search" or not name.startswith("search_"):
                    db.execute(f'DROP TABLE IF EXISTS "{name}"')
            for statement in _TABLES.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA}")
        self.made += 1

    def _damaged(self, error: sqlite3.DatabaseError) -> bool:
        """Whether `error` says the file is not this index (then it is deleted and made
        again): damaged, not a database at all, or not of its schema (a table or a column
        missing, a view where a table should be). Not a lock held too long, a full disk or a
        read-only one: those are the file system's, and said."""
        name = getattr(error, "sqlite_errorname", "")
        said = str(error)
        schema = said.startswith(("no such", "cannot modify", "table ")) or "may not" in said
        return name.startswith(_DAMAGED) or schema

    # --- what callers do -----------------------------------------------------------------

    def update(self) -> Updated:
        """Bring the index up to date with the notes and every session's every epoch (and
        out with the sessions that are gone).

        Raises:
            Exposed, StorageError: the index cannot be used (not a source: those are
                told in `Updated.problems`).
        """
        return self._with_db(lambda db: Sources(db, self.home, self.fs).all())

    def update_session(self, session: str) -> Updated:
        """Bring the index up to date with one session (its current epoch and any before it
        not read to their end)."""
        return self._with_db(lambda db: Sources(db, self.home, self.fs).session(session))

    def update_notes(self) -> Updated:
        return self._with_db(lambda db: Sources(db, self.home, self.fs).notes())

    def prune(self) -> Updated:
        """Take the sessions that are gone out of the index."""
        return self._with_db(lambda db: Sources(db, self.home, self.fs).prune())

    def rebuild(self) -> Updated:
        """Make the index anew from nothing (`bxctl memory reindex`)."""

        def anew(db: sqlite3.Connection) -> Updated:
            self._made_anew(db)
            return Sources(db, self.home, self.fs).all()

        return self._with_db(anew)

    def search(
        self,
        words: Sequence[str],
        most: int,
        *,
        session: str | None = None,
        first_turn: int = 0,
        own_summaries: bool = True,
    ) -> Found:
        """The best `most` passages for `words` (`search.search_index`), none of `session`'s
        from turn `first_turn` on (they are in its conversation), nor its summaries unless
        `own_summaries`."""
        if not words:
            return Found([], ())
        terms = self._terms = self._terms or Terms()
        return self._with_db(
            lambda db: search_index(
                db,
                self.home,
                self.fs,
                terms,
                words,
                most,
                session=session,
                first_turn=first_turn,
                own_summaries=own_summaries,
            )
        )

    def counts(self) -> dict[str, int]:
        """How many passages of each kind the index holds, and its sources."""

        def count(db: sqlite3.Connection) -> dict[str, int]:
            kinds = dict(db.execute("SELECT kind, count(*) FROM entries GROUP BY kind").fetchall())
            (sources,) = db.execute("SELECT count(*) FROM sources").fetchone()
            return {**kinds, "sources": sources}

        return self._with_db(count)

    def _with_db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the open index; an index SQLite finds damaged (or not this index) is
        deleted and made again, empty (`made` counts: its sources are then read again), and
        `work` runs once more on it.

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
        raise AssertionError("unreachable")

    def _delete(self) -> None:
        self.close()
        for name in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{name}")

"""One search of the recall index, in bounded time whatever the index holds (SPEC section 17).

BM25 scores every passage that holds any of a query's words, so a search costs as many
passages as its words are in. A word's passages are counted first, up to `COMMON` (each count
stops there, so it costs little); the query is then its rarest words, as many as hold at most
`SCORED` passages together, ranked by BM25 (notes weigh double). Words in more than `COMMON`
passages carry little weight in a rank and would cost the most; they are searched for only
when a query has no other, and then all of them at once, newest passages first. A search of a
long message on an index of a thousand sessions takes tens of milliseconds this way, where
scoring every passage holding any of its words took half a second (docs/benchmarks.md).

How many of the query's words a passage holds (what auto-recall's threshold weighs) is read
with SQLite's own tokenizer in a table in memory, so a passage and a query are compared as the
index compares them (Porter stems, case and diacritics folded). The words weighed are all but
those too common to rank by: a word memory has never seen counts against a passage, as it
should (a message about Zanzibar is not answered by a passage that holds only its "Tuesday").

A passage is given only while its file is the one the index read (a session removed with
`bxctl rm`, or made again under the same id, is read again first, and what is gone leaves).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from ..store import FileSystem
from .query import Match, match_expression
from .sources import Sources

__all__ = ["COMMON", "SCORED", "TOKENIZER", "Found", "Terms", "search_index"]

TOKENIZER = "porter unicode61 remove_diacritics 2"
COMMON = 5_000  # passages: a word in more is too common to rank by
SCORED = 10_000  # passages one ranked search may score at most
_WHERE = (
    "FROM search JOIN entries AS e ON e.id = search.rowid WHERE search MATCH :match "
    "AND NOT (e.kind != 'note' AND e.session IS :session AND coalesce(e.turn, 0) >= :first) "
    "AND NOT (:own = 0 AND e.kind = 'summary' AND e.session IS :session) "
)
_COLUMNS = (
    "SELECT e.id, e.kind, snippet(search, 0, '', '', ' … ', 24), e.time, e.session, e.turn, "
    "e.untrusted, e.tool, e.summary, e.note, e.pinned, e.text, e.source "
)
_RANKED = (
    _COLUMNS
    + ", bm25(search) AS score "
    + _WHERE
    + "ORDER BY CASE e.kind WHEN 'note' THEN score * 2 ELSE score END, e.id DESC LIMIT :most"
)
_NEWEST = _COLUMNS + _WHERE + "ORDER BY e.id DESC LIMIT :most"


@frozen
class Found:
    """A search's passages, best first; the words it searched for (the query's rarest, or
    its too common ones), and how many of the query's words were weighed (all but the too
    common: what a passage's `matched` is out of)."""

    hits: list[Match]
    words: tuple[str, ...]
    weighed: int = 0


class Terms:
    """Text as the index reads it: its terms, by SQLite's own tokenizer, in memory."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(f"CREATE VIRTUAL TABLE t USING fts5 (text, tokenize='{TOKENIZER}')")
        self._db.execute("CREATE VIRTUAL TABLE t_terms USING fts5vocab (t, instance)")

    def of(self, texts: Sequence[str]) -> list[set[str]]:
        """The terms of each of `texts`."""
        self._db.execute("DELETE FROM t")
        self._db.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(texts))
        found: list[set[str]] = [set() for _ in texts]
        for term, at in self._db.execute("SELECT term, doc FROM t_terms"):
            found[at].add(term)
        return found


def search_index(
    db: sqlite3.Connection,
    home: Path,
    fs: FileSystem,
    terms: Terms,
    words: Sequence[str],
    most: int,
    *,
    session: str | None,
    first_turn: int,
    own_summaries: bool,
) -> Found:
    """The best `most` passages for `words` (see the module's docstring), none of `session`'s
    from turn `first_turn` on, nor its summaries unless `own_summaries`. A session removed
    since the index read it (`bxctl rm`) is taken out of it first, and none of its passages
    is given. `terms` reads which words each passage holds."""
    held = {w: _count(db, w) for w in dict.fromkeys(words)}
    weighed = [w for w, n in held.items() if n <= COMMON]
    rare = sorted((w for w in weighed if held[w]), key=held.__getitem__)
    chosen: list[str] = []
    for word in rare:
        if chosen and sum(held[w] for w in chosen) + held[word] > SCORED:
            break
        chosen.append(word)
    if chosen:
        sql, match = _RANKED, match_expression(chosen)
    else:  # only words too common to rank by: all of them, newest first
        chosen = weighed = [w for w, n in held.items() if n]
        sql, match = _NEWEST, " AND ".join(match_expression([w]) for w in chosen)
    if not chosen:
        return Found([], (), len(weighed))
    asked = {
        "match": match,
        "session": session,
        "first": first_turn,
        "own": int(own_summaries),
        "most": most,
    }
    rows = db.execute(sql, asked).fetchall()
    if stale := _stale(db, home, rows):
        sources = Sources(db, home, fs)
        for path in stale:
            sources.again(path)  # removed (its sources go) or made again (read again)
        rows = db.execute(sql, asked).fetchall()
    wanted = {term for each in terms.of(weighed) for term in each}
    holds = terms.of([row[11] for row in rows])
    return Found(
        [
            Match(
                kind,
                snippet,
                time,
                owner,
                turn,
                bool(untrusted),
                tool,
                summary,
                note,
                bool(pinned),
                len(holds[at] & wanted),
            )
            for at, (
                _id,
                kind,
                snippet,
                time,
                owner,
                turn,
                untrusted,
                tool,
                summary,
                note,
                pinned,
                *_rest,
            ) in enumerate(rows)
        ],
        tuple(chosen),
        len(weighed),
    )


def _stale(db: sqlite3.Connection, home: Path, rows: Sequence[tuple[object, ...]]) -> set[str]:
    """The sources of `rows` (logs) that are no longer the files the index read: removed, or
    made again under the same path."""
    stale = set()
    for source in {str(row[12]) for row in rows if row[1] != "note"}:
        known = db.execute("SELECT dev, ino FROM sources WHERE path = ?", (source,)).fetchone()
        try:
            st = os.lstat(home / source)
            still = known is not None and (st.st_dev, st.st_ino) == tuple(known)
        except (OSError, ValueError):
            still = False
        if not still:
            stale.add(source)
    return stale


def _count(db: sqlite3.Connection, word: str) -> int:
    """How many passages hold `word`, counted up to one more than `COMMON`."""
    (count,) = db.execute(
        "SELECT count(*) FROM (SELECT 1 FROM search WHERE search MATCH ? LIMIT ?)",
        (match_expression([word]), COMMON + 1),
    ).fetchone()
    return int(count)

"""The text search `find_tool` answers with: BM25 over the tools' names and descriptions, in an
SQLite FTS5 table held in memory (the standard library's `sqlite3`). Pure but for the table.

Names weigh more than descriptions, and a name's parts count as words (`time.convert_time`
is `time convert time`); words are stemmed (Porter), so "files" finds "file". A query is its
words as recall takes them (`memory.query_words`: the commonest of English and of chat left
out, but the verbs tools are named by, such as "get"), any of which may match, and those verbs
stand for each other's common synonyms ("add" also asks for "create"): the more and the rarer
the words a tool matches, the higher it ranks. The index is built once for a registry (a few
hundred tools take a few milliseconds) and again when a server's list changes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..memory import folded_words, match_expression, query_words

__all__ = ["ToolIndex"]

MOST_WORDS = 32  # of a query, its synonyms counted
NAME_WEIGHT = 4.0  # a word of the name counts this many times one of the description
# A word of a request, and the words tools are named with for the same act.
_ALSO = {
    "add": ("create", "new"), "make": ("create",), "new": ("create",), "open": ("create",),
    "remove": ("delete",), "erase": ("delete",), "drop": ("delete",),
    "show": ("get", "list"), "find": ("search", "get"), "look": ("search", "get"),
    "change": ("update", "set"), "edit": ("update",), "modify": ("update",),
    "fetch": ("get",), "read": ("get",), "see": ("get", "list"),
}  # a table: a word, the words it also asks for # fmt: skip
# Those words are acts tools are named by: searched for even where chat's commonest ("get").
_VERBS = frozenset((*_ALSO, *(word for also in _ALSO.values() for word in also)))


class ToolIndex:
    """The tools' names and descriptions, searchable; a tool is known by its place."""

    def __init__(self, tools: Sequence[tuple[str, str]]) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(name, description, tokenize='porter unicode61')"
        )
        self._db.executemany(
            "INSERT INTO tools (rowid, name, description) VALUES (?, ?, ?)",
            [
                (place, " ".join(folded_words(name)), text)
                for place, (name, text) in enumerate(tools)
            ],
        )

    def search(self, query: str, most: int) -> tuple[list[int], int]:
        """The places of the best `most` tools for `query`, best first, and how many matched."""
        said = query_words(query, most=MOST_WORDS, keep=_VERBS)
        words = list(dict.fromkeys(w for word in said for w in (word, *_ALSO.get(word, ()))))
        words = words[:MOST_WORDS]
        if not words:
            return [], 0
        match = match_expression(words)
        rows = self._db.execute(
            "SELECT rowid FROM tools WHERE tools MATCH ? "
            "ORDER BY bm25(tools, ?, 1.0), rowid LIMIT ?",
            (match, NAME_WEIGHT, most),
        ).fetchall()
        (count,) = self._db.execute(
            "SELECT count(*) FROM tools WHERE tools MATCH ?", (match,)
        ).fetchone()
        return [place for (place,) in rows], count

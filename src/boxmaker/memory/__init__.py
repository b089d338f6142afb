"""Memory (SPEC section 17): the notes the agent keeps (`remember`, `forget`), the memory a
new baseline holds (`core.md` and the pinned notes), and `recall` over the notes and every
session's history through an index derived from them, never the truth. The notes' file and
the index are blocking I/O (brokerd makes the thread hops; `bxctl memory` reads them
directly); the rules are pure."""

from .entries import Entry
from .errors import NotesDamaged
from .index import SCHEMA, RecallIndex
from .notes import (
    MAX_NOTE,
    PINNED_HEADING,
    Notes,
    baseline_memory,
    pinned_lines,
    remembered,
    withdrawn,
)
from .notes_file import GENESIS, NotesFile, memory_reader, memory_text, parse_notes
from .query import (
    Match,
    Recalled,
    auto_kept,
    folded_words,
    match_expression,
    query_words,
    recalled,
)
from .search import Found
from .sources import Updated, session_names

__all__ = [
    "GENESIS",
    "MAX_NOTE",
    "PINNED_HEADING",
    "SCHEMA",
    "Entry",
    "Found",
    "Match",
    "Notes",
    "NotesDamaged",
    "NotesFile",
    "RecallIndex",
    "Recalled",
    "Updated",
    "auto_kept",
    "baseline_memory",
    "folded_words",
    "match_expression",
    "memory_reader",
    "memory_text",
    "parse_notes",
    "pinned_lines",
    "query_words",
    "recalled",
    "remembered",
    "session_names",
    "withdrawn",
]
